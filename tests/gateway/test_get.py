"""Connect GET through sluice-gateway (issue 19; docs/http.md, "GET requests"): Search, marked
NO_SIDE_EFFECTS in its .proto, answers `GET /sluice.v1.SearchService/Search?encoding=…&message=…`
exactly as its POST does (JSON, percent-encoded or base64; binary protobuf), with the same key,
limits and errors; a method that writes refuses GET with 405. The other reads marked so are in
test_get_reads.py. Real HTTP requests to a real gateway in front of the real ingest-api and
search, and connect-es with `useHttpGet` (only a machine without `node` skips that one)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from search_server import RunningSearch

from gateway.conftest import RunningGateway, key_headers
from gateway.test_connect_clients import generated  # noqa: F401 (a fixture)
from gateway.test_gateway import SEARCH, TEXT, create_collection, upload, watch_until_done

ROOT = Path(__file__).resolve().parents[2]
NODE = shutil.which("node")


def ready_document(http: httpx.Client) -> dict:
    create_collection(http)
    document = upload(http, "docs", "leases.txt", TEXT).json()
    assert watch_until_done(http, document["id"])[-1] == "DOCUMENT_STATUS_READY"
    return document


def get_url(request: dict, *, encoding: str = "json", b64: bool = False, **extra: str) -> str:
    if encoding == "proto":
        from google.protobuf import json_format
        from sluice.v1 import search_service_pb2

        payload = json_format.ParseDict(request, search_service_pb2.SearchRequest()).SerializeToString()
    else:
        payload = json.dumps(request).encode()
    message = base64.urlsafe_b64encode(payload).decode().rstrip("=") if b64 else quote(payload.decode(), safe="")
    query = {"connect": "v1", "encoding": encoding, "message": message, **({"base64": "1"} if b64 else {}), **extra}
    return SEARCH + "?" + "&".join(f"{k}={v}" for k, v in query.items())


def test_search_by_get_answers_as_its_post_does(http):
    document = ready_document(http)
    request = {"collection": "docs", "query": "when do leases expire", "topK": 3}
    posted = http.post(SEARCH, json=request)
    assert posted.status_code == 200, posted.text
    for url in (get_url(request), get_url(request, b64=True)):
        answer = http.get(url)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/json"
        hits = answer.json()["hits"]
        assert [(h["documentId"], h.get("chunkIndex", 0)) for h in hits] == [
            (h["documentId"], h.get("chunkIndex", 0)) for h in posted.json()["hits"]
        ]
        assert hits[0]["documentId"] == document["id"] and "Leases expire" in hits[0]["text"]
        # Nothing caches it unless the operator says so; a cache that does keys it by the key too.
        assert answer.headers["cache-control"] == "no-store"
        assert answer.headers["vary"] == "Authorization, X-Sluice-Tenant"
    # Binary protobuf, as connect-es sends it with useBinaryFormat.
    answer = http.get(get_url(request, encoding="proto", b64=True))
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/proto"
    from sluice.v1 import search_service_pb2

    reply = search_service_pb2.SearchResponse.FromString(answer.content)
    assert [h.document_id for h in reply.hits][:1] == [document["id"]]
    # The standard base64 alphabet and its padding are accepted too.
    padded = base64.b64encode(json.dumps(request).encode()).decode()
    answer = http.get(SEARCH, params={"encoding": "json", "base64": "1", "message": padded})
    assert answer.status_code == 200, answer.text
    assert answer.json()["hits"][0]["documentId"] == document["id"]


def test_get_has_the_keys_and_errors_of_post(stack, http):
    create_collection(http)
    request = {"collection": "docs", "query": "anything"}
    # No key: the backend's 401, as for a POST.
    with httpx.Client(base_url=stack.url, timeout=30) as anonymous:
        answer = anonymous.get(get_url(request))
    assert answer.status_code == 401 and answer.json()["code"] == "unauthenticated"
    assert answer.headers["cache-control"] == "no-store"
    # A reader key may search, by GET too.
    assert http.get(get_url(request), headers=key_headers("reader")).status_code == 200
    # The backend's own errors: an unknown collection is 404 with its reason.
    answer = http.get(get_url({"collection": "nope", "query": "x"}))
    assert answer.status_code == 404 and answer.json()["reason"] == "COLLECTION_NOT_FOUND", answer.text
    assert answer.headers["cache-control"] == "no-store"
    # The gateway's: each says what to send instead, never a traceback.
    cases = [
        (SEARCH + "?message=%7B%7D", 400, "INVALID_ENCODING"),
        (SEARCH + "?encoding=xml&message=%7B%7D", 400, "INVALID_ENCODING"),
        (get_url(request, connect="v2"), 400, "UNSUPPORTED_PROTOCOL_VERSION"),
        (get_url(request, compression="gzip"), 501, "UNSUPPORTED_ENCODING"),
        (get_url(request, compression="AAA"), 400, "UNSUPPORTED_ENCODING"),  # not a compression at all
        (SEARCH + "?encoding=json&base64=1&message=%7B%7B", 400, "INVALID_BASE64"),
        (SEARCH + "?encoding=json&message=%7Bnot-json", 400, "INVALID_JSON"),
        (SEARCH + "?encoding=json&message=" + quote('{"topK": "many"}'), 400, "INVALID_JSON"),
        (SEARCH + "?encoding=proto&base64=1&message=_w", 400, "INVALID_BODY"),
    ]
    for url, status, reason in cases:
        answer = http.get(url)
        assert (answer.status_code, answer.json().get("reason")) == (status, reason), (url, answer.text)
        assert "Traceback" not in answer.text
    # A method with side effects (or a stream) refuses GET: 405 with Allow: POST, and no call is
    # made (tests/gateway/test_get_reads.py goes through every one).
    for path in ("/sluice.v1.DocumentService/DeleteCollection", "/sluice.v1.DocumentService/WatchCollection"):
        answer = http.get(path, params={"encoding": "json", "message": json.dumps({"name": "docs", "collection": "docs"})})
        assert answer.status_code == 405, answer.text
        assert answer.headers["allow"] == "POST" and answer.json()["reason"] == "GET_NOT_ALLOWED"
    assert http.post("/sluice.v1.DocumentService/GetCollection", json={"name": "docs"}).status_code == 200


def test_get_obeys_the_size_limit_and_the_rate_limit(ingest_api, database_url):
    search = RunningSearch(database_url, rate_limit_per_second=0.5, rate_limit_burst=3)
    gateway = RunningGateway(ingest_api.address, search.address, gateway_max_json_bytes=2000)
    try:
        with httpx.Client(base_url=gateway.url, headers=key_headers(), timeout=30) as http:
            create_collection(http)
            too_large = http.get(get_url({"collection": "docs", "query": "word " * 500}))
            assert too_large.status_code == 429 and too_large.json()["reason"] == "REQUEST_TOO_LARGE", too_large.text
            answers = [http.get(get_url({"collection": "docs", "query": "leases"})) for _ in range(5)]
        assert [a.status_code for a in answers[:3]] == [200, 200, 200]
        limited = answers[-1]
        assert limited.status_code == 429 and limited.json()["reason"] == "RATE_LIMITED", limited.text
        assert int(limited.headers["retry-after"]) >= 1
        assert limited.headers["cache-control"] == "no-store"
    finally:
        gateway.stop()
        search.stop()


def test_an_operator_may_let_caches_keep_search_answers(ingest_api, database_url):
    search = RunningSearch(database_url)
    gateway = RunningGateway(ingest_api.address, search.address, gateway_get_max_age_seconds=30)
    try:
        with httpx.Client(base_url=gateway.url, headers=key_headers(), timeout=60) as http:
            create_collection(http)
            answer = http.get(get_url({"collection": "docs", "query": "leases"}))
            assert answer.status_code == 200, answer.text
            assert answer.headers["cache-control"] == "max-age=30, s-maxage=30"
            assert answer.headers["vary"] == "Authorization, X-Sluice-Tenant"
            refused = http.get(get_url({"collection": "nope", "query": "leases"}))
            assert refused.status_code == 404 and refused.headers["cache-control"] == "no-store"
            # A POST is never cacheable, whatever the setting.
            assert "cache-control" not in http.post(SEARCH, json={"collection": "docs", "query": "x"}).headers
    finally:
        gateway.stop()
        search.stop()


SCRIPT = """
import { createClient } from "%(modules)s/@connectrpc/connect/dist/esm/index.js";
import { createConnectTransport } from "%(modules)s/@connectrpc/connect-node/dist/esm/index.js";
import { SearchService } from "%(gen)s/search_service_pb.js";
import { DocumentService } from "%(gen)s/document_service_pb.js";
import { EmbedderProvider } from "%(gen)s/collection_pb.js";

const [url, authorization, binary] = process.argv.slice(2);
const seen = [];
const transport = createConnectTransport({
  baseUrl: url, httpVersion: "1.1", useHttpGet: true, useBinaryFormat: binary === "binary",
  interceptors: [(next) => async (request) => {
    request.header.set("Authorization", authorization);
    const response = await next(request);
    // Only the gateway's answers to a GET carry Vary (Authorization, X-Sluice-Tenant).
    seen.push([request.method.name, response.header.get("vary")]);
    return response;
  }],
});
const search = await createClient(SearchService, transport).search({ collection: "docs", query: "leases expire", topK: 2 });
const documents = createClient(DocumentService, transport);
const collection = await documents.getCollection({ name: "docs" });
const created = await documents.createCollection({ collection: { name: "ts-get", embedder: { provider: EmbedderProvider.HASHING } } });
console.log(JSON.stringify({ hits: search.hits.map((h) => h.documentId), collection: collection.name, created: created.name, seen }));
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("encoding", ["json", "binary"])
def test_connect_es_sends_search_as_a_get(http, stack, generated, tmp_path, encoding):  # noqa: F811 (the fixture)
    document = ready_document(http)
    script = tmp_path / "get.mjs"
    modules = ROOT / "clients" / "typescript" / "node_modules"
    script.write_text(SCRIPT % {"modules": modules, "gen": generated})
    result = subprocess.run(
        [NODE, str(script), stack.url, key_headers()["Authorization"], encoding], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    assert out["hits"][0] == document["id"] and out["collection"] == "docs" and out["created"] == "ts-get"
    # Search and GetCollection went as GETs (useHttpGet and NO_SIDE_EFFECTS), CreateCollection (a
    # write, not marked) as a POST.
    vary = "Authorization, X-Sluice-Tenant"
    assert out["seen"] == [["Search", vary], ["GetCollection", vary], ["CreateCollection", None]]
    assert http.post("/sluice.v1.DocumentService/GetCollection", json={"name": "ts-get"}).status_code == 200
