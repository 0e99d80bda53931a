"""The Prometheus `/metrics` endpoint of a service (docs/operations.md, "Metrics").

It listens on SLUICE_METRICS_PORT (0: no endpoint) at SLUICE_METRICS_HOST. Left empty, the
host is the one the service's own gRPC server binds, so that a service kept on localhost
exposes nothing else to the network; a worker binds no gRPC port, and its empty host means
every interface (a Prometheus in another container or pod scrapes it there).
SLUICE_METRICS_TLS_CERT_FILE and _KEY_FILE serve HTTPS only; SLUICE_METRICS_TLS_CLIENT_CA_FILE
as well requires a client certificate signed by that CA (Prometheus' `tls_config`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import start_http_server

from .tls import host_of

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from .settings import CommonSettings

ALL_INTERFACES = "0.0.0.0"


def metrics_host(configured: str, service_bind: str = "") -> str:
    """The interface of the endpoint: SLUICE_METRICS_HOST, else the gRPC bind's host."""
    host = configured or (host_of(service_bind) if service_bind and not service_bind.startswith("unix:") else "")
    if not host:
        return "localhost" if service_bind else ALL_INTERFACES
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host  # "[::]" -> "::"


def start_metrics_server(settings: CommonSettings, service_bind: str = "") -> WSGIServer | None:
    """Serve /metrics in a daemon thread as `settings` say; `service_bind` is the service's
    gRPC listen address (empty for a worker). Returns the HTTP server, None when disabled."""
    if not settings.metrics_port:
        return None
    cert, key, client_ca = settings.metrics_tls_cert_file, settings.metrics_tls_key_file, settings.metrics_tls_client_ca_file
    if bool(cert) != bool(key):
        raise SystemExit(
            "SLUICE_METRICS_TLS_CERT_FILE and SLUICE_METRICS_TLS_KEY_FILE go together (HTTPS for /metrics needs both)"
        )
    if client_ca and not cert:
        raise SystemExit(
            "SLUICE_METRICS_TLS_CLIENT_CA_FILE needs SLUICE_METRICS_TLS_CERT_FILE and _KEY_FILE: "
            "client certificates only exist over HTTPS"
        )
    server, _thread = start_http_server(
        settings.metrics_port,
        addr=metrics_host(settings.metrics_host, service_bind),
        certfile=cert or None,
        keyfile=key or None,
        client_cafile=client_ca or None,
        client_auth_required=bool(client_ca),
    )
    return server
