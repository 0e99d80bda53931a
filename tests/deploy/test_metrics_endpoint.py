"""The Prometheus endpoint listens where its service does (sluice_common.metrics): on
SLUICE_METRICS_HOST, else the host of the service's gRPC bind; a worker, which binds no gRPC
port, on every interface. Real HTTP servers, real sockets."""

from __future__ import annotations

import socket
import urllib.request

import psutil
import pytest
from helpers import free_port
from sluice_common.metrics import metrics_host, start_metrics_server
from sluice_common.settings import CommonSettings


@pytest.mark.parametrize(
    ("configured", "bind", "expected"),
    [
        ("", "localhost:50051", "localhost"),
        ("", "127.0.0.1:50051", "127.0.0.1"),
        ("", "0.0.0.0:50051", "0.0.0.0"),
        ("", "[::]:50051", "::"),
        ("", "unix:/run/sluice.sock", "localhost"),
        ("", "", "0.0.0.0"),  # a worker
        ("10.1.2.3", "localhost:50051", "10.1.2.3"),  # SLUICE_METRICS_HOST wins
        ("[::1]", "", "::1"),
    ],
)
def test_metrics_host(configured, bind, expected):
    assert metrics_host(configured, bind) == expected


def other_address() -> str | None:
    """An IPv4 address of this machine that is not loopback, if it has one."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return address.address
    return None


def answers(host: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
            return response.status == 200 and b"python_info" in response.read()
    except OSError:
        return False


def serve(settings: CommonSettings, bind: str):
    server = start_metrics_server(settings, bind)
    assert server is not None
    return server


def test_a_service_bound_to_loopback_serves_metrics_on_loopback_only():
    port = free_port()
    server = serve(CommonSettings(metrics_port=port), "127.0.0.1:50051")
    try:
        assert server.server_address[0] == "127.0.0.1"
        assert answers("127.0.0.1", port)
        other = other_address()
        if other is not None:
            assert not answers(other, port), f"/metrics answered on {other}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_worker_serves_metrics_on_every_interface_unless_told():
    port = free_port()
    server = serve(CommonSettings(metrics_port=port), "")
    try:
        assert server.server_address[0] == "0.0.0.0"
        assert answers("127.0.0.1", port)
    finally:
        server.shutdown()
        server.server_close()
    port = free_port()
    server = serve(CommonSettings(metrics_port=port, metrics_host="127.0.0.1"), "")
    try:
        assert server.server_address[0] == "127.0.0.1"
    finally:
        server.shutdown()
        server.server_close()


def test_metrics_off_and_half_a_tls_pair():
    assert start_metrics_server(CommonSettings(metrics_port=0), "127.0.0.1:1") is None
    with pytest.raises(SystemExit, match="go together"):
        start_metrics_server(CommonSettings(metrics_port=free_port(), metrics_tls_cert_file="cert.pem"), "127.0.0.1:1")
    with pytest.raises(SystemExit, match="client certificates only exist over HTTPS"):
        start_metrics_server(CommonSettings(metrics_port=free_port(), metrics_tls_client_ca_file="ca.pem"), "127.0.0.1:1")
