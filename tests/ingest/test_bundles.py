"""ExportCollection and ImportCollection (docs/bundles.md): a real
collection, built from the fixture documents by a real worker, moved under another name and into
another tenant, answers the same searches; a bundle that does not match, was damaged or was cut
off is refused and leaves nothing behind."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import random
import tarfile
from pathlib import Path

import auth_keys
import grpc
import psycopg
import pytest
from helpers import wait_for_async
from sluice.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    collection_pb2,
    document_pb2,
    document_service_pb2_grpc,
    search_service_pb2,
    search_service_pb2_grpc,
)
from sluice.v1 import document_service_pb2 as ds
from sluice_common.channels import keyed_aio_channel
from sluice_common.errors import reason_of
from sluice_ingest.check import run_checks
from worker.e2e import InProcessWorker, worker_settings

D = document_pb2
DOCUMENTS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
HASHING = collection_pb2.EMBEDDER_PROVIDER_HASHING
FILES = ["operations.md", "retrieval.html", "handbook.docx", "chinese.md", "minutes-latin1.txt", "status.eml"]
QUERIES = [
    "upload size limits attempts",
    "retrieval passages answer a question",
    "向量 数据库",
    "weekly ingestion status",
    "lease expiry",
]
MODES = [search_service_pb2.SEARCH_MODE_VECTOR, search_service_pb2.SEARCH_MODE_KEYWORD, search_service_pb2.SEARCH_MODE_HYBRID]
PIECE = 64 * 1024
# What an import writes, counted to show that one which failed wrote nothing.
TABLES = [
    "collections", "collection_generations", "documents", "document_contents", "ingestion_jobs", "document_versions",
    "chunks", "disabled_chunks", "keyword_chunks", "document_vectors",
]  # fmt: skip


@pytest.fixture(scope="module")
def sandbox_pool():
    from sluice_worker.parsing.sandbox import SandboxPool

    pool = SandboxPool(1, memory_limit_mb=2048, max_documents=100)
    yield pool
    for box in pool._idle:
        box.close()


@pytest.fixture
def ingest_api(ingest_api_factory):
    # Parsing the fixtures in this process holds the GIL for seconds: a lease longer than the suite's 5 s.
    return ingest_api_factory(lease_seconds=60.0)


class Api:
    def __init__(self, address: str, key: str | None = None) -> None:
        self.channel = auth_keys.aio_channel(address) if key is None else keyed_aio_channel(address, key)
        self.docs = document_service_pb2_grpc.DocumentServiceStub(self.channel)

    async def upload(self, collection: str, filename: str, content: bytes, source_uri: str = "") -> D.Document:
        async def messages():
            meta = ds.UploadDocumentMetadata(
                collection=collection, filename=filename, source_uri=source_uri, metadata={"k": filename}
            )
            yield ds.UploadDocumentRequest(metadata=meta)
            yield ds.UploadDocumentRequest(data=content)
            yield ds.UploadDocumentRequest(trailer=ds.UploadDocumentTrailer(size_bytes=len(content)))

        return await self.docs.UploadDocument(messages())

    async def export(self, name: str) -> tuple[ds.ExportCollectionHeader, bytes]:
        header, data, trailer = None, bytearray(), None
        async for message in self.docs.ExportCollection(ds.ExportCollectionRequest(name=name)):
            kind = message.WhichOneof("payload")
            if kind == "header":
                header = message.header
            elif kind == "data":
                data += message.data
            else:
                trailer = message.trailer
        assert trailer is not None and trailer.size_bytes == len(data)
        assert trailer.sha256 == hashlib.sha256(data).hexdigest()
        return header, bytes(data)

    def import_call(self, bundle: bytes, name: str, *, stop_at: int | None = None, **options):
        async def messages():
            yield ds.ImportCollectionRequest(options=ds.ImportCollectionOptions(name=name, **options))
            end = len(bundle) if stop_at is None else stop_at
            for start in range(0, end, PIECE):
                yield ds.ImportCollectionRequest(data=bundle[start : min(start + PIECE, end)])
            if stop_at is None:
                trailer = ds.ImportCollectionTrailer(size_bytes=len(bundle), sha256=hashlib.sha256(bundle).hexdigest())
                yield ds.ImportCollectionRequest(trailer=trailer)
            else:
                await asyncio.sleep(3600)  # the client hangs there until it is cut off

        return self.docs.ImportCollection(messages())

    async def chunks(self, document_id: str) -> list[ds.DocumentChunk]:
        return list((await self.docs.ListChunks(ds.ListChunksRequest(document_id=document_id, page_size=1000))).chunks)

    async def documents(self, collection: str) -> list[D.Document]:
        return list((await self.docs.ListDocuments(ds.ListDocumentsRequest(collection=collection, page_size=1000))).documents)


def counts(database_url: str) -> dict[str, int]:
    with psycopg.connect(database_url) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


async def top10(search, collection: str, metadata=None) -> dict:
    answers = {}
    for query in QUERIES:
        for mode in MODES:
            request = search_service_pb2.SearchRequest(collection=collection, query=query, top_k=10, mode=mode)
            response = await search.Search(request, metadata=metadata)
            answers[query, mode] = _tie_blind([(h.filename, h.chunk_index, h.text, round(h.score, 5)) for h in response.hits])
    return answers


def _tie_blind(hits: list[tuple]) -> tuple:
    """An answer as two deployments must agree on it: the scores in order, and the hits of every
    score above the last, in any order among equal scores (the hashing embedder scores many chunks
    0.0; which of them fill the last places is arbitrary in any deployment)."""
    last = hits[-1][3] if hits else None
    return tuple(h[3] for h in hits), sorted(h for h in hits if h[3] != last)


@pytest.fixture
async def library(ingest_api, sandbox_pool, database_url):
    """A collection of the fixture documents, READY through a real worker, with a source in two
    versions, one chunk disabled, one edited and an eval set; and its bundle."""
    api = Api(ingest_api.address)
    collection = collection_pb2.Collection(
        name="library",
        embedder=collection_pb2.EmbedderConfig(provider=HASHING, model="hashing-v1", dimensions=64),
        chunking=collection_pb2.ChunkingConfig(max_characters=300, new_after_n_chars=250),
    )
    await api.docs.CreateCollection(ds.CreateCollectionRequest(collection=collection))
    uploaded = [await api.upload("library", name, (DOCUMENTS / name).read_bytes()) for name in FILES]
    async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool):
        for document in uploaded:
            await wait_for_async(lambda d=document: _ready(api, d.id), timeout=180, what=f"{document.filename} READY")
        # A source in two versions: the second replaces the first at its commit.
        first = await api.upload(
            "library", "notes.txt", b"Version one of the notes about leases.", source_uri="file:///notes.txt"
        )
        await wait_for_async(lambda: _ready(api, first.id), timeout=120, what="version 1 READY")
        second = await api.upload(
            "library", "notes.txt", b"Version two of the notes: leases expire, workers retry.", source_uri="file:///notes.txt"
        )
        await wait_for_async(lambda: _ready(api, second.id), timeout=120, what="version 2 READY")
    chunks = await api.chunks(uploaded[0].id)
    await api.docs.UpdateChunk(ds.UpdateChunkRequest(chunk_id=chunks[0].id, enabled=False))
    await api.docs.UpdateChunk(ds.UpdateChunkRequest(chunk_id=chunks[1].id, text="An edited chunk about lease expiry."))
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "UPDATE collection_generations SET eval_set = %s::jsonb, eval_min_ratio = 0.9 WHERE state = 'ACTIVE'",
            (f'[{{"id": "q1", "query": "leases", "relevant": ["{uploaded[0].id}", "operations.md"]}}]',),
        )
    header, bundle = await api.export("library")
    yield api, uploaded, header, bundle
    await api.channel.close()


async def _ready(api: Api, document_id: str) -> bool:
    document = await api.docs.GetDocument(ds.GetDocumentRequest(id=document_id))
    assert document.status != D.DOCUMENT_STATUS_FAILED, document.error_message
    return document.status == D.DOCUMENT_STATUS_READY


@pytest.fixture
def search(database_url):
    from search_server import RunningSearch

    server = RunningSearch(database_url)
    yield server
    server.stop()


async def test_round_trip_under_another_name_and_tenant_answers_the_same(library, ingest_api, search, database_url):
    api, uploaded, header, bundle = library
    assert header.format_version == 1 and header.collection == "library" and header.document_count == len(FILES) + 1
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        members = tar.getnames()
    assert members[:6] == [
        "manifest.json",
        "documents.parquet",
        "versions.parquet",
        "chunks.parquet",
        "disabled_chunks.parquet",
        "eval_sets.parquet",
    ]
    assert len([m for m in members if m.startswith("originals/")]) == len(FILES) + 1

    copy = await api.import_call(bundle, "library-copy")
    assert copy.name == "library-copy" and copy.document_count == len(FILES) + 1 == copy.ready_document_count
    assert copy.embedder.provider == HASHING and copy.embedder.dimensions == 64

    admin = admin_service_pb2_grpc.AdminServiceStub(auth_keys.aio_channel(ingest_api.address, "admin"))
    await admin.CreateTenant(admin_service_pb2.CreateTenantRequest(tenant=admin_service_pb2.Tenant(name="elsewhere")))
    key = await admin.CreateApiKey(
        admin_service_pb2.CreateApiKeyRequest(tenant="elsewhere", role=admin_service_pb2.API_KEY_ROLE_CLIENT, name="t")
    )
    other = Api(ingest_api.address, key.secret)
    moved = await other.import_call(bundle, "")  # the bundle's own name, in another tenant
    assert moved.name == "library" and moved.ready_document_count == len(FILES) + 1

    stub = search_service_pb2_grpc.SearchServiceStub(auth_keys.aio_channel(search.address))
    original = await top10(stub, "library")
    assert all(original[q, m][0] for q in QUERIES for m in MODES), [k for k, v in original.items() if not v]
    other_search = (("authorization", f"Bearer {key.secret}"),)
    await wait_for_async(lambda: _known(stub, "library-copy"), timeout=30, what="search to know the copy")
    copied = await top10(stub, "library-copy")
    assert copied == original, _diff(original, copied)
    assert await top10(stub, "library", other_search) == original

    # Disabled chunks and edits came along; versions too; documents are READY with new ids.
    docs = {d.filename: d for d in await other.documents("library")}
    copied = await other.chunks(docs[FILES[0]].id)
    assert [c.enabled for c in copied[:2]] == [False, True] and copied[1].edited and copied[1].original_text
    assert copied[1].text == "An edited chunk about lease expiry."
    assert docs["notes.txt"].version == 2 and docs["notes.txt"].id != uploaded[0].id
    with psycopg.connect(database_url) as conn:
        sets = conn.execute(
            "SELECT g.eval_set FROM collection_generations g JOIN collections c ON c.id = g.collection_id"
            " WHERE c.name = 'library-copy' AND g.state = 'ACTIVE'"
        ).fetchone()[0]
        assert sets[0]["query"] == "leases" and sets[0]["relevant"][1] == "operations.md"
        assert sets[0]["relevant"][0] == next(d.id for d in await api.documents("library-copy") if d.filename == FILES[0])
        # Every invariant sluice-check knows holds with two imported collections beside the original.
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert [f.check.name for f in run_checks(conn) if not f.check.note] == []
        assert (
            conn.execute(
                "SELECT count(*) FROM pg_indexes WHERE indexname IN (SELECT 'chunks_embedding_g' || g.id FROM collection_generations g"
                " JOIN collections c ON c.id = g.collection_id WHERE g.state = 'ACTIVE')"
            ).fetchone()[0]
            == 3
        )
    await other.channel.close()


def _diff(original: dict, copied: dict) -> list:
    return [(k, original[k], copied[k]) for k in original if original[k] != copied[k]][:2]


async def _known(stub, name: str) -> bool:
    try:
        await stub.Search(search_service_pb2.SearchRequest(collection=name, query="x", top_k=1))
        return True
    except grpc.aio.AioRpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            return False
        raise


async def test_another_embedder_is_refused_unless_reembedding_is_asked(library, database_url):
    api, _, _, bundle = library
    before = counts(database_url)
    other = collection_pb2.EmbedderConfig(provider=HASHING, model="hashing-v1", dimensions=128)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await api.import_call(bundle, "other-embedder", embedder=other)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(refused.value) == "EMBEDDER_MISMATCH" and "128 dimensions" in refused.value.details()
    assert counts(database_url) == before

    reembedded = await api.import_call(bundle, "other-embedder", embedder=other, reembed=True)
    assert reembedded.embedder.dimensions == 128 and reembedded.ready_document_count == 0
    pending = await api.documents("other-embedder")
    assert len(pending) == len(FILES) + 1 and {d.status for d in pending} == {D.DOCUMENT_STATUS_PENDING}
    assert {d.priority for d in pending} == {D.JOB_PRIORITY_BULK}  # an import is bulk work (docs/tenancy.md)


def _member_offset(bundle: bytes, name: str) -> int:
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        member = tar.getmember(name)
        return member.offset_data + member.size // 2


@pytest.mark.parametrize("member", ["chunks.parquet", "documents.parquet", "originals/"])
async def test_a_flipped_byte_is_refused_naming_the_member(library, database_url, member):
    api, _, _, bundle = library
    with tarfile.open(fileobj=io.BytesIO(bundle)) as tar:
        name = next(n for n in tar.getnames() if n.startswith(member))
    at = _member_offset(bundle, name)
    damaged = bundle[:at] + bytes([bundle[at] ^ 0x01]) + bundle[at + 1 :]
    before = counts(database_url)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await api.import_call(damaged, "damaged")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and reason_of(refused.value) == "BUNDLE_INVALID"
    assert name in refused.value.details() and "nothing was imported" in refused.value.details()
    assert counts(database_url) == before


async def test_an_import_cut_off_at_any_moment_leaves_nothing(library, database_url):
    api, _, _, bundle = library
    before = counts(database_url)
    rng = random.Random(36)
    cuts = sorted(rng.randrange(1, len(bundle)) for _ in range(4))
    for stop_at in [0, *cuts]:  # the client stops sending there and is cut off
        call = api.import_call(bundle, "cut", stop_at=stop_at)
        await asyncio.sleep(0.3)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await wait_for_async(lambda: _counts_async(database_url, before), timeout=30, what=f"nothing left after {stop_at} bytes")
    # Cut off after the trailer, while the server writes: all or nothing, never a part.
    for delay in (0.0, 0.01, 0.03, 0.1):
        call = api.import_call(bundle, "cut")
        await asyncio.sleep(delay)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            await call  # cut off or not: whether the server had committed is what the counts say
        await asyncio.sleep(1.0)  # the server's task ends its transaction one way or the other
        if counts(database_url) != before:  # it committed before the cut: whole, then removed for the next round
            documents = await api.documents("cut")
            assert len(documents) == len(FILES) + 1 and all(d.status == D.DOCUMENT_STATUS_READY for d in documents)
            await api.docs.DeleteCollection(ds.DeleteCollectionRequest(name="cut", force=True))
    final = counts(database_url)
    assert final["documents"] == before["documents"] and final["chunks"] == before["chunks"]


async def _counts_async(database_url: str, expected: dict) -> bool:
    return await asyncio.to_thread(counts, database_url) == expected


async def test_a_stream_without_its_trailer_stores_nothing(library, database_url):
    api, _, _, bundle = library
    before = counts(database_url)

    async def messages():
        yield ds.ImportCollectionRequest(options=ds.ImportCollectionOptions(name="no-trailer"))
        yield ds.ImportCollectionRequest(data=bundle)

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await api.docs.ImportCollection(messages())
    assert reason_of(refused.value) == "UPLOAD_INCOMPLETE"
    with pytest.raises(grpc.aio.AioRpcError) as taken:
        await api.import_call(bundle, "library")
    assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert counts(database_url) == before
