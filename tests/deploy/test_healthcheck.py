"""docker/healthcheck.py, the containers' health probe, run against real endpoints."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

SCRIPT = Path(__file__).resolve().parents[2] / "docker" / "healthcheck.py"


def probe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def health_server():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(0)


def test_grpc_probe_follows_the_serving_status(health_server):
    servicer, address = health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert probe("grpc", address).returncode == 0
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    result = probe("grpc", address)
    assert result.returncode == 1 and "NOT_SERVING" in result.stderr


def test_grpc_probe_fails_when_nothing_listens():
    result = probe("grpc", "127.0.0.1:9")
    assert result.returncode == 1 and "UNAVAILABLE" in result.stderr


def test_http_probe():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200 if self.path == "/metrics" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert probe("http", f"{base}/metrics").returncode == 0
        assert probe("http", f"{base}/nope").returncode == 1
    finally:
        server.shutdown()


def test_usage_error_exit_2():
    assert probe("bogus").returncode == 2
