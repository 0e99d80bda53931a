"""Document identity and versions (docs/architecture.md, "Document versions").

An upload may name its document in its source (`source_uri`, unique among a collection's live
documents). Every version of a source is its own `documents` row with its own INGEST job, going
through the same states, leases and rules as any document; what ties the versions together is
`(collection_id, source_uri)`, a `version` number and a `version_role`:

- `CURRENT`: the version the document serves (searchable while READY), at most one per source;
- `NEXT`: newer content being processed (or FAILED), at most one per source; its READY commit
  deletes the CURRENT row (chunks in every generation, jobs, content) and takes its role, in
  that same transaction (rule 1's).

Partial unique indexes hold both "at most one". The dedup of equal content stays for documents
without a source; a document with a source is deduplicated against its own versions only (two
paths holding the same bytes are two documents, and a plain upload must never return a version
that a later swap would delete).

`document_versions` keeps every version's history (it survives the version's row): number,
SHA-256, when it was uploaded, when it began serving, and how it ended (REPLACED by a newer
version, SUPERSEDED by newer content before it served, DELETED). Its rows go with the collection.

Existing documents have no source and keep working unchanged.

Revision ID: 0021
"""

from alembic import op

revision = "0021"
down_revision = "0019"  # 0020 (keyword postings) was withdrawn before release
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE documents
            ADD COLUMN source_uri text CHECK (length(source_uri) BETWEEN 1 AND 2048),
            ADD COLUMN version integer CHECK (version >= 1),
            ADD COLUMN version_role text CHECK (version_role IN ('CURRENT', 'NEXT')),
            ADD CONSTRAINT documents_source_is_versioned CHECK (
                (source_uri IS NULL) = (version IS NULL) AND (source_uri IS NULL) = (version_role IS NULL));

        -- Equal content is one document only among documents without a source.
        DROP INDEX documents_collection_content;
        CREATE UNIQUE INDEX documents_collection_content ON documents (collection_id, content_sha256)
            WHERE source_uri IS NULL;
        -- At most one serving and one newer version per source (literals: a partial index only
        -- serves a query whose condition names the same literal).
        CREATE UNIQUE INDEX documents_source_current ON documents (collection_id, source_uri)
            WHERE version_role = 'CURRENT';
        CREATE UNIQUE INDEX documents_source_next ON documents (collection_id, source_uri)
            WHERE version_role = 'NEXT';
        -- Every version of a source, whatever its role (GetDocument, DeleteDocument, ListDocuments).
        CREATE INDEX documents_source ON documents (collection_id, source_uri) WHERE source_uri IS NOT NULL;

        CREATE TABLE document_versions (
            collection_id  bigint NOT NULL,
            tenant_id      bigint NOT NULL,
            source_uri     text NOT NULL,
            version        integer NOT NULL CHECK (version >= 1),
            document_id    uuid NOT NULL UNIQUE,
            content_sha256 text NOT NULL CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
            created_at     timestamptz NOT NULL DEFAULT now(),
            serving_at     timestamptz,
            ended_at       timestamptz,
            outcome        text CHECK (outcome IN ('REPLACED', 'SUPERSEDED', 'DELETED')),
            error_message  text,
            PRIMARY KEY (collection_id, source_uri, version),
            FOREIGN KEY (collection_id, tenant_id) REFERENCES collections (id, tenant_id) ON DELETE CASCADE,
            CONSTRAINT ended_has_outcome CHECK ((ended_at IS NULL) = (outcome IS NULL))
        );
        """
    )


def downgrade() -> None:
    op.execute(
        """
        DROP TABLE document_versions;
        -- The newer versions go (their current ones stay), then equal content is one document again.
        DELETE FROM documents WHERE version_role = 'NEXT';
        DELETE FROM documents d USING documents o
         WHERE o.collection_id = d.collection_id AND o.content_sha256 = d.content_sha256
           AND (o.created_at, o.id) < (d.created_at, d.id);
        DROP INDEX documents_source;
        DROP INDEX documents_source_next;
        DROP INDEX documents_source_current;
        DROP INDEX documents_collection_content;
        CREATE UNIQUE INDEX documents_collection_content ON documents (collection_id, content_sha256);
        ALTER TABLE documents
            DROP CONSTRAINT documents_source_is_versioned,
            DROP COLUMN version_role,
            DROP COLUMN version,
            DROP COLUMN source_uri;
        """
    )
