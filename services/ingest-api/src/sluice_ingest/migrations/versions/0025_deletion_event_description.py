"""A deletion's event keeps what the document's row said of it (docs/clients.md, WatchCollection).

Readers of the events log take what never changes over a document's life (filename, media type,
hash, size, metadata, upload time, source_uri, version) from its `documents` row, one join per
page (store/events.py). A deletion's event is read after that row is gone, so the delete trigger
now writes those fields into the event itself, in `description` (jsonb, NULL on every other
row), from the row being deleted. A WatchCollection client, a webhook receiver or a sync mirror
then learns which file and which source_uri went, not only an id.

Only the DELETE branch of sluice_on_document_change changes; it is rewritten in place, as 0014
rewrote the event functions.

Revision ID: 0025
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

DESCRIPTION = (
    "jsonb_build_object('filename', OLD.filename, 'mime_type', OLD.mime_type, 'content_sha256', OLD.content_sha256,"
    " 'size_bytes', OLD.size_bytes, 'metadata', OLD.metadata, 'created_at', OLD.created_at,"
    " 'source_uri', OLD.source_uri, 'version', OLD.version)"
)
REWRITES = (
    ("available_at, updated_at, deleted)", "available_at, updated_at, deleted, description)"),
    ("e.available_at, now(), true\n", f"e.available_at, now(), true, {DESCRIPTION}\n"),
)


def _rewrite(undo: bool) -> None:
    conn = op.get_bind()
    source = conn.exec_driver_sql("SELECT pg_get_functiondef('sluice_on_document_change()'::regprocedure)").scalar_one()
    for old, new in REWRITES:
        if undo:
            old, new = new, old
        if source.count(old) != 1:
            raise RuntimeError(f"sluice_on_document_change does not read as expected (no {old!r}): was it redefined?")
        source = source.replace(old, new)
    conn.exec_driver_sql(source)


def upgrade() -> None:
    op.execute("ALTER TABLE document_events ADD COLUMN description jsonb")
    _rewrite(undo=False)


def downgrade() -> None:
    _rewrite(undo=True)
    op.execute("ALTER TABLE document_events DROP COLUMN description")
