"""Alembic migrations of the Sluice schema, run with `sluice-migrate` or `upgrade()`."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

HERE = Path(__file__).resolve().parent


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(HERE))
    config.attributes["database_url"] = database_url
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def main() -> None:
    from sluice_common.logs import configure_logging

    from sluice_ingest.settings import IngestSettings

    settings = IngestSettings()
    configure_logging("migrate", settings.log_level, settings.log_json)
    upgrade(settings.database_url)
