"""The events log becomes an outbox that can be read a collection at a time, in commit order.

Every event row now says which tenant and collection it belongs to and which transaction wrote
it (`txid`, filled by a BEFORE INSERT trigger, so the event function stays as it is). Readers
of a whole collection (WatchCollection, webhooks) order by (txid, id) and only read rows whose
transaction is older than every transaction still running (`pg_snapshot_xmin`): identity ids
are handed out in insertion order, not commit order, so "id > cursor" alone would skip an event
whose transaction committed after a later id was already read.

A deleted document leaves one last event (`deleted`): the log no longer cascades from
documents, only from its collection (deleting the collection ends its watchers anyway).
Each new event also notifies `sluice_collection_events` with the collection id.

Revision ID: 0010
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE document_events
            ADD COLUMN tenant_id bigint,
            ADD COLUMN collection_id bigint,
            ADD COLUMN txid xid8,
            ADD COLUMN deleted boolean NOT NULL DEFAULT false;
        UPDATE document_events e SET tenant_id = d.tenant_id, collection_id = d.collection_id, txid = '0'::xid8
          FROM documents d WHERE d.id = e.document_id;
        ALTER TABLE document_events
            ALTER COLUMN tenant_id SET NOT NULL,
            ALTER COLUMN collection_id SET NOT NULL,
            ALTER COLUMN txid SET NOT NULL,
            DROP CONSTRAINT document_events_document_id_fkey,
            ADD CONSTRAINT document_events_collection_tenant_fkey
                FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (id, tenant_id) ON DELETE CASCADE;
        CREATE INDEX document_events_collection_order ON document_events (collection_id, txid, id);
        CREATE INDEX document_events_created ON document_events (created_at);

        -- Fills what the event function does not know: owner, collection and writing transaction.
        CREATE FUNCTION sluice_event_fill() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.collection_id IS NULL OR NEW.tenant_id IS NULL THEN
                SELECT d.collection_id, d.tenant_id INTO NEW.collection_id, NEW.tenant_id
                  FROM documents d WHERE d.id = NEW.document_id;
            END IF;
            NEW.txid := pg_current_xact_id();
            PERFORM pg_notify('sluice_collection_events', NEW.collection_id::text);
            RETURN NEW;
        END $$;
        CREATE TRIGGER document_events_fill BEFORE INSERT ON document_events
            FOR EACH ROW EXECUTE FUNCTION sluice_event_fill();

        -- A deletion is an event too: the document's last state, marked deleted. Skipped when the
        -- collection went in the same transaction (its events are gone with it).
        CREATE OR REPLACE FUNCTION sluice_on_document_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'DELETE' THEN
                INSERT INTO document_events (document_id, tenant_id, collection_id, status, error_code,
                        error_message, progress_stage, progress_done, progress_total, progress_unit, chunk_count,
                        job_status, attempts, max_attempts, available_at, updated_at, deleted)
                SELECT e.document_id, e.tenant_id, e.collection_id, e.status, e.error_code, e.error_message,
                       e.progress_stage, e.progress_done, e.progress_total, e.progress_unit, e.chunk_count,
                       e.job_status, e.attempts, e.max_attempts, e.available_at, now(), true
                  FROM document_events e
                 WHERE e.document_id = OLD.id AND NOT e.deleted
                   AND EXISTS (SELECT 1 FROM collections c WHERE c.id = OLD.collection_id)
                 ORDER BY e.id DESC LIMIT 1;
                PERFORM pg_notify('sluice_document_events', OLD.id::text);
                RETURN OLD;
            END IF;
            PERFORM sluice_record_document_event(NEW.id);
            RETURN NEW;
        END $$;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION sluice_on_document_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'DELETE' THEN
                PERFORM pg_notify('sluice_document_events', OLD.id::text);
                RETURN OLD;
            END IF;
            PERFORM sluice_record_document_event(NEW.id);
            RETURN NEW;
        END $$;
        DROP TRIGGER IF EXISTS document_events_fill ON document_events;
        DROP FUNCTION IF EXISTS sluice_event_fill;
        DELETE FROM document_events e WHERE e.deleted OR NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = e.document_id);
        DROP INDEX IF EXISTS document_events_created;
        DROP INDEX IF EXISTS document_events_collection_order;
        ALTER TABLE document_events
            DROP CONSTRAINT document_events_collection_tenant_fkey,
            ADD CONSTRAINT document_events_document_id_fkey
                FOREIGN KEY (document_id) REFERENCES documents (id) ON DELETE CASCADE,
            DROP COLUMN deleted,
            DROP COLUMN txid,
            DROP COLUMN collection_id,
            DROP COLUMN tenant_id;
        """
    )
