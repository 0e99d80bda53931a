"""The types of a chunk's elements (docs/chunks.md, "What a chunk shows").

The worker's chunking knows every element a chunk was cut from (unstructured's composite
elements carry `metadata.orig_elements`); it now sends their types in order of first appearance
(`Chunk.element_types`), and a commit stores them beside the main one (`element_type`).
ListChunks shows them as `DocumentChunk.element_types`. Chunks indexed before have none (`{}`):
a constant default, so no row is rewritten. A disabled chunk keeps them.

Revision ID: 0030
"""

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE chunks ADD COLUMN element_types text[] NOT NULL DEFAULT '{}';
        ALTER TABLE disabled_chunks ADD COLUMN element_types text[] NOT NULL DEFAULT '{}';
        """
    )


def downgrade() -> None:
    op.execute(
        """
        ALTER TABLE disabled_chunks DROP COLUMN element_types;
        ALTER TABLE chunks DROP COLUMN element_types;
        """
    )
