"""Sources and their sync runs (docs/sources.md).

- `sources`: where a collection's documents live (a kind and its spec as JSON; credentials are
  named, never stored), an optional schedule and the mass-delete share. Rows go with their
  collection.
- `source_runs`: one sync of a source, a leased job like an ingestion job: claimed with
  `FOR UPDATE SKIP LOCKED` (PENDING, or RUNNING with an expired lease), a `lease_token` that
  every write of the runner checks (fencing), `locked_at` renewed by heartbeats, and a
  `checkpoint` (the last item processed, in listing order) that a runner taking the run over
  resumes from. At most one PENDING or RUNNING run per source (a partial unique index).
- `source_items`: what a source put into its collection: one row per `source_uri`, with the
  fingerprint the source reported (ETag, blob id, size and mtime), the SHA-256 uploaded and the
  last run that listed it. A run deletes the documents of the items it did not list, and only
  those: documents of other sources and plain uploads are never its to delete.

Revision ID: 0022
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE sources (
            id                        uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            tenant_id                 bigint NOT NULL,
            collection_id             bigint NOT NULL,
            display_name              text NOT NULL DEFAULT '' CHECK (length(display_name) <= 200),
            kind                      text NOT NULL CHECK (kind IN ('LOCAL_FOLDER', 'S3', 'HTTP', 'GIT')),
            spec                      jsonb NOT NULL,
            schedule_interval_seconds bigint NOT NULL DEFAULT 0
                CHECK (schedule_interval_seconds = 0 OR schedule_interval_seconds >= 60),
            max_delete_share          double precision NOT NULL CHECK (max_delete_share > 0 AND max_delete_share <= 1),
            next_sync_at              timestamptz,
            created_at                timestamptz NOT NULL DEFAULT now(),
            FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (id, tenant_id) ON DELETE CASCADE,
            CONSTRAINT scheduled_has_next CHECK ((schedule_interval_seconds = 0) = (next_sync_at IS NULL))
        );
        CREATE INDEX sources_tenant ON sources (tenant_id, created_at, id);
        CREATE INDEX sources_due ON sources (next_sync_at) WHERE next_sync_at IS NOT NULL;

        CREATE TABLE source_runs (
            id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            source_id         uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
            state             text NOT NULL DEFAULT 'PENDING'
                CHECK (state IN ('PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'BLOCKED_MASS_DELETE')),
            allow_mass_delete boolean NOT NULL DEFAULT false,
            scheduled         boolean NOT NULL DEFAULT false,
            attempts          integer NOT NULL DEFAULT 0,
            max_attempts      integer NOT NULL CHECK (max_attempts >= 1),
            lease_token       uuid,
            locked_at         timestamptz,
            checkpoint        jsonb NOT NULL DEFAULT '{}',
            listed            bigint NOT NULL DEFAULT 0,
            uploaded          bigint NOT NULL DEFAULT 0,
            unchanged         bigint NOT NULL DEFAULT 0,
            deleted           bigint NOT NULL DEFAULT 0,
            failed            bigint NOT NULL DEFAULT 0,
            would_delete      bigint NOT NULL DEFAULT 0,
            error_message     text,
            created_at        timestamptz NOT NULL DEFAULT now(),
            started_at        timestamptz,
            ended_at          timestamptz,
            CONSTRAINT running_is_leased CHECK ((state = 'RUNNING') = (lease_token IS NOT NULL AND locked_at IS NOT NULL)),
            CONSTRAINT ended_has_time CHECK ((state IN ('PENDING', 'RUNNING')) = (ended_at IS NULL))
        );
        CREATE UNIQUE INDEX source_runs_one_active ON source_runs (source_id) WHERE state IN ('PENDING', 'RUNNING');
        CREATE INDEX source_runs_claimable ON source_runs (created_at) WHERE state IN ('PENDING', 'RUNNING');
        CREATE INDEX source_runs_source ON source_runs (source_id, created_at DESC);

        CREATE TABLE source_items (
            source_id      uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
            source_uri     text NOT NULL,
            fingerprint    text NOT NULL,
            content_sha256 text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
            seen_run       uuid NOT NULL,
            PRIMARY KEY (source_id, source_uri)
        );
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE source_items; DROP TABLE source_runs; DROP TABLE sources;")
