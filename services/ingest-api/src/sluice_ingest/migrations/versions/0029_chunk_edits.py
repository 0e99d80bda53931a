"""Chunks a user disabled or edited (docs/chunks.md).

**Disabled chunks leave `chunks`.** `disabled_chunks` holds a disabled chunk's row, with
everything needed to put it back unchanged (its id included), so nothing that reads `chunks`
changes: every search statement, the HNSW graphs of READY chunks, the BM25 statistics (0016),
`document_vectors` (0026) and `keyword_chunks` (0028) follow `chunks` by their own triggers and
foreign keys. Disabling is `DELETE … RETURNING` into `INSERT`, in one transaction; enabling is
the reverse (`OVERRIDING SYSTEM VALUE`: the id is an identity and comes back as it was). The
BM25 vector and the tsvector are not kept: `chunks`' triggers compute them again on the way
back. A disabled chunk belongs to its document (and tenant) and its generation, and goes with
either, as a chunk does. search's role has no grant on the table.

**Edits.** `original_text` holds the parser's text once a chunk was edited (NULL otherwise:
nothing to store for the chunks nobody edits); `revision` counts the changes made with
UpdateChunk (the etag is `{id}-{revision}`) and `updated_at` says when the row last changed.
They are added with constant defaults (`now()` is evaluated once here), so no existing row is
rewritten.

Revision ID: 0029
"""

from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE chunks
            ADD COLUMN original_text text,
            ADD COLUMN revision integer NOT NULL DEFAULT 0 CHECK (revision >= 0),
            ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

        CREATE TABLE disabled_chunks (
            id             bigint PRIMARY KEY,
            document_id    uuid NOT NULL,
            tenant_id      bigint NOT NULL,
            collection_id  bigint NOT NULL,
            generation_id  bigint NOT NULL,
            chunk_index    integer NOT NULL CHECK (chunk_index >= 0),
            text           text NOT NULL,
            page_number    integer NOT NULL DEFAULT 0 CHECK (page_number >= 0),
            element_type   text NOT NULL DEFAULT '',
            section_title  text NOT NULL DEFAULT '',
            text_as_html   text NOT NULL DEFAULT '',
            embedding      vector NOT NULL,
            search_terms   text NOT NULL DEFAULT '',
            -- The BM25 length (ListChunks' token_count); computed again on the way back.
            search_length  integer NOT NULL DEFAULT 0,
            text_source    text NOT NULL DEFAULT '' CHECK (text_source IN ('', 'text_layer', 'ocr', 'mixed')),
            ocr_confidence real CHECK (ocr_confidence BETWEEN 0 AND 1),
            boxes          jsonb NOT NULL DEFAULT '[]'::jsonb,
            original_text  text,
            revision       integer NOT NULL DEFAULT 0 CHECK (revision >= 0),
            updated_at     timestamptz NOT NULL DEFAULT now(),
            UNIQUE (document_id, generation_id, chunk_index),
            FOREIGN KEY (document_id, tenant_id) REFERENCES documents (id, tenant_id) ON DELETE CASCADE,
            FOREIGN KEY (generation_id, collection_id) REFERENCES collection_generations (id, collection_id)
                ON DELETE CASCADE
        );
        CREATE INDEX disabled_chunks_generation ON disabled_chunks (generation_id);
        -- Only ingest-api (the owner) reads it: no policy and no grant for search's role.
        ALTER TABLE disabled_chunks ENABLE ROW LEVEL SECURITY;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        -- The disabled chunks go back to search: a downgrade keeps every chunk.
        INSERT INTO chunks (id, document_id, tenant_id, collection_id, generation_id, chunk_index, text, page_number,
                            element_type, section_title, text_as_html, embedding, search_terms, text_source,
                            ocr_confidence, boxes)
        OVERRIDING SYSTEM VALUE
        SELECT id, document_id, tenant_id, collection_id, generation_id, chunk_index, text, page_number, element_type,
               section_title, text_as_html, embedding, search_terms, text_source, ocr_confidence, boxes
          FROM disabled_chunks;
        DROP TABLE disabled_chunks;
        ALTER TABLE chunks DROP COLUMN updated_at, DROP COLUMN revision, DROP COLUMN original_text;
        """
    )
