"""Through the gateway, the backends' rules hold unchanged: the per-key rate limit answers 429
with Retry-After from its RetryInfo, and an upload whose client vanished mid-body stores nothing
(no trailer is sent without the whole body; docs/http.md#uploads)."""

from __future__ import annotations

import hashlib
import socket

import httpx
from helpers import free_port, wait_for

from gateway.conftest import RunningGateway, key_headers


def refused_incomplete() -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("sluice_uploads_refused_total", {"reason": "UPLOAD_INCOMPLETE"}) or 0.0


def test_the_rate_limit_is_the_keys_and_says_when_to_retry(ingest_api_factory):
    ingest = ingest_api_factory(rate_limit_per_second=0.5, rate_limit_burst=3)
    gateway = RunningGateway(ingest.address, f"127.0.0.1:{free_port()}")
    try:
        with httpx.Client(base_url=gateway.url, headers=key_headers(), timeout=30) as http:
            answers = [http.post("/sluice.v1.DocumentService/ListCollections", json={}) for _ in range(5)]
        assert [a.status_code for a in answers[:3]] == [200, 200, 200]
        limited = answers[-1]
        assert limited.status_code == 429, limited.text
        assert limited.json()["code"] == "resource_exhausted" and limited.json()["reason"] == "RATE_LIMITED"
        assert int(limited.headers["retry-after"]) >= 1
        assert any(d["type"] == "google.rpc.RetryInfo" for d in limited.json()["details"])
    finally:
        gateway.stop()


def test_an_upload_cut_off_mid_body_stores_nothing(stack, http):
    response = http.post(
        "/sluice.v1.DocumentService/CreateCollection",
        json={"collection": {"name": "docs", "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}}},
    )
    assert response.status_code == 200
    content = b"a file that arrives whole only the second time\n" * 2000
    host, port = stack.url.removeprefix("http://").split(":")
    incomplete_before = refused_incomplete()
    with socket.create_connection((host, int(port))) as sock:
        # Chunked, so that no length was announced: only the missing trailer can keep it out.
        head = (
            f"POST /v1/collections/docs/documents?filename=cut.txt&request_id=cut-1 HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: {key_headers()['Authorization']}\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        sock.sendall(head.encode() + b"3e8\r\n" + content[:1000] + b"\r\n")
    # ingest-api saw the stream end without its trailer (ingest-api runs in this process).
    wait_for(
        lambda: refused_incomplete() > incomplete_before, 30, what="ingest-api to refuse the cut upload as UPLOAD_INCOMPLETE"
    )
    # Had the first 1,000 bytes been stored under request_id cut-1, the whole file with the same
    # request_id would be refused (REQUEST_ID_REUSED); it is a new document of the whole size.
    whole = http.post("/v1/collections/docs/documents", params={"filename": "cut.txt", "request_id": "cut-1"}, content=content)
    assert whole.status_code == 200, whole.text
    assert whole.json()["sizeBytes"] == str(len(content))
    assert whole.json()["contentSha256"] == hashlib.sha256(content).hexdigest()
    listed = http.post("/sluice.v1.DocumentService/ListDocuments", json={"collection": "docs"}).json()["documents"]
    assert [d["id"] for d in listed] == [whole.json()["id"]]
