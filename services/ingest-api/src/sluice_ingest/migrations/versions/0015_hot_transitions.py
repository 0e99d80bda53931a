"""Transitions update rows in place (HOT): no index on a document's status, room in the pages.

PostgreSQL can update a row without touching any index (a heap-only tuple) only when no indexed
column changes and the new version fits in the same page. Every transition changed
`documents.status`, which `documents_status` indexed, so each one wrote a new entry into all
seven indexes of `documents`; and pages filled to the brim by inserts left no room anyway
(bench: 0 of 2,000 document updates and 0 of 2,800 job updates were HOT).

- `documents_status` goes. Nothing reads it: the queries filter on a status within a tenant or
  a collection, through their own indexes, and search reaches documents by id.
- `documents` and `ingestion_jobs` keep a fifth of each page free for the new versions
  (fillfactor 80; pages written from now on).
- ReportStage renews a lease only once a tenth of it has passed (store/queue_sql.py LAZY_RENEWAL), so that fast
  stage reports leave `locked_at`, which `ingestion_jobs_running` indexes, as it is.

Revision ID: 0015
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        -- Earlier migrations of the same run may have left deferred trigger events on these tables,
        -- which ALTER TABLE refuses: fire them now.
        SET CONSTRAINTS ALL IMMEDIATE;
        DROP INDEX documents_status;
        ALTER TABLE documents SET (fillfactor = 80);
        ALTER TABLE ingestion_jobs SET (fillfactor = 80);
        """
    )


def downgrade() -> None:
    op.execute(
        """
        SET CONSTRAINTS ALL IMMEDIATE;
        ALTER TABLE ingestion_jobs RESET (fillfactor);
        ALTER TABLE documents RESET (fillfactor);
        CREATE INDEX documents_status ON documents (status);
        """
    )
