"""GET /v1/collections/{collection}/bundle (docs/http.md, "Exporting a collection"): a collection's
bundle streamed through the gateway from ExportCollection, with the caller's key; errors as JSON
like every other call's; an import over HTTP is 501 pointing at the CLI and the SDKs."""

from __future__ import annotations

import io
import json
import tarfile

import httpx

from .test_download import create_collection, upload


def test_export_streams_a_bundle_as_a_tar(http, stack):
    create_collection(http)
    for i in range(3):
        upload(http, f"note-{i}.txt", f"note {i} about leases and workers\n".encode() * 300, "text/plain")
    with http.stream("GET", "/v1/collections/docs/bundle") as response:
        assert response.status_code == 200, response.read()
        data = b"".join(response.iter_bytes())
        headers = response.headers
    assert headers["content-type"] == "application/x-tar"
    assert headers["content-disposition"].startswith('attachment; filename="docs.bundle"')
    assert headers["x-sluice-bundle-format-version"] == "1" and headers["x-sluice-bundle-documents"] == "3"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("manifest.json").read())
    assert names[0] == "manifest.json" and "chunks.parquet" in names
    assert len([n for n in names if n.startswith("originals/")]) == 3
    assert manifest["collection"]["name"] == "docs" and manifest["counts"]["documents"] == 3
    head = http.head("/v1/collections/docs/bundle")
    assert head.status_code == 200 and head.content == b"" and head.headers["x-sluice-bundle-documents"] == "3"


def test_export_refusals_are_json(http, stack):
    missing = http.get("/v1/collections/nope/bundle")
    assert missing.status_code == 404 and missing.json()["reason"] == "COLLECTION_NOT_FOUND"
    with httpx.Client(base_url=stack.url, timeout=30) as anonymous:
        unauthenticated = anonymous.get("/v1/collections/docs/bundle")
    assert unauthenticated.status_code == 401, unauthenticated.text
    refused = http.post("/v1/collections/docs/bundle", content=b"x" * 1024, headers={"Content-Type": "application/x-tar"})
    assert refused.status_code == 501 and refused.json()["reason"] == "USE_CLI_OR_SDK"
    assert "sluice collections import" in refused.json()["message"]
