"""sluice-gateway's /metrics (docs/http.md, "Metrics"): the real `sluice-gateway` process with
SLUICE_METRICS_PORT, in front of the real ingest-api and search, scraped over HTTP on its HTTP
bind's host as the other services' endpoints are (sluice_common.metrics)."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import httpx
from helpers import free_port, wait_for
from prometheus_client.parser import text_string_to_metric_families

from gateway.conftest import key_headers
from gateway.test_gateway import CREATE, GET_COLLECTION

GATEWAY = Path(sys.executable).parent / "sluice-gateway"


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_gateway_serves_its_metrics_on_the_metrics_port(ingest_api, tmp_path):
    http_port, metrics_port = free_port(), free_port()
    env = {
        **os.environ,
        "SLUICE_GATEWAY_BIND": f"127.0.0.1:{http_port}",
        "SLUICE_INGEST_ADDRESS": ingest_api.address,
        "SLUICE_SEARCH_ADDRESS": ingest_api.address,
        "SLUICE_METRICS_PORT": str(metrics_port),
        "SLUICE_LOG_JSON": "false",
    }
    log = (tmp_path / "gateway.log").open("w")
    process = subprocess.Popen([str(GATEWAY)], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{http_port}"

        def up() -> bool:
            try:
                return httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200
            except httpx.HTTPError:
                return process.poll() is not None  # stop waiting on a dead process; asserted below

        wait_for(up, 60, what="sluice-gateway to listen")
        assert process.poll() is None, (tmp_path / "gateway.log").read_text()
        with httpx.Client(base_url=url, headers=key_headers(), timeout=30) as http:
            created = http.post(
                CREATE, json={"collection": {"name": "docs", "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}}}
            )
            assert created.status_code == 200, created.text
            assert http.post(GET_COLLECTION, json={"name": "nope"}).status_code == 404
            assert http.post("/sluice.v1.NoService/Nothing", json={}).status_code == 404
        samples = scrape(metrics_port)
        total = "sluice_gateway_requests_total"
        assert samples[(total, (("code", "ok"), ("method", "DocumentService.CreateCollection")))] == 1
        assert samples[(total, (("code", "not_found"), ("method", "DocumentService.GetCollection")))] == 1
        assert samples[(total, (("code", "not_found"), ("method", "unknown")))] == 1  # no label per random path
        latency = ("sluice_gateway_request_latency_seconds_count", (("method", "DocumentService.CreateCollection"),))
        assert samples[latency] == 1
    finally:
        process.terminate()
        process.wait(30)
        log.close()
