"""AsyncClient, the asyncio flavour of the SDK, against the real services: the same surface,
the same typed results, errors and retries."""

from __future__ import annotations

import collections

import auth_keys
import grpc
import pytest
from sluice_client import AsyncClient, DocumentStatus, NotFound, RateLimited, WaitTimeout


@pytest.fixture
async def aclient(services):
    async with AsyncClient(services.ingest, search_address=services.search, api_key=auth_keys.KEYS["client"]) as client:
        yield client


async def test_upload_wait_search_list_in_asyncio(aclient, services, tmp_path):
    await aclient.collections.create("docs", embedder="hashing")
    assert await aclient.collections.create("docs", embedder="hashing", exist_ok=True)
    path = tmp_path / "leases.md"
    path.write_text("# Leases\n\nA lease expires when the worker stops renewing it.\n")
    doc = await aclient.documents.upload("docs", path)
    assert doc.status is DocumentStatus.PENDING
    states = [d.status async for d in aclient.documents.watch(doc.id, timeout=60)]
    assert states[-1] is DocumentStatus.READY
    assert (await aclient.documents.wait(doc.id)).chunk_count == 2
    hits = await aclient.search("docs", "how do leases expire", top_k=5)
    assert hits[0].filename == "leases.md" and hits[0].document_id == doc.id
    assert [d.id async for d in aclient.documents.list("docs", page_size=1)] == [doc.id]
    assert [c.name async for c in aclient.collections.list()] == ["docs"]
    with pytest.raises(NotFound) as missing:
        await aclient.collections.get("nope")
    assert missing.value.reason == "COLLECTION_NOT_FOUND"


async def test_folder_upload_and_wait_all_in_asyncio(aclient, services, tmp_path):
    await aclient.collections.create("docs", embedder="hashing")
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(12):
        (folder / f"doc{n:02}.txt").write_text(f"document number {n}")
    results = await aclient.documents.upload_folder("docs", folder, concurrency=3, timeout=120)
    assert [r.document.filename for r in results] == [f"doc{n:02}.txt" for n in range(12)]
    assert all(r.document.ready for r in results)
    services.worker.pause()
    late = await aclient.documents.upload("docs", b"waiting for a worker", filename="late.txt")
    with pytest.raises(WaitTimeout) as timed_out:
        await aclient.documents.wait_all([late], timeout=0.5)
    assert timed_out.value.documents[0].status is DocumentStatus.PENDING
    services.worker.resume()
    assert [d.status for d in await aclient.documents.wait_all([late], timeout=60)] == [DocumentStatus.READY]


async def test_asyncio_calls_honour_retry_info(ingest_api_factory, services):
    limited = ingest_api_factory(rate_limit_per_second=5, rate_limit_burst=2)
    async with AsyncClient(limited.address, api_key=auth_keys.KEYS["client"]) as client:
        await client.collections.create("docs", embedder="hashing")
        for _ in range(8):
            await client.collections.get("docs")
        assert client.settings.pacer.rate == pytest.approx(4.5)
    # With a deadline shorter than the wait the server names, the refusal reaches the caller.
    async with AsyncClient(limited.address, api_key=auth_keys.KEYS["client"], timeout=0.05) as hasty:
        with pytest.raises(RateLimited) as refused:
            for _ in range(5):
                await hasty.collections.get("docs")
    assert refused.value.retry_after > 0 and refused.value.metadata["limit_per_second"] == "5"


async def test_a_source_that_changes_while_sent_stores_nothing_in_asyncio(aclient, services):
    import io

    import psycopg
    from sluice_client import UploadSourceError

    await aclient.collections.create("docs", embedder="hashing")

    class Shifty(io.BytesIO):
        seeks = 0

        def seek(self, *args):
            Shifty.seeks += 1
            if Shifty.seeks == 1:
                self.write(b"XXXX")  # the bytes change between hashing and sending
            return super().seek(*args)

    with pytest.raises(UploadSourceError) as raised:
        await aclient.documents.upload("docs", Shifty(b"original content"), filename="shifty.txt")
    assert raised.value.reason == "SOURCE_CHANGED"
    with psycopg.connect(services.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM documents").fetchone()[0] == 0


def method_name(details) -> str:
    method = details.method
    return (method.decode() if isinstance(method, bytes) else method).rsplit("/", 1)[-1]


class CountUnary(grpc.aio.UnaryUnaryClientInterceptor):
    """Counts an AsyncClient's unary calls by method name (a real interceptor on the real channel;
    grpc.aio takes one kind of call per interceptor)."""

    def __init__(self, calls: collections.Counter[str]) -> None:
        self.calls = calls

    async def intercept_unary_unary(self, continuation, details, request):
        self.calls[method_name(details)] += 1
        return await continuation(details, request)


class CountStreams(grpc.aio.UnaryStreamClientInterceptor):
    def __init__(self, calls: collections.Counter[str]) -> None:
        self.calls = calls

    async def intercept_unary_stream(self, continuation, details, request):
        self.calls[method_name(details)] += 1
        return await continuation(details, request)


async def test_wait_all_in_asyncio_reads_once_what_finished_before_its_watches_opened(services, monkeypatch):
    """tests/clients/test_sdk.py's test for AsyncClient: stale PENDING answers of READY documents in
    two collections come back READY after one GetDocument each once the watches are open (no wait
    for the 60 s quiet relist), or one listing per collection past REFRESH_BY_GET."""
    from sluice_client.aio import AsyncDocumentTracker

    calls: collections.Counter[str] = collections.Counter()
    async with AsyncClient(
        services.ingest,
        search_address=services.search,
        api_key=auth_keys.KEYS["client"],
        interceptors=[CountUnary(calls), CountStreams(calls)],
    ) as aclient:
        await aclient.collections.create("docs", embedder="hashing")
        await aclient.collections.create("more", embedder="hashing")
        uploaded = [
            await aclient.documents.upload("docs", f"document {n}".encode(), filename=f"d{n}.txt", source_uri=f"guide/d{n}.txt")
            for n in range(3)
        ]
        uploaded.append(await aclient.documents.upload("more", b"another document", filename="m.txt"))
        for document in uploaded:
            assert (await aclient.documents.wait(document.id, timeout=60)).ready
        assert all(d.status is DocumentStatus.PENDING for d in uploaded)
        calls.clear()
        final = await aclient.documents.wait_all([uploaded[0].id, *uploaded[1:]], timeout=120)
        assert [d.id for d in final] == [d.id for d in uploaded] and all(d.ready for d in final)
        assert (calls["GetDocument"], calls["WatchCollection"], calls["ListDocuments"]) == (4, 2, 0)
        assert [d.source_uri for d in final[:3]] == ["guide/d0.txt", "guide/d1.txt", "guide/d2.txt"]
        assert all(d.content_sha256 == u.content_sha256 for d, u in zip(final, uploaded))

        monkeypatch.setattr(AsyncDocumentTracker, "REFRESH_BY_GET", 0)
        calls.clear()
        assert all(d.ready for d in await aclient.documents.wait_all(uploaded, timeout=120))
        assert (calls["GetDocument"], calls["ListDocuments"]) == (0, 2)
