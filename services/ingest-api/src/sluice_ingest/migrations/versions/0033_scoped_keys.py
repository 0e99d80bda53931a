"""Scoped keys (docs/tenancy.md, "Scoped keys"): a key may be limited to some collections of its
tenant. `api_keys.collections` holds their names; NULL is every collection, so every existing key
keeps its meaning. Search authenticates keys itself, so its read-only role may read the column.

Revision ID: 0033
"""

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        ALTER TABLE api_keys ADD COLUMN collections text[]
            CHECK (collections IS NULL OR cardinality(collections) BETWEEN 1 AND 100);
        GRANT SELECT (collections) ON api_keys TO sluice_search_reader;
        """
    )


def downgrade() -> None:
    op.execute(
        """
        REVOKE SELECT (collections) ON api_keys FROM sluice_search_reader;
        ALTER TABLE api_keys DROP COLUMN collections;
        """
    )
