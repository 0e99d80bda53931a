"""GET /v1/documents/{id}/content (docs/http.md, "Downloading a document"): the original bytes,
streamed through the gateway from ingest-api's DownloadDocument, always as a sandboxed
attachment; errors as JSON like every other call's."""

from __future__ import annotations

import hashlib
from urllib.parse import quote

import httpx

from gateway.conftest import key_headers

CREATE = "/sluice.v1.DocumentService/CreateCollection"
SAFETY = {
    "x-content-type-options": "nosniff",
    "content-security-policy": "sandbox; default-src 'none'",
    "cache-control": "private, no-store",
}


def create_collection(http: httpx.Client, name: str = "docs") -> None:
    response = http.post(CREATE, json={"collection": {"name": name, "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}}})
    assert response.status_code == 200, response.text


def upload(http: httpx.Client, filename: str, content: bytes, media_type: str) -> dict:
    response = http.post(
        "/v1/collections/docs/documents", params={"filename": filename}, content=content, headers={"Content-Type": media_type}
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_download_streams_the_uploaded_bytes_with_the_safety_headers(http):
    create_collection(http)
    content = bytes(range(256)) * 9_000  # 2.3 MB: several pieces of the gRPC stream
    document = upload(http, "report é 1.pdf", content, "application/pdf")
    with http.stream("GET", f"/v1/documents/{document['id']}/content") as response:
        assert response.status_code == 200
        data = b"".join(response.iter_bytes())
        headers = response.headers
    digest = hashlib.sha256(content).hexdigest()
    assert data == content and digest == document["contentSha256"]
    assert headers["content-type"] == "application/pdf"
    assert headers["content-length"] == str(len(content))
    assert headers["etag"] == f'"{digest}"' and headers["x-content-sha256"] == digest
    assert headers["content-disposition"] == "attachment; filename=\"report _ 1.pdf\"; filename*=UTF-8''" + quote(
        "report é 1.pdf", safe=""
    )
    assert {name: headers[name] for name in SAFETY} == SAFETY
    head = http.head(f"/v1/documents/{document['id']}/content")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(content)) and head.headers["etag"] == f'"{digest}"'


def test_a_hostile_html_original_is_a_sandboxed_attachment(http):
    create_collection(http)
    page = b"<html><body><script>fetch('/sluice.v1.DocumentService/ListCollections')</script></body></html>"
    document = upload(http, "evil.html", page, "text/html")
    response = http.get(f"/v1/documents/{document['id']}/content")
    assert response.status_code == 200 and response.content == page
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-disposition"].startswith("attachment;")
    assert {name: response.headers[name] for name in SAFETY} == SAFETY


def test_download_errors_are_json_like_the_other_calls(stack, http):
    create_collection(http)
    document = upload(http, "a.txt", b"some words", "text/plain")
    missing = http.get("/v1/documents/0b6c0e9a-1c8b-4d7e-9a59-3f1f2f0a9e11/content")
    assert missing.status_code == 404
    assert missing.json()["code"] == "not_found" and missing.json()["reason"] == "DOCUMENT_NOT_FOUND"
    bad = http.get("/v1/documents/not-an-id/content")
    assert bad.status_code == 400 and bad.json()["reason"] == "INVALID_ID"
    with httpx.Client(base_url=stack.url) as anonymous:
        no_key = anonymous.get(f"/v1/documents/{document['id']}/content")
    assert no_key.status_code == 401 and no_key.json()["reason"] == "API_KEY_MISSING"
    reader = http.get(f"/v1/documents/{document['id']}/content", headers=key_headers("reader"))
    assert reader.status_code == 200 and reader.content == b"some words"
