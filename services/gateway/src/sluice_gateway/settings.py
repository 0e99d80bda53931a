"""The gateway's settings, from SLUICE_* environment variables (docs/http.md, "Running it")."""

from __future__ import annotations

from sluice_common.settings import CommonSettings
from sluice_common.tls import ClientTLS


class GatewaySettings(CommonSettings):  # type: ignore[misc,unused-ignore]  # Any when checked alone
    """Defaults work beside `make run`."""

    # Where the HTTP server listens (host:port).
    gateway_bind: str = "localhost:8080"
    # The gRPC backends it forwards to, the same variables as the CLI and the SDK.
    ingest_address: str = "localhost:50051"
    search_address: str = "localhost:50052"
    # TLS to the backends, as `sluice` reads it: the servers' CA, and a client certificate and
    # key under mutual TLS. Empty: plaintext.
    tls_ca_file: str = ""
    tls_client_cert_file: str = ""
    tls_client_key_file: str = ""
    # The deadline of a unary call forwarded to a backend, in seconds (streams have none).
    gateway_call_timeout_seconds: float = 60.0
    # The largest JSON request body accepted, in bytes (uploads are streamed, not bounded here).
    gateway_max_json_bytes: int = 4_194_304  # 4 MiB
    # Browser origins allowed to call the gateway (CORS), comma-separated, e.g.
    # "https://app.example.com"; "*" for any. Empty: no cross-origin calls.
    gateway_cors_origins: str = ""
    # How long a cache may keep the answer of a GET (a read-only call sent as a Connect GET: a search,
    # a GetDocument, a ListCollections…), in seconds:
    # sent as Cache-Control max-age and s-maxage, with Vary: Authorization, X-Sluice-Tenant.
    # 0: no-store, nothing is cached. A cached answer can miss documents that became READY since
    # (docs/http.md).
    gateway_get_max_age_seconds: int = 0
    # The built web console (its dist directory: index.html and assets/), served at / (docs/console.md).
    # Empty: the repository's console/dist when it was built; else / says how to build it.
    gateway_console_dir: str = ""

    def cors_origins(self) -> list[str]:
        return [origin.strip() for origin in self.gateway_cors_origins.split(",") if origin.strip()]

    def backend_tls(self) -> ClientTLS:
        return ClientTLS(self.tls_ca_file, self.tls_client_cert_file, self.tls_client_key_file)

    @property
    def host(self) -> str:
        host, _, _ = self.gateway_bind.rpartition(":")
        return host.strip("[]") or "localhost"

    @property
    def port(self) -> int:
        return int(self.gateway_bind.rpartition(":")[2])
