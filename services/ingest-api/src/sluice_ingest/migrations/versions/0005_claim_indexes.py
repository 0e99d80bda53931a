"""An index for rule 8's look-up in the claim statement.

Every claim first looks for a RUNNING job whose lease expired with no attempts left (rule 8).
Through the index on all RUNNING jobs by lease age, that look-up read every expired lease that
still had attempts left (10,000 of them: 0.9 ms of a 1.1 ms claim, bench/ingest_bench.py); a
partial index on the exhausted ones alone answers it from an empty or tiny index.

Revision ID: 0005
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX ingestion_jobs_exhausted ON ingestion_jobs (locked_at)"
        " WHERE status = 'RUNNING' AND attempts >= max_attempts"
    )


def downgrade() -> None:
    op.execute("DROP INDEX ingestion_jobs_exhausted")
