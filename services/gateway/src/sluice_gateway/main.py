"""`sluice-gateway`: the composition root (settings → app → uvicorn)."""

from __future__ import annotations

import uvicorn
from sluice_common.logs import configure_logging
from sluice_common.metrics import start_metrics_server
from sluice_common.tls import LOOPBACK_HOSTS

from .app import create_app
from .settings import GatewaySettings


def uvicorn_config(settings: GatewaySettings) -> uvicorn.Config:
    """HTTPS when SLUICE_TLS_CERT_FILE and SLUICE_TLS_KEY_FILE are set (as for the gRPC services);
    plaintext is refused off loopback unless SLUICE_ALLOW_PLAINTEXT=true."""
    serving_tls = bool(settings.tls_cert_file and settings.tls_key_file)
    if not serving_tls and not settings.allow_plaintext and settings.host not in LOOPBACK_HOSTS:
        raise SystemExit(
            f"refusing to serve plain HTTP on {settings.gateway_bind}: give SLUICE_TLS_CERT_FILE and "
            "SLUICE_TLS_KEY_FILE, bind to localhost, or set SLUICE_ALLOW_PLAINTEXT=true on a trusted network"
        )
    return uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        # uvloop and httptools (docs/http.md, "Speed"); no X-Forwarded-* rewriting: nothing here reads the peer.
        loop="uvloop",
        http="httptools",
        proxy_headers=False,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds),
        ssl_certfile=settings.tls_cert_file or None,
        ssl_keyfile=settings.tls_key_file or None,
        ssl_ca_certs=settings.tls_client_ca_file or None,
        ssl_cert_reqs=2 if settings.tls_client_ca_file else 0,
    )


def main() -> None:
    settings = GatewaySettings()
    configure_logging("sluice-gateway", settings.log_level, settings.log_json)
    # /metrics on SLUICE_METRICS_PORT, on the HTTP bind's host unless SLUICE_METRICS_HOST says otherwise.
    start_metrics_server(settings, settings.gateway_bind)
    uvicorn.Server(uvicorn_config(settings)).run()


if __name__ == "__main__":
    main()
