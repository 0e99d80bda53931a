"""Typed metadata filters, element boxes of chunks, a collection's default reranker.

- `documents_metadata`: a GIN index (jsonb_ops) on `documents.metadata`, so that a filter's
  EQ / IN (containment, `@>`) and EXISTS (`?`) find the matching documents of a large
  collection without reading them all (docs/search.md, "Filters"). Transitions never change
  `metadata`, so they stay heap-only updates (0015).
- `chunks.boxes`: where the chunk's elements lie on their pages, as the parser found them (PDF
  text boxes and tables, OCR lines): a JSON array of {"page", "left", "top", "right", "bottom"}
  with coordinates as fractions of the page. Empty for formats without pages.
- `collections.reranker`: the collection's default reranker (provider, model, endpoint, the
  *name* of the environment variable holding its key, candidates, time budget), NULL for none.

Revision ID: 0017
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        SET CONSTRAINTS ALL IMMEDIATE;
        CREATE INDEX documents_metadata ON documents USING gin (metadata);
        ALTER TABLE chunks ADD COLUMN boxes jsonb NOT NULL DEFAULT '[]'::jsonb
            CHECK (jsonb_typeof(boxes) = 'array');
        ALTER TABLE collections ADD COLUMN reranker jsonb
            CHECK (reranker IS NULL OR jsonb_typeof(reranker) = 'object');
        """
    )


def downgrade() -> None:
    op.execute(
        """
        SET CONSTRAINTS ALL IMMEDIATE;
        ALTER TABLE collections DROP COLUMN reranker;
        ALTER TABLE chunks DROP COLUMN boxes;
        DROP INDEX documents_metadata;
        """
    )
