"""A read-only role for the search service.

search needs SELECT on collections, documents and chunks and nothing else. Operators create a
login in this role (`CREATE ROLE search LOGIN PASSWORD '…' IN ROLE sluice_search_reader`) and
point SLUICE_SEARCH_DATABASE_URL at it, or at a hot-standby replica.

Revision ID: 0003
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        DO $$ BEGIN
            IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sluice_search_reader') THEN
                CREATE ROLE sluice_search_reader NOLOGIN;
            END IF;
        END $$;
        GRANT USAGE ON SCHEMA public TO sluice_search_reader;
        GRANT SELECT ON collections, documents, chunks TO sluice_search_reader;
        ALTER ROLE sluice_search_reader SET default_transaction_read_only = on;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        REVOKE ALL ON collections, documents, chunks FROM sluice_search_reader;
        REVOKE USAGE ON SCHEMA public FROM sluice_search_reader;
        """
    )
