"""Chunks say how their text was obtained (text layer, OCR or both) and, for OCR, how sure the
recognizer was; search returns both with every hit.

Revision ID: 0008
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE chunks
            ADD COLUMN text_source text NOT NULL DEFAULT ''
                CHECK (text_source IN ('', 'text_layer', 'ocr', 'mixed')),
            ADD COLUMN ocr_confidence real CHECK (ocr_confidence BETWEEN 0 AND 1)
        """
    )


def downgrade() -> None:
    op.execute("ALTER TABLE chunks DROP COLUMN ocr_confidence, DROP COLUMN text_source")
