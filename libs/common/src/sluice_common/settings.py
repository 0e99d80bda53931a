"""Settings shared by every service, read from SLUICE_* environment variables."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class CommonSettings(BaseSettings):
    """Defaults work for the embedded run (`make run`)."""

    model_config = SettingsConfigDict(env_prefix="SLUICE_", extra="ignore")

    # PostgreSQL URL (libpq form); the embedded run writes it into .sluice/database_url.
    database_url: str = "postgresql://postgres@localhost:5432/sluice"
    log_level: str = "INFO"
    # JSON lines for machines by default; set SLUICE_LOG_JSON=false for a console format.
    log_json: bool = True
    # Port of the Prometheus /metrics endpoint; 0 disables it.
    metrics_port: int = 0
    # Seconds a shutting-down server gives in-flight calls before cancelling them.
    shutdown_grace_seconds: float = 10.0
