"""Health probes, sent the way a client reaches the service (docs/operations.md, "Health").

`check_grpc` asks grpc.health.v1 `Check` on the service's own port, through its TLS: with a
CA when the service serves TLS, and with a client certificate when it requires mutual TLS
(the handshake refuses a probe without one, before any health service answers). `check_http`
GETs a URL such as /metrics, over HTTPS with the same CA and certificate when given. Each
returns "" when healthy, else one line saying why. Used by `sluice-dev` (readiness) and by
the containers' `sluice-healthcheck`.
"""

from __future__ import annotations

import ssl
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .tls import ClientTLS, secure_or_insecure_channel

TIMEOUT_SECONDS = 3.0


def check_grpc(
    address: str, tls: ClientTLS | None = None, service: str = "", *, server_name: str = "", timeout: float = TIMEOUT_SECONDS
) -> str:
    """ "" when `service` at `address` reports SERVING; `server_name` is the name its
    certificate is checked against when it is not the address's host (e.g. localhost in a pod)."""
    options = [("grpc.ssl_target_name_override", server_name)] if server_name else None
    with secure_or_insecure_channel(address, tls or ClientTLS(), options) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as error:
            detail = (error.details() or "").strip()
            return f"{address}: {error.code().name}" + (f" ({detail[:300]})" if detail else "")
    if response.status != health_pb2.HealthCheckResponse.SERVING:
        return f"{address}: {health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)}"
    return ""


def https_context(tls: ClientTLS) -> ssl.SSLContext:
    """Verify the server with `tls.ca_file` (else the system's CAs); present its certificate if any."""
    context = ssl.create_default_context(cafile=tls.ca_file or None)
    if tls.cert_file:
        context.load_cert_chain(tls.cert_file, tls.key_file or None)
    return context


def check_http(url: str, tls: ClientTLS | None = None, *, timeout: float = TIMEOUT_SECONDS) -> str:
    """ "" when a GET of `url` answers 2xx."""
    context = https_context(tls or ClientTLS()) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:  # the URL is an operator's own
            if 200 <= response.status < 300:
                return ""
            return f"{url}: HTTP {response.status}"
    except OSError as error:
        return f"{url}: {error}"
