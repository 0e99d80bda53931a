"""sluice-gateway end to end: curl-like HTTP/1.1 requests (httpx over a real socket) through the
gateway to the real ingest-api and search (docs/http.md)."""

from __future__ import annotations

import hashlib
import json

import httpx

from gateway.conftest import key_headers

SEARCH = "/sluice.v1.SearchService/Search"
CREATE = "/sluice.v1.DocumentService/CreateCollection"
GET_COLLECTION = "/sluice.v1.DocumentService/GetCollection"
LIST_DOCUMENTS = "/sluice.v1.DocumentService/ListDocuments"
WATCH_DOCUMENT = "/sluice.v1.DocumentService/WatchDocument"
WATCH_COLLECTION = "/sluice.v1.DocumentService/WatchCollection"

TEXT = b"Leases expire when a worker stops renewing them.\n\nAnother paragraph about rate limits and retries.\n"


def events(response: httpx.Response):
    """(event, id, data) of each server-sent event, as they arrive."""
    event, event_id, data = "message", "", []
    for line in response.iter_lines():
        if line == "":
            if data:
                yield event, event_id, json.loads("\n".join(data))
            event, event_id, data = "message", "", []
        elif line.startswith("event:"):
            event = line.removeprefix("event:").strip()
        elif line.startswith("id:"):
            event_id = line.removeprefix("id:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").strip())


def create_collection(http: httpx.Client, name: str = "docs") -> dict:
    response = http.post(CREATE, json={"collection": {"name": name, "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}}})
    assert response.status_code == 200, response.text
    return response.json()


def upload(http: httpx.Client, collection: str, filename: str, content: bytes, **params) -> httpx.Response:
    return http.post(
        f"/v1/collections/{collection}/documents",
        params={"filename": filename, **params},
        content=content,
        headers={"Content-Type": "text/plain"},
    )


def watch_until_done(http: httpx.Client, document_id: str) -> list[dict]:
    seen = []
    with http.stream("POST", WATCH_DOCUMENT, json={"id": document_id}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for event, _, data in events(response):
            if event == "end":
                break
            assert event == "message", data
            seen.append(data["document"]["status"])
    return seen


def test_create_upload_watch_to_ready_and_search(http):
    collection = create_collection(http)
    assert collection["name"] == "docs"
    assert collection["embedder"]["provider"] == "EMBEDDER_PROVIDER_HASHING"

    response = upload(http, "docs", "leases.txt", TEXT, sha256=hashlib.sha256(TEXT).hexdigest(), **{"metadata.team": "core"})
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["filename"] == "leases.txt"
    assert document["contentSha256"] == hashlib.sha256(TEXT).hexdigest()
    assert document["sizeBytes"] == str(len(TEXT))  # int64 in the protobuf JSON mapping: a string
    assert document["metadata"] == {"team": "core"}

    statuses = watch_until_done(http, document["id"])
    assert statuses[-1] == "DOCUMENT_STATUS_READY", statuses

    response = http.post(SEARCH, json={"collection": "docs", "query": "when do leases expire", "topK": 3})
    assert response.status_code == 200, response.text
    hits = response.json()["hits"]
    assert hits and hits[0]["filename"] == "leases.txt"
    assert "backend;dur=" in response.headers["server-timing"]
    assert "Leases expire" in hits[0]["text"]
    # The proto field names are accepted too (protobuf JSON parsing), and enums by name.
    response = http.post(SEARCH, json={"collection": "docs", "query": "rate limits", "top_k": 1, "mode": "SEARCH_MODE_KEYWORD"})
    assert response.status_code == 200, response.text
    assert response.json()["mode"] == "SEARCH_MODE_KEYWORD"
    assert len(response.json()["hits"]) == 1


def test_upload_streamed_in_pieces_without_a_length_is_stored_whole(http):
    create_collection(http)
    pieces = [(f"line {n} of a long file about leases\n" * 200).encode() for n in range(40)]
    content = b"".join(pieces)
    response = http.post("/v1/collections/docs/documents", params={"filename": "long.txt"}, content=iter(pieces))
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["sizeBytes"] == str(len(content))
    assert document["contentSha256"] == hashlib.sha256(content).hexdigest()
    # The same bytes again: the server deduplicates, the same document comes back.
    again = http.post("/v1/collections/docs/documents", params={"filename": "copy.txt"}, content=content)
    assert again.json()["id"] == document["id"]


def test_upload_with_a_wrong_sha256_is_refused_and_stores_nothing(http):
    create_collection(http)
    response = upload(http, "docs", "a.txt", TEXT, sha256="0" * 64)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["code"] == "invalid_argument"
    assert error["reason"] == "CHECKSUM_MISMATCH"
    listed = http.post(LIST_DOCUMENTS, json={"collection": "docs"}).json()
    assert listed.get("documents", []) == []
    bad = upload(http, "docs", "a.txt", TEXT, sha256="not-hex")
    assert bad.status_code == 400 and bad.json()["reason"] == "INVALID_CHECKSUM"
    nameless = http.post("/v1/collections/docs/documents", content=TEXT)
    assert nameless.status_code == 400 and nameless.json()["reason"] == "FILENAME_MISSING"


def test_errors_are_connect_errors_with_their_http_status(stack, http):
    missing = http.post(GET_COLLECTION, json={"name": "nope"})
    assert missing.status_code == 404
    body = missing.json()
    assert body["code"] == "not_found"
    assert body["reason"] == "COLLECTION_NOT_FOUND"
    assert "nope" in body["message"]
    assert body["details"][0]["type"] == "google.rpc.ErrorInfo"
    assert body["details"][0]["debug"]["reason"] == "COLLECTION_NOT_FOUND"

    bad_json = http.post(SEARCH, content=b"{not json", headers={"Content-Type": "application/json"})
    assert bad_json.status_code == 400
    assert bad_json.json()["code"] == "invalid_argument" and bad_json.json()["reason"] == "INVALID_JSON"
    unknown_field = http.post(SEARCH, json={"collection": "docs", "nonsense": 1})
    assert unknown_field.status_code == 400 and unknown_field.json()["reason"] == "INVALID_JSON"

    with httpx.Client(base_url=stack.url) as anonymous:
        no_key = anonymous.post(SEARCH, json={"collection": "docs", "query": "x"})
        assert no_key.status_code == 401
        assert no_key.json()["code"] == "unauthenticated"
        assert no_key.json()["reason"] == "API_KEY_MISSING"
        upload_no_key = anonymous.post("/v1/collections/docs/documents", params={"filename": "a.txt"}, content=TEXT)
        assert upload_no_key.status_code == 401

    # A reader key may search but not create: the backend's roles, unchanged through the gateway.
    reader = http.post(CREATE, json={"collection": {"name": "r"}}, headers=key_headers("reader"))
    assert reader.status_code == 403 and reader.json()["code"] == "permission_denied"

    no_method = http.post("/sluice.v1.DocumentService/Nope", json={})
    assert no_method.status_code == 404 and no_method.json()["reason"] == "METHOD_NOT_FOUND"
    stream_path = http.post("/sluice.v1.DocumentService/UploadDocument", json={})
    assert stream_path.status_code == 501 and stream_path.json()["reason"] == "USE_UPLOAD_PATH"

    watch_missing = http.post(WATCH_DOCUMENT, json={"id": "00000000-0000-0000-0000-000000000000"})
    assert watch_missing.status_code == 404 and watch_missing.json()["code"] == "not_found"


def test_uploads_refused_before_they_are_read_keep_their_status(stack, http):
    """ingest-api refuses an upload without a key before reading its body; grpc's asyncio client
    could then report its own INTERNAL ("Internal error from Core", grpc/grpc#36066) instead of
    UNAUTHENTICATED, about once in 25 uploads here. The gateway sends a small body again when that
    happens (nothing was stored), so every one of these gets its 401; and an unknown collection its
    404."""
    seen: dict[int, int] = {}
    with httpx.Client(base_url=stack.url) as anonymous:
        for _ in range(150):
            refused = anonymous.post("/v1/collections/docs/documents", params={"filename": "a.txt"}, content=TEXT)
            seen[refused.status_code] = seen.get(refused.status_code, 0) + 1
            assert refused.status_code != 401 or refused.json()["reason"] == "API_KEY_MISSING"
    assert seen == {401: 150}, seen
    for _ in range(50):
        missing = http.post("/v1/collections/nope/documents", params={"filename": "a.txt"}, content=TEXT)
        assert missing.status_code == 404, missing.text


def test_watch_collection_sends_cursors_as_event_ids_and_resumes_from_last_event_id(stack, http):
    create_collection(http)
    stack.worker.pause()
    first = upload(http, "docs", "one.txt", b"first document about leases\n").json()
    cursor = ""
    with http.stream("POST", WATCH_COLLECTION, json={"collection": "docs", "startFromOldest": True}) as response:
        assert response.status_code == 200
        for event, event_id, data in events(response):
            assert event == "message"
            if data.get("document", {}).get("id") == first["id"]:
                assert event_id == data["cursor"]
                cursor = event_id
                break
    assert cursor
    second = upload(http, "docs", "two.txt", b"second document about retries\n").json()
    with http.stream("POST", WATCH_COLLECTION, json={"collection": "docs"}, headers={"Last-Event-ID": cursor}) as response:
        for _event, _, data in events(response):
            if data.get("type") == "COLLECTION_EVENT_TYPE_HEARTBEAT":
                continue
            assert data["document"]["id"] == second["id"], data  # resumed after the first, nothing twice
            break
    stack.worker.resume()


def test_proto_bodies_work_too(http):
    from sluice.v1 import collection_pb2, document_service_pb2

    request = document_service_pb2.CreateCollectionRequest(
        collection=collection_pb2.Collection(
            name="binary", embedder=collection_pb2.EmbedderConfig(provider=collection_pb2.EMBEDDER_PROVIDER_HASHING)
        )
    )
    response = http.post(CREATE, content=request.SerializeToString(), headers={"Content-Type": "application/proto"})
    assert response.status_code == 200
    assert collection_pb2.Collection.FromString(response.content).name == "binary"


def test_healthz_reports_both_backends(http):
    response = http.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "SERVING", "backends": {"ingest": "SERVING", "search": "SERVING"}}


def test_browsers_of_the_allowed_origins_only_may_call_it(stack, http):
    from gateway.conftest import RunningGateway

    preflight = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    # By default no origin is allowed: a browser page elsewhere cannot read the answers.
    assert (
        "access-control-allow-origin"
        not in http.post(GET_COLLECTION, json={"name": "x"}, headers={"Origin": "https://app.example"}).headers
    )
    gateway = RunningGateway(stack.ingest, stack.search, gateway_cors_origins="https://app.example")
    try:
        with httpx.Client(base_url=gateway.url, timeout=30) as browser:
            allowed = browser.options(SEARCH, headers=preflight)
            assert allowed.status_code == 200
            assert allowed.headers["access-control-allow-origin"] == "https://app.example"
            assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
            answer = browser.post(GET_COLLECTION, json={"name": "x"}, headers={**key_headers(), "Origin": "https://app.example"})
            assert answer.status_code == 404 and answer.headers["access-control-allow-origin"] == "https://app.example"
            other = browser.options(SEARCH, headers={**preflight, "Origin": "https://evil.example"})
            assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    finally:
        gateway.stop()


def test_sources_are_managed_over_http_too(stack, http):
    """SourceService (docs/sources.md) is served like the others: its errors with their reasons."""
    create_collection(http)
    listed = http.post("/sluice.v1.SourceService/ListSources", json={"collection": "docs"})
    assert listed.status_code == 200 and listed.json() == {}, listed.text
    refused = http.post(
        "/sluice.v1.SourceService/CreateSource", json={"source": {"collection": "docs", "localFolder": {"path": "/etc"}}}
    )
    assert refused.status_code == 400 and refused.json()["reason"] == "SOURCE_NOT_ALLOWED", refused.text
    assert "local folders are disabled on this server" in refused.json()["message"]
    missing = http.post("/sluice.v1.SourceService/GetSource", json={"name": "00000000-0000-0000-0000-000000000000"})
    assert missing.status_code == 404 and missing.json()["reason"] == "SOURCE_NOT_FOUND", missing.text
    # A reader key may read sources, not create them.
    reader = http.post(
        "/sluice.v1.SourceService/CreateSource",
        headers=key_headers("reader"),
        json={"source": {"collection": "docs", "git": {"repository": "https://example.com/r.git"}}},
    )
    assert reader.status_code == 403, reader.text


def test_a_form_encoded_upload_gets_its_real_media_type(http):
    """curl --data-binary sends Content-Type application/x-www-form-urlencoded unless told
    otherwise (docs/http.md's example): that is the body's encoding, not the file's type, so the
    type is detected as for octet-stream (issue 37, defect 3). A filter on the real type finds it."""
    create_collection(http)
    markdown = b"# Leases\n\nA lease expires when its worker stops renewing it.\n"
    response = http.post(
        "/v1/collections/docs/documents",
        params={"filename": "leases.md"},
        content=markdown,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["mimeType"] == "text/markdown"
    assert watch_until_done(http, response.json()["id"])[-1] == "DOCUMENT_STATUS_READY"
    found = http.post(SEARCH, json={"collection": "docs", "query": "lease", "filter": {"mimeTypes": ["text/markdown"]}})
    assert [hit["filename"] for hit in found.json()["hits"]][:1] == ["leases.md"], found.text
    # A type the client states is kept as given.
    typed = http.post(
        "/v1/collections/docs/documents",
        params={"filename": "notes.txt"},
        content=b"plain words",
        headers={"Content-Type": "text/plain"},
    )
    assert typed.json()["mimeType"] == "text/plain"
