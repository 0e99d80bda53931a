"""The SDKs' export_collection / import_collection (docs/bundles.md) against the real ingest-api:
a path or a binary file object, both ways, sync and asyncio; the bytes checked against the
trailer; a path written only once checked; nothing left by a refused call."""

from __future__ import annotations

import hashlib
import io

import auth_keys
import pytest
from sluice_client import AlreadyExists, AsyncClient, ExportedBundle, InvalidArgument, NotFound


def ready_collection(client, tmp_path) -> str:
    client.collections.create("docs", embedder="hashing")
    path = tmp_path / "leases.md"
    path.write_text("# Leases\n\nA lease expires when the worker stops renewing it.\n")
    doc = client.documents.upload("docs", path)
    client.documents.wait(doc.id, timeout=60)
    return doc.id


def keyword(client, name: str) -> list[tuple[str, float]]:
    return [(h.text, round(h.score, 5)) for h in client.search(name, "renewing lease", mode="keyword")]


def test_sync_export_and_import_by_path_and_file_object(client, services, tmp_path):
    ready_collection(client, tmp_path)
    path = tmp_path / "docs.bundle"
    exported = client.collections.export_collection("docs", path)
    assert isinstance(exported, ExportedBundle) and exported.path == path
    assert (exported.collection, exported.document_count, exported.chunk_count) == ("docs", 1, 2)
    data = path.read_bytes()
    assert exported.size_bytes == len(data) and exported.sha256 == hashlib.sha256(data).hexdigest()

    buffer = io.BytesIO()
    again = client.collections.export_collection("docs", buffer)
    assert again.path is None and again.size_bytes == len(buffer.getvalue())

    by_path = client.collections.import_collection(path, "docs-a")
    assert by_path.name == "docs-a" and by_path.document_count == 1
    buffer.seek(0)
    by_file = client.collections.import_collection(buffer, "docs-b")
    assert by_file.name == "docs-b"
    assert keyword(client, "docs-a") == keyword(client, "docs-b") == keyword(client, "docs")

    with pytest.raises(AlreadyExists):
        client.collections.import_collection(path, "docs-a")
    with pytest.raises(NotFound):
        client.collections.export_collection("nope", tmp_path / "nope.bundle")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.bundle", "leases.md"]  # no .part left
    damaged = bytearray(data)
    damaged[len(damaged) // 2] ^= 0xFF
    with pytest.raises(InvalidArgument) as refused:
        client.collections.import_collection(io.BytesIO(bytes(damaged)), "docs-c")
    assert refused.value.reason == "BUNDLE_INVALID"
    assert "docs-c" not in [c.name for c in client.collections.list()]


async def test_asyncio_export_and_import(client, services, tmp_path):
    ready_collection(client, tmp_path)
    async with AsyncClient(services.ingest, search_address=services.search, api_key=auth_keys.KEYS["client"]) as aclient:
        path = tmp_path / "docs.bundle"
        exported = await aclient.collections.export_collection("docs", path)
        assert exported.path == path and exported.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        buffer = io.BytesIO()
        await aclient.collections.export_collection("docs", buffer)
        buffer.seek(0)
        imported = await aclient.collections.import_collection(buffer, "docs-async", reembed=False)
        assert imported.name == "docs-async" and imported.document_count == 1
        with pytest.raises(NotFound):
            await aclient.collections.export_collection("nope", tmp_path / "nope.bundle")
    assert keyword(client, "docs-async") == keyword(client, "docs")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.bundle", "leases.md"]
