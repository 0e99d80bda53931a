"""Test fixtures: one embedded PostgreSQL (with pgvector) per test session, a migrated
template database, and a fresh copy of it for each test that asks for `database_url`."""

from __future__ import annotations

import itertools
import os

import psycopg
import pytest

from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database

TEMPLATE = "sluice_template"
_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_admin_uri(tmp_path_factory):
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "data", cleanup="delete")
    uri = server.start()
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET max_connections = 300")
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("ALTER SYSTEM SET synchronous_commit = off")
    server.stop()
    uri = server.start()
    yield uri
    server.stop()


@pytest.fixture(scope="session")
def template_uri(pg_admin_uri):
    from sluice_ingest.migrations import upgrade

    ensure_database(pg_admin_uri, TEMPLATE)
    uri = database_uri(pg_admin_uri, TEMPLATE)
    upgrade(uri)
    return uri


@pytest.fixture
def database_url(pg_admin_uri, template_uri):
    """A freshly migrated, empty database of its own for one test."""
    name = f"t_{os.getpid()}_{next(_counter)}"
    ensure_database(pg_admin_uri, name, template=TEMPLATE)
    yield database_uri(pg_admin_uri, name)
    with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(psycopg.sql.Identifier(name)))
