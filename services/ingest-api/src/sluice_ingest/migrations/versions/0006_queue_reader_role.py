"""A role that may count the job queue, for autoscalers (KEDA's postgresql scaler).

It reads the five columns of ingestion_jobs that say whether a job is due or held, nothing
else: no document, no content, no tenant, and no write. Operators create a login in it
(`CREATE ROLE sluice_keda LOGIN PASSWORD '…' IN ROLE sluice_queue_reader`) and give its URL
to the ScaledObject's TriggerAuthentication (deploy/kubernetes/base/worker.yaml).

Revision ID: 0006
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        DO $$ BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sluice_queue_reader') THEN
                CREATE ROLE sluice_queue_reader NOLOGIN;
            END IF;
        END $$;
        GRANT USAGE ON SCHEMA public TO sluice_queue_reader;
        GRANT SELECT (status, available_at, attempts, max_attempts, locked_at) ON ingestion_jobs TO sluice_queue_reader;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        REVOKE ALL ON ingestion_jobs FROM sluice_queue_reader;
        REVOKE USAGE ON SCHEMA public FROM sluice_queue_reader;
        """
    )
