"""Cheaper event triggers: the same events, written with less work per transaction.

- The deferred job trigger fires only when a column an event shows (status, attempts,
  max_attempts, available_at) or the job's document is written. A lease renewal (the fencing
  UPDATE of every post-claim write, and every heartbeat) sets only `locked_at`: it changed
  nothing an event shows, so the trigger ran only to find that out (one join and one look-up of
  the last event per renewal). The document trigger likewise fires on the columns an event
  shows (and on INSERT and DELETE as before).
- The event function reads the document's tenant and collection with the rest of its state and
  writes them itself, so the BEFORE INSERT fill trigger no longer looks the document up (it still
  fills what is missing for other writers, stamps txid and notifies).

The events written are unchanged (same rows, same deduplication, same notifications).

Revision ID: 0013
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

RECORD_EVENT = """
CREATE OR REPLACE FUNCTION sluice_record_document_event(doc uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    cur record;
    last record;
BEGIN
    SELECT d.status, d.error_code, d.error_message, d.progress_stage, d.progress_done, d.progress_total,
           d.progress_unit, d.chunk_count, j.status AS job_status, j.attempts, j.max_attempts,
           j.available_at, d.updated_at{owner}
      INTO cur
      FROM documents d JOIN ingestion_jobs j ON j.document_id = d.id AND j.kind = 'INGEST'
     WHERE d.id = doc;
    IF NOT FOUND THEN
        RETURN;  -- deleted later in the same transaction, or job not inserted yet
    END IF;
    SELECT e.status, e.error_code, e.error_message, e.progress_stage, e.progress_done, e.progress_total,
           e.progress_unit, e.chunk_count, e.job_status, e.attempts, e.max_attempts, e.available_at
      INTO last
      FROM document_events e WHERE e.document_id = doc ORDER BY e.id DESC LIMIT 1;
    IF FOUND AND (cur.status, cur.error_code, cur.error_message, cur.progress_stage, cur.progress_done,
                  cur.progress_total, cur.progress_unit, cur.chunk_count, cur.job_status, cur.attempts,
                  cur.max_attempts, cur.available_at)
            IS NOT DISTINCT FROM
                 (last.status, last.error_code, last.error_message, last.progress_stage, last.progress_done,
                  last.progress_total, last.progress_unit, last.chunk_count, last.job_status, last.attempts,
                  last.max_attempts, last.available_at) THEN
        RETURN;
    END IF;
    INSERT INTO document_events (document_id, status, error_code, error_message, progress_stage,
                                 progress_done, progress_total, progress_unit, chunk_count, job_status,
                                 attempts, max_attempts, available_at, updated_at{owner_columns})
    VALUES (doc, cur.status, cur.error_code, cur.error_message, cur.progress_stage, cur.progress_done,
            cur.progress_total, cur.progress_unit, cur.chunk_count, cur.job_status, cur.attempts,
            cur.max_attempts, cur.available_at, cur.updated_at{owner_values});
    PERFORM pg_notify('sluice_document_events', doc::text);
END $$;
"""

# The columns an event shows (sluice_record_document_event reads them).
DOCUMENT_EVENT_COLUMNS = (
    "status, error_code, error_message, progress_stage, progress_done, progress_total, progress_unit, chunk_count"
)
JOB_EVENT_COLUMNS = "status, attempts, max_attempts, available_at, document_id"


def upgrade() -> None:
    op.execute(
        RECORD_EVENT.format(
            owner=", d.collection_id, d.tenant_id",
            owner_columns=", collection_id, tenant_id",
            owner_values=", cur.collection_id, cur.tenant_id",
        )
        + f"""
        DROP TRIGGER ingestion_jobs_on_change ON ingestion_jobs;
        CREATE CONSTRAINT TRIGGER ingestion_jobs_on_change
            AFTER INSERT OR UPDATE OF {JOB_EVENT_COLUMNS} ON ingestion_jobs
            DEFERRABLE INITIALLY DEFERRED
            FOR EACH ROW EXECUTE FUNCTION sluice_on_job_change();
        DROP TRIGGER documents_on_change ON documents;
        CREATE CONSTRAINT TRIGGER documents_on_change
            AFTER INSERT OR UPDATE OF {DOCUMENT_EVENT_COLUMNS} OR DELETE ON documents
            DEFERRABLE INITIALLY DEFERRED
            FOR EACH ROW EXECUTE FUNCTION sluice_on_document_change();
        """
    )


def downgrade() -> None:
    op.execute(
        RECORD_EVENT.format(owner="", owner_columns="", owner_values="")
        + """
        DROP TRIGGER ingestion_jobs_on_change ON ingestion_jobs;
        CREATE CONSTRAINT TRIGGER ingestion_jobs_on_change
            AFTER INSERT OR UPDATE ON ingestion_jobs
            DEFERRABLE INITIALLY DEFERRED
            FOR EACH ROW EXECUTE FUNCTION sluice_on_job_change();
        DROP TRIGGER documents_on_change ON documents;
        CREATE CONSTRAINT TRIGGER documents_on_change
            AFTER INSERT OR UPDATE OR DELETE ON documents
            DEFERRABLE INITIALLY DEFERRED
            FOR EACH ROW EXECUTE FUNCTION sluice_on_document_change();
        """
    )
