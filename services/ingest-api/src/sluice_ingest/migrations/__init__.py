"""Alembic migrations of the Sluice schema, run with `sluice-migrate` or `upgrade()`.

Every lock a revision asks for waits at most LOCK_TIMEOUT_MS; a revision that times out is
rolled back alone (each runs in its own transaction, migrations/env.py) and tried again after a
pause, up to LOCK_ATTEMPTS times. So no writer queues behind a waiting migration for longer than
LOCK_TIMEOUT_MS (docs/operations.md, "Upgrading")."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import psycopg
from alembic import command
from alembic.config import Config
from sqlalchemy.exc import OperationalError

HERE = Path(__file__).resolve().parent
LOCK_TIMEOUT_MS = 2000
LOCK_ATTEMPTS = 30
LOCK_RETRY_PAUSE_SECONDS = 1.0

log = logging.getLogger("sluice.migrate")


def alembic_config(database_url: str, lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> Config:
    config = Config()
    config.set_main_option("script_location", str(HERE))
    config.attributes["database_url"] = database_url
    config.attributes["lock_timeout_ms"] = lock_timeout_ms
    return config


def upgrade(
    database_url: str,
    revision: str = "head",
    *,
    lock_timeout_ms: int = LOCK_TIMEOUT_MS,
    attempts: int = LOCK_ATTEMPTS,
    pause_seconds: float = LOCK_RETRY_PAUSE_SECONDS,
) -> None:
    for attempt in range(1, attempts + 1):
        try:
            command.upgrade(alembic_config(database_url, lock_timeout_ms), revision)
            return
        except OperationalError as error:
            if not isinstance(error.orig, psycopg.errors.LockNotAvailable) or attempt == attempts:
                raise
            log.warning(
                "migration waited lock_timeout for a lock; trying again",
                extra={"attempt": attempt, "attempts": attempts, "lock_timeout_ms": lock_timeout_ms},
            )
            time.sleep(pause_seconds)


def main() -> None:
    from sluice_common.logs import configure_logging

    from sluice_ingest.settings import IngestSettings

    settings = IngestSettings()
    configure_logging("migrate", settings.log_level, settings.log_json)
    upgrade(settings.database_url)
