"""Event retention: a low-water mark per collection, and a wake-up when a collection goes.

The events log is pruned by age and by count per document (sluice_ingest.retention). Pruning
by age records, per collection, the highest log position (txid, event id) it removed:
`event_log_horizon`. A WatchCollection cursor below its collection's horizon may have missed
events, so it is refused (OUT_OF_RANGE, EVENTS_CURSOR_EXPIRED) with the horizon as the oldest
cursor to resume from; a cursor at or past it has every event after it still in the log.

Deleting a collection notifies `sluice_collection_events` with its id, so its watchers end at
once (NOT_FOUND) instead of at their next re-check.

Revision ID: 0011
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE event_log_horizon (
            collection_id bigint PRIMARY KEY REFERENCES collections (id) ON DELETE CASCADE,
            txid xid8 NOT NULL,
            event_id bigint NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now()
        );

        CREATE FUNCTION sluice_on_collection_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('sluice_collection_events', OLD.id::text);
            RETURN OLD;
        END $$;
        CREATE TRIGGER collections_deleted_notify AFTER DELETE ON collections
            FOR EACH ROW EXECUTE FUNCTION sluice_on_collection_deleted();
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TRIGGER IF EXISTS collections_deleted_notify ON collections;
        DROP FUNCTION IF EXISTS sluice_on_collection_deleted;
        DROP TABLE IF EXISTS event_log_horizon;
        """
    )
