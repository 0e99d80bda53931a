"""Document events and notifications.

Every committed, user-visible change of a document (its status, progress, error, chunk count,
or its job's status and attempts) appends one row to document_events and NOTIFYs
`sluice_document_events` with the document id. The triggers are deferred to commit time and
read the committed-to-be state of document and job together, so an event never shows the two
disagreeing (rule 5) and there is exactly one event per transaction that changed something.
WatchDocument reads this log in order, so no status is skipped even when notifications coalesce.

A job that becomes claimable NOTIFYs `sluice_jobs_available`, waking ClaimJob long-polls.

Revision ID: 0002
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE document_events (
            id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            document_id    uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
            status         document_status NOT NULL,
            error_code     text,
            error_message  text,
            progress_stage document_status,
            progress_done  bigint NOT NULL,
            progress_total bigint NOT NULL,
            progress_unit  text NOT NULL,
            chunk_count    integer NOT NULL,
            job_status     job_status NOT NULL,
            attempts       integer NOT NULL,
            max_attempts   integer NOT NULL,
            available_at   timestamptz NOT NULL,
            updated_at     timestamptz NOT NULL,
            created_at     timestamptz NOT NULL DEFAULT clock_timestamp()
        );
        CREATE INDEX document_events_document ON document_events (document_id, id);

        CREATE FUNCTION sluice_record_document_event(doc uuid) RETURNS void LANGUAGE plpgsql AS $$
        DECLARE
            cur record;
            last record;
        BEGIN
            SELECT d.status, d.error_code, d.error_message, d.progress_stage, d.progress_done, d.progress_total,
                   d.progress_unit, d.chunk_count, j.status AS job_status, j.attempts, j.max_attempts,
                   j.available_at, d.updated_at
              INTO cur
              FROM documents d JOIN ingestion_jobs j ON j.document_id = d.id
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
                                         attempts, max_attempts, available_at, updated_at)
            VALUES (doc, cur.status, cur.error_code, cur.error_message, cur.progress_stage, cur.progress_done,
                    cur.progress_total, cur.progress_unit, cur.chunk_count, cur.job_status, cur.attempts,
                    cur.max_attempts, cur.available_at, cur.updated_at);
            PERFORM pg_notify('sluice_document_events', doc::text);
        END $$;

        CREATE FUNCTION sluice_on_document_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'DELETE' THEN
                PERFORM pg_notify('sluice_document_events', OLD.id::text);
                RETURN OLD;
            END IF;
            PERFORM sluice_record_document_event(NEW.id);
            RETURN NEW;
        END $$;

        CREATE CONSTRAINT TRIGGER documents_on_change
            AFTER INSERT OR UPDATE OR DELETE ON documents
            DEFERRABLE INITIALLY DEFERRED
            FOR EACH ROW EXECUTE FUNCTION sluice_on_document_change();

        CREATE FUNCTION sluice_on_job_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM sluice_record_document_event(NEW.document_id);
            IF NEW.status = 'PENDING' THEN
                PERFORM pg_notify('sluice_jobs_available', '');
            END IF;
            RETURN NEW;
        END $$;

        CREATE CONSTRAINT TRIGGER ingestion_jobs_on_change
            AFTER INSERT OR UPDATE ON ingestion_jobs
            DEFERRABLE INITIALLY DEFERRED
            FOR EACH ROW EXECUTE FUNCTION sluice_on_job_change();
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TRIGGER IF EXISTS ingestion_jobs_on_change ON ingestion_jobs;
        DROP TRIGGER IF EXISTS documents_on_change ON documents;
        DROP FUNCTION IF EXISTS sluice_on_job_change, sluice_on_document_change, sluice_record_document_event;
        DROP TABLE IF EXISTS document_events;
        """
    )
