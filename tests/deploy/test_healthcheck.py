"""docker/healthcheck.py, the containers' health probe, run against real endpoints: plaintext,
TLS and mutual TLS (the real ingest-api), and /metrics over HTTPS."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from certificates import issue, make_pki
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from helpers import free_port
from sluice_common.metrics import start_metrics_server
from sluice_common.settings import CommonSettings

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
        def do_GET(self):  # http.server's name
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


# ---------------------------------------------------------------- TLS and mutual TLS
# The probe reaches a service as its clients do (docs/operations.md, "Health"): the real
# ingest-api here, with certificates made by the test.


@pytest.fixture
def pki(tmp_path):
    return make_pki(tmp_path)


def probe_env(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_TLS_")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=30, env={**clean, **(env or {})}
    )


def test_grpc_probe_over_tls_needs_the_ca(ingest_api_factory, pki):
    cert, key = pki["server"]
    server = ingest_api_factory(tls_cert_file=cert, tls_key_file=key)
    assert probe_env("grpc", server.address, "--ca-file", pki["ca"]).returncode == 0
    plaintext = probe_env("grpc", server.address)
    assert plaintext.returncode == 1 and "UNAVAILABLE" in plaintext.stderr
    wrong_ca = probe_env("grpc", server.address, "--ca-file", pki["other_ca"])
    assert wrong_ca.returncode == 1 and "UNAVAILABLE" in wrong_ca.stderr
    # The variables a worker reads are the probe's defaults (a container's own settings).
    assert probe_env("grpc", server.address, env={"SLUICE_TLS_CA_FILE": pki["ca"]}).returncode == 0


def test_under_mutual_tls_health_needs_a_client_certificate_but_no_api_key(ingest_api_factory, pki):
    cert, key = pki["server"]
    server = ingest_api_factory(tls_cert_file=cert, tls_key_file=key, tls_client_ca_file=pki["ca"])
    client_cert, client_key = pki["client"]
    rogue_cert, rogue_key = pki["rogue"]
    refused = probe_env("grpc", server.address, "--ca-file", pki["ca"])
    assert refused.returncode == 1 and "UNAVAILABLE" in refused.stderr  # refused at the handshake
    assert probe_env("grpc", server.address, "--ca-file", pki["ca"], "--cert", rogue_cert, "--key", rogue_key).returncode == 1
    assert probe_env("grpc", server.address, "--ca-file", pki["ca"], "--cert", client_cert, "--key", client_key).returncode == 0
    assert (
        probe_env(
            "grpc",
            server.address,
            "sluice.v1.DocumentService",
            env={
                "SLUICE_TLS_CA_FILE": pki["ca"],
                "SLUICE_TLS_CLIENT_CERT_FILE": client_cert,
                "SLUICE_TLS_CLIENT_KEY_FILE": client_key,
            },
        ).returncode
        == 0
    )


def test_server_name_checks_a_certificate_issued_for_another_name(ingest_api_factory, pki, tmp_path):
    """In a pod the probe dials localhost while the certificate names the Service."""
    cert, key = issue(tmp_path, "named", pki["ca_key"], pki["ca_cert"], server=True, names=["ingest-api.sluice.svc"])
    server = ingest_api_factory(tls_cert_file=cert, tls_key_file=key)
    mismatch = probe_env("grpc", server.address, "--ca-file", pki["ca"])
    assert mismatch.returncode == 1
    assert probe_env("grpc", server.address, "--ca-file", pki["ca"], "--server-name", "ingest-api.sluice.svc").returncode == 0


def test_http_probe_of_metrics_over_https_with_a_client_certificate(pki):
    """sluice_common.metrics serving HTTPS that requires a client certificate, probed."""
    cert, key = pki["server"]
    port = free_port()
    settings = CommonSettings(
        metrics_port=port, metrics_tls_cert_file=cert, metrics_tls_key_file=key, metrics_tls_client_ca_file=pki["ca"]
    )
    server = start_metrics_server(settings, "127.0.0.1:0")
    try:
        client_cert, client_key = pki["client"]
        url = f"https://127.0.0.1:{port}/metrics"
        assert probe_env("http", url, "--ca-file", pki["ca"], "--cert", client_cert, "--key", client_key).returncode == 0
        assert probe_env("http", url, "--ca-file", pki["ca"]).returncode == 1  # no client certificate
        assert probe_env("http", f"http://127.0.0.1:{port}/metrics").returncode == 1  # plain HTTP
    finally:
        server.shutdown()
        server.server_close()
