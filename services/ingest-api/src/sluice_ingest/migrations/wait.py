"""Wait until the database schema is at the head this package's migrations know.

    python -m sluice_ingest.migrations.wait [--timeout SECONDS]

ingest-api's init container on Kubernetes runs this, so a pod serves only after the
migration Job of its own release has finished (never on an older schema). A revision this
package does not know is a newer release's (its migrations stay compatible with the release
before: docs/operations.md), so an old pod restarting during a rolling upgrade still starts.
Exit 0 when ready, 1 on timeout. It only reads `alembic_version`; it never migrates.
"""

from __future__ import annotations

import argparse
import sys
import time

import psycopg
from alembic.script import ScriptDirectory

from . import alembic_config


def known_revisions(database_url: str) -> tuple[str, set[str]]:
    """This package's head and every revision it knows."""
    scripts = ScriptDirectory.from_config(alembic_config(database_url))
    head = scripts.get_current_head()
    if head is None:  # only if the package shipped without its versions/ directory
        raise RuntimeError("this package has no migrations: its schema head is unknown")
    return head, {script.revision for script in scripts.walk_revisions()}


def is_ready(current: str | None, head: str, known: set[str]) -> bool:
    return current == head or (current is not None and current not in known)


def current_revision(database_url: str) -> str | None:
    with psycopg.connect(database_url, connect_timeout=5) as conn:
        exists = conn.execute("SELECT to_regclass('alembic_version') IS NOT NULL").fetchone()
        if exists is None or not exists[0]:
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        return row[0] if row else None


def wait_for_head(database_url: str, timeout: float, interval: float = 2.0) -> bool:
    head, known = known_revisions(database_url)
    deadline = time.monotonic() + timeout
    while True:
        try:
            current = current_revision(database_url)
            reason = f"schema at {current}, waiting for {head}"
        except psycopg.Error as error:
            current, reason = None, f"database not reachable: {error.__class__.__name__}"
        if is_ready(current, head, known):
            print(f"schema at {current} (this release: {head})", file=sys.stderr)
            return True
        if time.monotonic() >= deadline:
            print(f"gave up: {reason}", file=sys.stderr)
            return False
        print(reason, file=sys.stderr)
        time.sleep(interval)


def main(argv: list[str] | None = None) -> None:
    from sluice_ingest.settings import IngestSettings

    parser = argparse.ArgumentParser(prog="python -m sluice_ingest.migrations.wait", description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before giving up (exit 1)")
    args = parser.parse_args(argv)
    sys.exit(0 if wait_for_head(IngestSettings().database_url, args.timeout) else 1)


if __name__ == "__main__":
    main()
