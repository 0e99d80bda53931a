"""Index generations: a collection's embedder can change with no downtime.

A collection's chunks live in an index generation (embedder, dimensions, its own partial HNSW
index, `sluice_common.vector_index`). Exactly one generation per collection is ACTIVE (the one
search reads), at most one is BUILDING (a reindex in progress); RETIRED and CANCELLED ones keep
their row as history once their chunks and index are dropped. Partial unique indexes hold the
"one ACTIVE, at most one BUILDING" rule.

Jobs get a kind: INGEST (the pipeline that drives the document's state machine, one per
document) and EMBED (re-embed a READY document's chunk snapshot into a BUILDING generation,
one per document and generation, never touching the document's status). Only the INGEST job
takes part in document events; an EMBED job still wakes ClaimJob when it becomes PENDING.

A collection inserted without a generation (raw SQL, older tooling) gets generation 1 from its
embedder columns by trigger, and a chunk inserted without generation_id lands in the
collection's ACTIVE generation; ingest-api always names both explicitly. The collection's own
embedder columns always mirror its ACTIVE generation (the switch updates them).

Generation inserts and state changes, and collection deletions, NOTIFY `sluice_collections`
with `tenant_id:collection name`, so search drops its cached collection at once.

Revision ID: 0009
"""

from typing import Any

import psycopg
from alembic import op
from sluice_common import vector_index
from sqlalchemy.engine import Connection

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TENANT_SETTING = "NULLIF(current_setting('sluice.tenant_id', true), '')::bigint"

RECORD_EVENT = """
CREATE OR REPLACE FUNCTION sluice_record_document_event(doc uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    cur record;
    last record;
BEGIN
    SELECT d.status, d.error_code, d.error_message, d.progress_stage, d.progress_done, d.progress_total,
           d.progress_unit, d.chunk_count, j.status AS job_status, j.attempts, j.max_attempts,
           j.available_at, d.updated_at
      INTO cur
      FROM documents d JOIN ingestion_jobs j ON j.document_id = d.id {ingest_only}
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
"""

ON_JOB_CHANGE = """
CREATE OR REPLACE FUNCTION sluice_on_job_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {record}
    IF NEW.status = 'PENDING' THEN
        PERFORM pg_notify('sluice_jobs_available', '');
    END IF;
    RETURN NEW;
END $$;
"""


def _generations(conn: Connection) -> list[tuple[int, int, int]]:
    return list(conn.exec_driver_sql("SELECT id, collection_id, dimensions FROM collection_generations").fetchall())


def _raw(conn: Connection) -> psycopg.Connection[Any]:
    """The psycopg connection under SQLAlchemy's, which composes vector_index's SQL."""
    raw = conn.connection.driver_connection
    if not isinstance(raw, psycopg.Connection):  # env.py connects with postgresql+psycopg
        raise RuntimeError("migration 0009 needs a psycopg connection")
    return raw


def upgrade() -> None:
    op.execute(
        f"""
        CREATE TYPE generation_state AS ENUM ('BUILDING', 'ACTIVE', 'RETIRED', 'CANCELLED');
        CREATE TYPE job_kind AS ENUM ('INGEST', 'EMBED');

        CREATE TABLE collection_generations (
            id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            tenant_id         bigint NOT NULL,
            collection_id     bigint NOT NULL,
            number            integer NOT NULL CHECK (number >= 1),
            embedder_provider text NOT NULL
                CHECK (embedder_provider IN ('hashing', 'sentence_transformers', 'openai')),
            embedder_model    text NOT NULL CHECK (embedder_model <> ''),
            dimensions        integer NOT NULL CHECK (dimensions BETWEEN 1 AND 4000),
            state             generation_state NOT NULL DEFAULT 'BUILDING',
            created_at        timestamptz NOT NULL DEFAULT now(),
            activated_at      timestamptz,
            -- When it stopped being ACTIVE (RETIRED) or BUILDING (CANCELLED).
            ended_at          timestamptz,
            -- When its chunks and HNSW index were dropped (after the grace period).
            dropped_at        timestamptz,
            FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (id, tenant_id) ON DELETE CASCADE,
            UNIQUE (collection_id, number),
            UNIQUE (id, collection_id),
            CONSTRAINT active_was_activated CHECK (state <> 'ACTIVE' OR activated_at IS NOT NULL),
            CONSTRAINT ended_when_over CHECK ((state IN ('RETIRED', 'CANCELLED')) = (ended_at IS NOT NULL)),
            CONSTRAINT dropped_only_when_over CHECK (dropped_at IS NULL OR state IN ('RETIRED', 'CANCELLED'))
        );
        -- Exactly one ACTIVE generation per collection (the trigger below creates it), at most one BUILDING.
        CREATE UNIQUE INDEX collection_generations_active ON collection_generations (collection_id) WHERE state = 'ACTIVE';
        CREATE UNIQUE INDEX collection_generations_building ON collection_generations (collection_id) WHERE state = 'BUILDING';
        CREATE INDEX collection_generations_over ON collection_generations (ended_at)
            WHERE state IN ('RETIRED', 'CANCELLED') AND dropped_at IS NULL;

        INSERT INTO collection_generations (tenant_id, collection_id, number, embedder_provider, embedder_model,
                                            dimensions, state, created_at, activated_at)
        SELECT tenant_id, id, 1, embedder_provider, embedder_model, dimensions, 'ACTIVE', created_at, created_at
        FROM collections;

        CREATE FUNCTION sluice_first_generation() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO collection_generations (tenant_id, collection_id, number, embedder_provider, embedder_model,
                                                dimensions, state, activated_at)
            VALUES (NEW.tenant_id, NEW.id, 1, NEW.embedder_provider, NEW.embedder_model, NEW.dimensions, 'ACTIVE', now());
            RETURN NEW;
        END $$;
        CREATE TRIGGER collections_first_generation AFTER INSERT ON collections
            FOR EACH ROW EXECUTE FUNCTION sluice_first_generation();

        CREATE FUNCTION sluice_notify_collection() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_TABLE_NAME = 'collections' THEN
                PERFORM pg_notify('sluice_collections', OLD.tenant_id::text || ':' || OLD.name);
                RETURN OLD;
            END IF;
            PERFORM pg_notify('sluice_collections',
                              NEW.tenant_id::text || ':' || (SELECT name FROM collections WHERE id = NEW.collection_id));
            RETURN NEW;
        END $$;
        CREATE TRIGGER collections_notify AFTER DELETE ON collections
            FOR EACH ROW EXECUTE FUNCTION sluice_notify_collection();
        CREATE TRIGGER collection_generations_notify AFTER INSERT OR UPDATE OF state ON collection_generations
            FOR EACH ROW EXECUTE FUNCTION sluice_notify_collection();

        -- Chunks belong to a generation of their collection.
        ALTER TABLE chunks ADD COLUMN generation_id bigint;
        UPDATE chunks c SET generation_id = g.id FROM collection_generations g WHERE g.collection_id = c.collection_id;
        ALTER TABLE chunks ALTER COLUMN generation_id SET NOT NULL;
        ALTER TABLE chunks ADD CONSTRAINT chunks_generation_fkey
            FOREIGN KEY (generation_id, collection_id) REFERENCES collection_generations (id, collection_id) ON DELETE CASCADE;
        ALTER TABLE chunks DROP CONSTRAINT chunks_document_id_chunk_index_key;
        ALTER TABLE chunks ADD CONSTRAINT chunks_document_generation_index UNIQUE (document_id, generation_id, chunk_index);
        CREATE INDEX chunks_generation ON chunks (generation_id);
        CREATE FUNCTION sluice_chunk_generation() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            SELECT id INTO NEW.generation_id FROM collection_generations
             WHERE collection_id = NEW.collection_id AND state = 'ACTIVE';
            RETURN NEW;
        END $$;
        CREATE TRIGGER chunks_active_generation BEFORE INSERT ON chunks
            FOR EACH ROW WHEN (NEW.generation_id IS NULL) EXECUTE FUNCTION sluice_chunk_generation();

        -- Jobs: INGEST (one per document) and EMBED (one per document and generation).
        ALTER TABLE ingestion_jobs
            ADD COLUMN kind job_kind NOT NULL DEFAULT 'INGEST',
            -- EMBED: the generation it builds. INGEST: the generation its current attempt embeds for
            -- (the ACTIVE one when it was claimed).
            ADD COLUMN generation_id bigint REFERENCES collection_generations (id) ON DELETE CASCADE,
            -- EMBED jobs record their progress here (they never change the document).
            ADD COLUMN progress_stage document_status,
            ADD COLUMN progress_done bigint NOT NULL DEFAULT 0 CHECK (progress_done >= 0),
            ADD COLUMN progress_total bigint NOT NULL DEFAULT 0 CHECK (progress_total >= 0),
            ADD CONSTRAINT embed_has_generation CHECK (kind = 'INGEST' OR generation_id IS NOT NULL);
        ALTER TABLE ingestion_jobs DROP CONSTRAINT ingestion_jobs_document_id_key;
        CREATE UNIQUE INDEX ingestion_jobs_ingest ON ingestion_jobs (document_id) WHERE kind = 'INGEST';
        CREATE UNIQUE INDEX ingestion_jobs_embed ON ingestion_jobs (generation_id, document_id) WHERE kind = 'EMBED';
        -- The switch's check after every EMBED commit: is any job of the generation unfinished?
        CREATE INDEX ingestion_jobs_embed_open ON ingestion_jobs (generation_id)
            WHERE kind = 'EMBED' AND status <> 'SUCCEEDED';
        -- Last: this UPDATE queues the jobs' deferred triggers, after which the table cannot be altered.
        UPDATE ingestion_jobs j SET generation_id = g.id
          FROM documents d JOIN collection_generations g ON g.collection_id = d.collection_id
         WHERE d.id = j.document_id;

        {RECORD_EVENT.format(ingest_only="AND j.kind = 'INGEST'")}
        {ON_JOB_CHANGE.format(record="IF NEW.kind = 'INGEST' THEN PERFORM sluice_record_document_event(NEW.document_id); END IF;")}

        -- search reads generations (its own tenant's, through row-level security).
        ALTER TABLE collection_generations ENABLE ROW LEVEL SECURITY;
        CREATE POLICY search_tenant ON collection_generations FOR SELECT TO sluice_search_reader
            USING (tenant_id = {TENANT_SETTING});
        GRANT SELECT ON collection_generations TO sluice_search_reader;
        -- Warm-up loads the embedders of ACTIVE and BUILDING generations, so a switch finds the
        -- new model loaded.
        CREATE OR REPLACE FUNCTION sluice_embedders_in_use() RETURNS TABLE (provider text, model text, dimensions integer)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
            AS $$ SELECT DISTINCT embedder_provider, embedder_model, dimensions FROM collection_generations
                  WHERE state IN ('ACTIVE', 'BUILDING') $$;
        """
    )
    conn = op.get_bind()
    raw = _raw(conn)
    for generation_id, collection_id, dimensions in _generations(conn):
        conn.exec_driver_sql(f'DROP INDEX IF EXISTS "chunks_embedding_c{int(collection_id)}"')
        conn.exec_driver_sql(vector_index.create_index_sql(generation_id, dimensions).as_string(raw))


def downgrade() -> None:
    conn = op.get_bind()
    raw = _raw(conn)
    active = list(
        conn.exec_driver_sql("SELECT id, collection_id, dimensions FROM collection_generations WHERE state = 'ACTIVE'").fetchall()
    )
    for generation_id, _, _ in _generations(conn):
        conn.exec_driver_sql(vector_index.drop_index_sql(generation_id).as_string(raw))
    op.execute(
        f"""
        DROP TRIGGER chunks_active_generation ON chunks;
        DROP FUNCTION sluice_chunk_generation();
        DROP TRIGGER collections_first_generation ON collections;
        DROP FUNCTION sluice_first_generation();
        DROP TRIGGER collections_notify ON collections;
        DROP TRIGGER collection_generations_notify ON collection_generations;
        DROP FUNCTION sluice_notify_collection();
        CREATE OR REPLACE FUNCTION sluice_embedders_in_use() RETURNS TABLE (provider text, model text, dimensions integer)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public
            AS $$ SELECT DISTINCT embedder_provider, embedder_model, dimensions FROM collections $$;
        {RECORD_EVENT.format(ingest_only="")}
        {ON_JOB_CHANGE.format(record="PERFORM sluice_record_document_event(NEW.document_id);")}
        DELETE FROM ingestion_jobs WHERE kind = 'EMBED';
        DROP INDEX ingestion_jobs_embed_open;
        DROP INDEX ingestion_jobs_embed;
        DROP INDEX ingestion_jobs_ingest;
        ALTER TABLE ingestion_jobs ADD CONSTRAINT ingestion_jobs_document_id_key UNIQUE (document_id);
        ALTER TABLE ingestion_jobs DROP CONSTRAINT embed_has_generation,
            DROP COLUMN progress_total, DROP COLUMN progress_done, DROP COLUMN progress_stage,
            DROP COLUMN generation_id, DROP COLUMN kind;
        DELETE FROM chunks c USING collection_generations g WHERE g.id = c.generation_id AND g.state <> 'ACTIVE';
        ALTER TABLE chunks DROP CONSTRAINT chunks_document_generation_index;
        ALTER TABLE chunks ADD CONSTRAINT chunks_document_id_chunk_index_key UNIQUE (document_id, chunk_index);
        DROP INDEX chunks_generation;
        ALTER TABLE chunks DROP CONSTRAINT chunks_generation_fkey, DROP COLUMN generation_id;
        REVOKE ALL ON collection_generations FROM sluice_search_reader;
        DROP TABLE collection_generations;
        DROP TYPE job_kind;
        DROP TYPE generation_state;
        """
    )
    for _, collection_id, dimensions in active:
        conn.exec_driver_sql(
            f'CREATE INDEX IF NOT EXISTS "chunks_embedding_c{int(collection_id)}" ON chunks USING hnsw'
            f" ((embedding::vector({int(dimensions)})) vector_cosine_ops) WHERE collection_id = {int(collection_id)}"
        )
