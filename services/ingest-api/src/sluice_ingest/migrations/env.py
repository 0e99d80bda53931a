"""Alembic environment: migrations run online against the URL given by upgrade().

Each revision runs in a transaction of its own, so its locks are held for that revision only,
and every lock is asked for with `lock_timeout` (docs/operations.md, "Upgrading"): a migration
that would queue behind a long transaction gives up instead of making every writer queue behind
it, and upgrade() tries that revision again."""

from alembic import context
from sluice_common.db import sqlalchemy_url
from sqlalchemy import create_engine, pool


def run_migrations_online() -> None:
    url = context.config.attributes["database_url"]
    lock_timeout_ms = int(context.config.attributes.get("lock_timeout_ms", 0))
    engine = create_engine(
        sqlalchemy_url(url),
        poolclass=pool.NullPool,
        connect_args={"options": f"-c lock_timeout={lock_timeout_ms}", "application_name": "sluice-migrate"},
    )
    with engine.connect() as connection:
        context.configure(connection=connection, transactional_ddl=True, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations_online()
