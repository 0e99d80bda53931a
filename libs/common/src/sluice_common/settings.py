"""Settings shared by every service, read from SLUICE_* environment variables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from .tls import ServerTLS


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
    # Interface of /metrics; empty: the host the service's gRPC server binds (a worker, which binds
    # none: every interface).
    metrics_host: str = ""
    # HTTPS for /metrics: a certificate and key (PEM files); both empty serves plain HTTP.
    metrics_tls_cert_file: str = ""
    metrics_tls_key_file: str = ""
    # A CA whose client certificates /metrics requires (Prometheus' tls_config cert_file and key_file).
    metrics_tls_client_ca_file: str = ""
    # Seconds a shutting-down server gives in-flight calls before cancelling them.
    shutdown_grace_seconds: float = 10.0

    # TLS: the server's certificate and key (PEM files); both empty serves plaintext, which
    # is allowed only on a loopback bind unless allow_plaintext is set.
    tls_cert_file: str = ""
    tls_key_file: str = ""
    # A CA whose client certificates the server requires (mutual TLS); empty: none required.
    tls_client_ca_file: str = ""
    # Serve plaintext on a non-loopback address (a trusted network only).
    allow_plaintext: bool = False
    # gRPC server reflection (for grpcurl and friends). Health checks need no API key, but come
    # through the server's TLS: under mutual TLS a probe presents a client certificate too.
    reflection_enabled: bool = True
    # Seconds an API-key lookup is reused; a revoked key is refused within this time (keep ≤ 1).
    auth_cache_seconds: float = 0.5
    # Per-key request rate limit of this process (token bucket): calls a second and burst; 0 disables.
    rate_limit_per_second: float = 100.0
    rate_limit_burst: float = 400.0

    def server_tls(self) -> ServerTLS:
        from .tls import ServerTLS

        return ServerTLS(self.tls_cert_file, self.tls_key_file, self.tls_client_ca_file)
