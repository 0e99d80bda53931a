"""Alembic environment: migrations run online against the URL given by upgrade()."""

from alembic import context
from sluice_common.db import sqlalchemy_url
from sqlalchemy import create_engine, pool


def run_migrations_online() -> None:
    url = context.config.attributes["database_url"]
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, transactional_ddl=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations_online()
