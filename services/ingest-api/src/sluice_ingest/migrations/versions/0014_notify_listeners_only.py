"""Events NOTIFY only what someone listens to.

PostgreSQL serialises the commits of every transaction that called pg_notify, database-wide:
each takes one lock (`object pg_database 0 AccessExclusiveLock`) while it queues its
notifications. Every document transition wrote an event, and every event notified its document's
and its collection's channel, so every transition of the queue waited on every other one: at 32
concurrent workers three quarters of the busy backends were waiting on that lock
(bench/wait_events.py), and 32 workers got less done than 4.

A process registers what its waiters wait for in `event_listeners` (notify.py: one row per
document a WatchDocument follows, per collection a WatchCollection or a webhook subscription
follows, renewed while they wait), and the event triggers notify a document's or a collection's
channel only when a row names it. With nobody watching, a transition notifies nothing and takes
no database-wide lock. A process that died leaves rows that only cause a few unneeded
notifications until another process deletes them once expired.

The table is UNLOGGED (no WAL for registrations; emptied by crash recovery, after which every
process registers again as it reconnects). `sluice_jobs_available` (once per new or retried
job) and the rare collection and subscription channels still notify every time.

While at it, the event function stamps its event's transaction and notifies the collection
itself: the fill trigger, a second PL/pgSQL call for every event, runs only for events written
otherwise (a deletion's last event).

Revision ID: 0014
"""

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# The event functions' notifications, and what each becomes: the functions are rewritten from
# their current definitions, so this migration changes nothing else in them. The event function
# also stamps its event's transaction and notifies the collection itself, so the fill trigger,
# which did both for every event, now runs only for the other writers (a deletion's last event).
REWRITES = {
    "sluice_record_document_event(uuid)": (
        ("pg_notify('sluice_document_events',", "sluice_notify_listened('sluice_document_events',"),
        ("updated_at, collection_id, tenant_id)", "updated_at, collection_id, tenant_id, txid)"),
        (
            "cur.updated_at, cur.collection_id, cur.tenant_id);",
            "cur.updated_at, cur.collection_id, cur.tenant_id, pg_current_xact_id());\n"
            "    PERFORM sluice_notify_listened('sluice_collection_events', cur.collection_id::text);",
        ),
    ),
    "sluice_on_document_change()": (("pg_notify('sluice_document_events',", "sluice_notify_listened('sluice_document_events',"),),
    "sluice_event_fill()": (("pg_notify('sluice_collection_events',", "sluice_notify_listened('sluice_collection_events',"),),
}
FILL_TRIGGER = """
    DROP TRIGGER document_events_fill ON document_events;
    CREATE TRIGGER document_events_fill BEFORE INSERT ON document_events
        FOR EACH ROW {when} EXECUTE FUNCTION sluice_event_fill();
"""


def _rewrite(undo: bool) -> None:
    conn = op.get_bind()
    for function, pairs in REWRITES.items():
        source = conn.exec_driver_sql(f"SELECT pg_get_functiondef('{function}'::regprocedure)").scalar_one()
        changed = source
        for old, new in pairs:
            if undo:
                old, new = new, old
            if old not in changed:
                raise RuntimeError(f"{function} does not read as expected (no {old!r}): was it redefined?")
            changed = changed.replace(old, new)
        conn.exec_driver_sql(changed)


def upgrade() -> None:
    op.execute(
        """
        CREATE UNLOGGED TABLE event_listeners (
            channel    text NOT NULL,
            key        text NOT NULL,
            listener   uuid NOT NULL,
            expires_at timestamptz NOT NULL,
            PRIMARY KEY (channel, key, listener)
        );
        CREATE INDEX event_listeners_expiry ON event_listeners (expires_at);

        CREATE FUNCTION sluice_notify_listened(channel text, payload text) RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            IF EXISTS (SELECT 1 FROM event_listeners l WHERE l.channel = sluice_notify_listened.channel
                                                         AND l.key = payload) THEN
                PERFORM pg_notify(channel, payload);
            END IF;
        END $$;
        """
    )
    _rewrite(undo=False)
    op.execute(FILL_TRIGGER.format(when="WHEN (NEW.txid IS NULL)"))


def downgrade() -> None:
    op.execute(FILL_TRIGGER.format(when=""))
    _rewrite(undo=True)
    op.execute(
        """
        DROP FUNCTION sluice_notify_listened(text, text);
        DROP TABLE event_listeners;
        """
    )
