"""Sync runs in the collection's events log: a run's start, progress and end (docs/sources.md).

The events log (`document_events`) is the one ordered, resumable outbox of a collection behind
WatchCollection and webhooks, so a run's events go into it rather than into a log of their own:
they then share its (txid, id) order, cursors, horizon, retention and notifications with the
document events, and a reader needs no merge. A run event has no document: `source_run_id`,
`run_event` (STARTED, PROGRESS, FINISHED) and `run` (the run as the event left it, with its
source's display name) say what happened; the document columns are NULL. A CHECK keeps the two
kinds apart (a document event still has every document column).

Each event is written in the transaction of the change it reports:
- STARTED and FINISHED by a trigger on `source_runs`: STARTED when `started_at` is first set
  (the first claim; a run resumed by another runner, or handed back and claimed again, keeps its
  `started_at` and starts nothing), FINISHED when the state enters SUCCEEDED, FAILED or
  BLOCKED_MASS_DELETE, whichever statement does it (the runner's end, an expired lease with no
  attempts left, an error with none left). A rolled-back change leaves no event.
- PROGRESS by the runner's checkpoint transaction, when it asks (`sluice_record_source_run_event`).

Retention prunes run events by age like the events of deleted documents (they have no document
to keep a latest event of).

Revision ID: 0024
"""

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

DOCUMENT_COLUMNS = (
    "document_id",
    "status",
    "progress_done",
    "progress_total",
    "progress_unit",
    "chunk_count",
    "job_status",
    "attempts",
    "max_attempts",
    "available_at",
    "updated_at",
)


def upgrade() -> None:
    not_null = " AND ".join(f"{c} IS NOT NULL" for c in DOCUMENT_COLUMNS)
    op.execute(
        "ALTER TABLE document_events "
        + ", ".join(f"ALTER COLUMN {c} DROP NOT NULL" for c in DOCUMENT_COLUMNS)
        + ", ADD COLUMN source_run_id uuid, ADD COLUMN run_event text, ADD COLUMN run jsonb"
    )
    op.execute(
        f"""
        -- NOT VALID, then VALIDATE: the check of existing rows does not block the writers.
        ALTER TABLE document_events ADD CONSTRAINT document_events_document_or_run CHECK (
            CASE WHEN source_run_id IS NULL
                 THEN {not_null} AND run_event IS NULL AND run IS NULL
                 ELSE document_id IS NULL AND NOT deleted AND run IS NOT NULL
                      AND run_event IN ('STARTED', 'PROGRESS', 'FINISHED') END) NOT VALID;
        ALTER TABLE document_events VALIDATE CONSTRAINT document_events_document_or_run;

        -- One run event: the run as it stands in this transaction, in its collection's log (the
        -- fill trigger stamps the transaction and notifies the collection's listeners).
        CREATE FUNCTION sluice_record_source_run_event(r source_runs, event_kind text) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO document_events (tenant_id, collection_id, source_run_id, run_event, run)
            SELECT s.tenant_id, s.collection_id, r.id, event_kind, jsonb_build_object(
                       'id', r.id, 'source_id', r.source_id, 'source_display_name', s.display_name,
                       'state', r.state, 'allow_mass_delete', r.allow_mass_delete, 'scheduled', r.scheduled,
                       'attempts', r.attempts, 'max_attempts', r.max_attempts, 'checkpoint', '{{}}'::jsonb,
                       'listed', r.listed, 'uploaded', r.uploaded, 'unchanged', r.unchanged, 'deleted', r.deleted,
                       'failed', r.failed, 'would_delete', r.would_delete, 'error_message', r.error_message,
                       'created_at', r.created_at, 'started_at', r.started_at, 'ended_at', r.ended_at)
              FROM sources s WHERE s.id = r.source_id;
        END $$;

        CREATE FUNCTION sluice_on_source_run_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF OLD.started_at IS NULL AND NEW.started_at IS NOT NULL THEN
                PERFORM sluice_record_source_run_event(NEW, 'STARTED');
            END IF;
            IF NEW.state IN ('SUCCEEDED', 'FAILED', 'BLOCKED_MASS_DELETE') AND OLD.state IN ('PENDING', 'RUNNING') THEN
                PERFORM sluice_record_source_run_event(NEW, 'FINISHED');
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER source_runs_events AFTER UPDATE OF state, started_at ON source_runs
            FOR EACH ROW EXECUTE FUNCTION sluice_on_source_run_change();
        """
    )


def downgrade() -> None:
    op.execute(
        "DROP TRIGGER source_runs_events ON source_runs;"
        " DROP FUNCTION sluice_on_source_run_change(); DROP FUNCTION sluice_record_source_run_event(source_runs, text);"
        " DELETE FROM document_events WHERE source_run_id IS NOT NULL;"
        " ALTER TABLE document_events DROP CONSTRAINT document_events_document_or_run,"
        " DROP COLUMN source_run_id, DROP COLUMN run_event, DROP COLUMN run, "
        + ", ".join(f"ALTER COLUMN {c} SET NOT NULL" for c in DOCUMENT_COLUMNS)
    )
