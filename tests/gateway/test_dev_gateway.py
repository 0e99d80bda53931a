"""`make run` serves sluice-gateway: sluice-dev starts it on SLUICE_DEV_GATEWAY_PORT, waits for
its /healthz, prints its URL in the banner, and a curl-like client with the client key of the
credentials file creates, uploads, watches to READY over SSE and searches through it, with the
real worker. A busy gateway port leaves the rest running."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from pathlib import Path

import httpx
import pytest
from dev_stack import DevStack

from gateway.test_gateway import events

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base():
    # Not under pytest's tmp dir (0700): the embedded PostgreSQL may run as its own user.
    path = Path(tempfile.mkdtemp(prefix="sluice-dev-gateway-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_make_run_serves_the_gateway_and_prints_it(base):
    stack = DevStack(base / "one")
    try:
        stack.wait_ready()
        url = f"http://127.0.0.1:{stack.gateway_port}"
        assert f"{url}/openapi.json" in stack.output, stack.output
        assert any(line.startswith("  gateway") and url in line for line in stack.lines), stack.output
        assert ("127.0.0.1", stack.gateway_port) in stack.listening()
        key = json.loads((stack.home / "credentials").read_text())["keys"]["client"]
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
            assert http.get("/healthz").json()["status"] == "SERVING"
            created = http.post(
                "/sluice.v1.DocumentService/CreateCollection",
                json={"collection": {"name": "web", "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}}},
            )
            assert created.status_code == 200, created.text
            document = http.post(
                "/v1/collections/web/documents",
                params={"filename": "leases.md"},
                content=b"# Leases\n\nA worker renews its lease with heartbeats; a lease expires after 30 seconds.\n",
            ).json()
            statuses = []
            with http.stream("POST", "/sluice.v1.DocumentService/WatchDocument", json={"id": document["id"]}) as response:
                for event, _, data in events(response):
                    if event != "message":
                        break
                    statuses.append(data["document"]["status"])
            assert statuses[-1] == "DOCUMENT_STATUS_READY", (statuses, stack.logs())
            hits = http.post(
                "/sluice.v1.SearchService/Search", json={"collection": "web", "query": "when does a lease expire"}
            ).json()["hits"]
            assert hits[0]["filename"] == "leases.md"
    finally:
        code = stack.stop()
    assert code == 0, stack.output


def test_a_busy_gateway_port_is_said_and_the_rest_runs(base):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        stack = DevStack(base / "two", extra_env={"SLUICE_DEV_GATEWAY_PORT": str(port)})
        try:
            stack.wait_ready()
            assert f"port {port} for sluice-gateway (HTTP/JSON) is in use: running without it" in stack.output
            assert not any(line.startswith("  gateway") for line in stack.lines)
        finally:
            code = stack.stop()
    assert code == 0, stack.output
