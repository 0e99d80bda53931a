"""The upload's trace context, kept with its job so the worker's spans join the upload's trace.

JSON of W3C trace headers (`traceparent`, `tracestate`), NULL when tracing is off
(sluice_common.tracing). Nullable, no default: adding it rewrites nothing.

Revision ID: 0007
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE ingestion_jobs ADD COLUMN trace_context text")


def downgrade() -> None:
    op.execute("ALTER TABLE ingestion_jobs DROP COLUMN trace_context")
