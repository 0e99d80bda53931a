"""No document that is not READY holds chunks, in databases that were running before as well.

Rule 1 (docs/architecture.md) now says that no document that is not READY holds chunks:
ReprocessDocument deletes a document's chunks in the transaction that moves it out of READY
(store/documents.py). Before that, a reprocess left the old chunks in place until the next
commit replaced them, or for ever when the reprocess ended FAILED. This migration deletes those
leftovers. They were never searchable (search joins READY documents only) and the document's
next commit would have deleted them anyway; here they go at once, so the HNSW graphs stop
walking through them (docs/search.md, "A graph of READY chunks only").

The keyword statistics (0016) and `document_vectors` (0026) follow by their statement triggers
on chunks, as for any delete. There is no downgrade: the chunks cannot come back, and nothing
needs them.

Revision ID: 0027
"""

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DELETE FROM chunks c USING documents d WHERE d.id = c.document_id AND d.status <> 'READY'")


def downgrade() -> None:
    pass
