"""Initial schema: collections, documents, content, jobs, attempts, snapshots, chunks.

Invariants live here where PostgreSQL can hold them (docs/contributing.md#code): enum types for the two state
machines, CHECKs that tie columns to states, unique indexes for idempotency and dedup.

Revision ID: 0001
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE EXTENSION IF NOT EXISTS vector;

        CREATE TYPE document_status AS ENUM
            ('PENDING', 'PARSING', 'CHUNKING', 'EMBEDDING', 'INDEXING', 'READY', 'FAILED');
        CREATE TYPE job_status AS ENUM ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED');
        CREATE TYPE attempt_outcome AS ENUM
            ('RUNNING', 'SUCCEEDED', 'RETRYABLE_FAILURE', 'PERMANENT_FAILURE',
             'LEASE_EXPIRED', 'RELEASED', 'CANCELLED');

        CREATE TABLE collections (
            id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name               text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
            description        text NOT NULL DEFAULT '',
            embedder_provider  text NOT NULL
                CHECK (embedder_provider IN ('hashing', 'sentence_transformers', 'openai')),
            embedder_model     text NOT NULL CHECK (embedder_model <> ''),
            dimensions         integer NOT NULL CHECK (dimensions BETWEEN 1 AND 4000),
            chunk_max_characters integer NOT NULL CHECK (chunk_max_characters BETWEEN 50 AND 100000),
            chunk_new_after_n_chars integer NOT NULL
                CHECK (chunk_new_after_n_chars BETWEEN 1 AND chunk_max_characters),
            chunk_overlap      integer NOT NULL CHECK (chunk_overlap >= 0 AND chunk_overlap < chunk_max_characters),
            max_attempts       integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
            created_at         timestamptz NOT NULL DEFAULT now()
        );

        CREATE TABLE documents (
            id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            collection_id  bigint NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
            filename       text NOT NULL CHECK (length(filename) BETWEEN 1 AND 255),
            mime_type      text NOT NULL CHECK (mime_type <> ''),
            status         document_status NOT NULL DEFAULT 'PENDING',
            error_code     text,
            error_message  text,
            progress_stage document_status,
            progress_done  bigint NOT NULL DEFAULT 0 CHECK (progress_done >= 0),
            progress_total bigint NOT NULL DEFAULT 0 CHECK (progress_total >= 0),
            progress_unit  text NOT NULL DEFAULT '',
            content_sha256 text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
            size_bytes     bigint NOT NULL CHECK (size_bytes > 0),
            metadata       jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
            request_id     text CHECK (length(request_id) BETWEEN 1 AND 128),
            chunk_count    integer NOT NULL DEFAULT 0 CHECK (chunk_count >= 0),
            created_at     timestamptz NOT NULL DEFAULT now(),
            updated_at     timestamptz NOT NULL DEFAULT now(),
            -- Rule 4: FAILED always explains itself.
            CONSTRAINT failed_has_message
                CHECK (status <> 'FAILED' OR coalesce(error_message, '') <> ''),
            -- Rule 4: READY never shows a stale error.
            CONSTRAINT ready_has_no_error CHECK (status <> 'READY' OR error_message IS NULL)
        );
        -- Same content in the same collection is one document (dedup on upload).
        CREATE UNIQUE INDEX documents_collection_content ON documents (collection_id, content_sha256);
        -- request_id idempotency: one document per key.
        CREATE UNIQUE INDEX documents_request_id ON documents (request_id) WHERE request_id IS NOT NULL;
        CREATE INDEX documents_collection_created ON documents (collection_id, created_at DESC, id DESC);
        CREATE INDEX documents_status ON documents (status);

        CREATE TABLE document_contents (
            document_id uuid PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
            content     bytea NOT NULL
        );
        -- Uploaded files are mostly compressed already (PDF, DOCX): skip TOAST compression.
        ALTER TABLE document_contents ALTER COLUMN content SET STORAGE EXTERNAL;

        CREATE TABLE ingestion_jobs (
            id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            document_id  uuid NOT NULL UNIQUE REFERENCES documents (id) ON DELETE CASCADE,
            status       job_status NOT NULL DEFAULT 'PENDING',
            attempts     integer NOT NULL DEFAULT 0,
            max_attempts integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
            available_at timestamptz NOT NULL DEFAULT now(),
            locked_at    timestamptz,
            locked_by    text,
            lease_token  uuid,
            created_at   timestamptz NOT NULL DEFAULT now(),
            updated_at   timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT attempts_in_range CHECK (attempts BETWEEN 0 AND max_attempts),
            -- A RUNNING job is always leased; no other status holds a lease.
            CONSTRAINT running_is_leased CHECK (
                (status = 'RUNNING') = (lease_token IS NOT NULL AND locked_at IS NOT NULL))
        );
        -- Rule 6 scans: due PENDING jobs, and RUNNING jobs by lease age.
        CREATE INDEX ingestion_jobs_pending ON ingestion_jobs (available_at) WHERE status = 'PENDING';
        CREATE INDEX ingestion_jobs_running ON ingestion_jobs (locked_at) WHERE status = 'RUNNING';

        CREATE TABLE job_attempts (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            job_id        uuid NOT NULL REFERENCES ingestion_jobs (id) ON DELETE CASCADE,
            number        integer NOT NULL CHECK (number >= 1),
            worker_id     text NOT NULL,
            lease_token   uuid NOT NULL UNIQUE,
            stage         document_status NOT NULL DEFAULT 'PENDING',
            outcome       attempt_outcome NOT NULL DEFAULT 'RUNNING',
            error_code    text,
            error_message text,
            retryable     boolean,
            started_at    timestamptz NOT NULL DEFAULT now(),
            ended_at      timestamptz,
            CONSTRAINT ended_when_done CHECK ((outcome = 'RUNNING') = (ended_at IS NULL))
        );
        CREATE INDEX job_attempts_job ON job_attempts (job_id, id);

        -- Chunk lists saved at the end of CHUNKING, keyed by content and pipeline version,
        -- so a retry after EMBEDDING or INDEXING failed skips parsing.
        CREATE TABLE chunk_snapshots (
            content_sha256   text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
            pipeline_version text NOT NULL CHECK (pipeline_version <> ''),
            chunk_count      integer NOT NULL CHECK (chunk_count >= 0),
            chunks           jsonb NOT NULL CHECK (jsonb_typeof(chunks) = 'array'),
            created_at       timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (content_sha256, pipeline_version)
        );

        -- Chunks with vectors. The dimension is per collection, so the column is untyped and
        -- each collection gets its own partial HNSW index on embedding::vector(d).
        CREATE TABLE chunks (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            document_id   uuid NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
            collection_id bigint NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
            chunk_index   integer NOT NULL CHECK (chunk_index >= 0),
            text          text NOT NULL,
            page_number   integer NOT NULL DEFAULT 0 CHECK (page_number >= 0),
            element_type  text NOT NULL DEFAULT '',
            section_title text NOT NULL DEFAULT '',
            text_as_html  text NOT NULL DEFAULT '',
            embedding     vector NOT NULL,
            -- Words of the text, segmented by the application (jieba for Chinese).
            search_terms  text NOT NULL DEFAULT '',
            search_tsv    tsvector GENERATED ALWAYS AS (to_tsvector('simple', search_terms)) STORED,
            UNIQUE (document_id, chunk_index)
        );
        CREATE INDEX chunks_collection ON chunks (collection_id);
        CREATE INDEX chunks_search_tsv ON chunks USING gin (search_tsv);
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE IF EXISTS chunks, chunk_snapshots, job_attempts, ingestion_jobs,
            document_contents, documents, collections;
        DROP TYPE IF EXISTS attempt_outcome, job_status, document_status;
        """
    )
