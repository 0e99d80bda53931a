"""A document's chunks and bytes (docs/chunks.md, issue 34): ListChunks, UpdateChunk (disable,
enable, edit with an inline re-embedding) and DownloadDocument, through real gRPC servers
(ingest-api and search) on a real PostgreSQL; the worker is played by hand through JobService."""

from __future__ import annotations

import asyncio
import hashlib

import auth_keys
import grpc
import psycopg
import pytest
from helpers import expect_error
from search_server import RunningSearch
from sluice.v1 import admin_service_pb2 as admin_pb2
from sluice.v1 import admin_service_pb2_grpc, collection_pb2, document_service_pb2_grpc, search_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js
from sluice.v1 import search_service_pb2 as sp
from sluice_common.channels import keyed_aio_channel, keyed_channel
from sluice_common.embedders import EmbeddingError, get_embedder
from sluice_common.errors import reason_of

from .helpers import Clients, D

DIM = 8
VECTOR, KEYWORD, HYBRID = sp.SEARCH_MODE_VECTOR, sp.SEARCH_MODE_KEYWORD, sp.SEARCH_MODE_HYBRID
TEXTS = [f"Chapter {i} tells of rivers and mills near the old town number{i}." for i in range(5)]
TEXTS[2] = "Chapter 2 tells of the lighthouse keeper and his brass lamp."
BOX = D.BoundingBox(page_number=1, left=0.125, top=0.25, right=0.5, bottom=0.75)


def embed(text: str, dimensions: int = DIM, model: str = "hashing-v1") -> list[float]:
    return list(get_embedder("hashing", model, dimensions).embed_one(text))  # type: ignore[attr-defined]


def complete(c: Clients, job: js.Job, texts: list[str], dimensions: int = DIM, model: str = "hashing-v1") -> D.Document:
    """CompleteJob with the hashing embedder's real vectors (search embeds its queries with it)."""

    def messages():
        yield js.CompleteJobRequest(header=js.CompleteJobHeader(lease=job.lease, chunk_count=len(texts)))
        chunks = [
            js.Chunk(
                index=i,
                text=t,
                page_number=1,
                element_type="NarrativeText",
                embedding=embed(t, dimensions, model),
                boxes=[BOX] if i == 0 else [],
                element_types=["Title", "NarrativeText"] if i == 0 else ["NarrativeText"],
            )
            for i, t in enumerate(texts)
        ]
        yield js.CompleteJobRequest(chunks=js.ChunkBatch(chunks=chunks))

    return c.jobs.CompleteJob(messages()).document


def ready(c: Clients, texts: list[str] = TEXTS, name: str = "book.txt") -> str:
    doc = c.upload(content=("\n".join(texts) + name).encode(), filename=name)
    job = c.claim()
    assert job.document_id == doc.id
    c.run_to_indexing(job)
    assert complete(c, job, texts).status == D.DOCUMENT_STATUS_READY
    return doc.id


def list_chunks(c: Clients, document_id: str, **kwargs) -> ds.ListChunksResponse:
    return c.docs.ListChunks(ds.ListChunksRequest(document_id=document_id, **kwargs))


def update(c: Clients, chunk_id: str, **kwargs) -> ds.DocumentChunk:
    return c.docs.UpdateChunk(ds.UpdateChunkRequest(chunk_id=chunk_id, **kwargs))


def download(stub, document_id: str) -> tuple[ds.DownloadDocumentHeader, bytes]:
    responses = list(stub.DownloadDocument(ds.DownloadDocumentRequest(id=document_id)))
    assert responses[0].WhichOneof("payload") == "header"
    assert all(r.WhichOneof("payload") == "data" for r in responses[1:])
    return responses[0].header, b"".join(r.data for r in responses[1:])


def chunk_rows(url: str, document_id: str) -> dict[int, tuple]:
    """Every chunk row of the document, enabled or not, by chunk_index: what an edit must not touch."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT chunk_index, id, embedding::text, text, revision, updated_at, true FROM chunks WHERE document_id = %s"
            " UNION ALL SELECT chunk_index, id, embedding::text, text, revision, updated_at, false FROM disabled_chunks"
            " WHERE document_id = %s",
            (document_id, document_id),
        ).fetchall()
    return {r[0]: r[1:] for r in rows}


def chunks_outside_ready(url: str) -> int:
    """Rule 1 with disabled chunks: rows of either table whose document is not READY."""
    with psycopg.connect(url) as conn:
        (count,) = conn.execute(
            "SELECT (SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.status <> 'READY')"
            " + (SELECT count(*) FROM disabled_chunks c JOIN documents d ON d.id = c.document_id WHERE d.status <> 'READY')"
        ).fetchone()
    return int(count)


def other_tenant_channel(address: str, role: str = "client") -> grpc.Channel:
    admin = admin_service_pb2_grpc.AdminServiceStub(keyed_channel(address, auth_keys.KEYS["admin"]))
    admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="other")))
    key = admin.CreateApiKey(
        admin_pb2.CreateApiKeyRequest(tenant="other", role=admin_pb2.API_KEY_ROLE_CLIENT, name="other client")
    ).secret
    return keyed_channel(address, key)


@pytest.fixture
def c(ingest_api):
    clients = Clients(ingest_api.address)
    clients.create_collection("docs", DIM)
    yield clients
    clients.close()


@pytest.fixture
def search(database_url):
    server = RunningSearch(database_url)
    channel = auth_keys.channel(server.address)
    yield search_service_pb2_grpc.SearchServiceStub(channel)
    channel.close()
    server.stop()


# ---------------------------------------------------------------- ListChunks


def test_list_chunks_pages_through_a_document(c):
    doc = ready(c)
    first = list_chunks(c, doc, page_size=2)
    assert [ch.chunk_index for ch in first.chunks] == [0, 1]
    assert first.total_size == 5 and first.generation == 1 and first.next_page_token
    second = list_chunks(c, doc, page_size=2, page_token=first.next_page_token)
    third = list_chunks(c, doc, page_size=2, page_token=second.next_page_token)
    assert [ch.chunk_index for ch in [*second.chunks, *third.chunks]] == [2, 3, 4]
    assert third.next_page_token == ""
    whole = list_chunks(c, doc)
    assert [ch.text for ch in whole.chunks] == TEXTS and whole.next_page_token == ""
    chunk = whole.chunks[2]
    assert chunk.document_id == doc and chunk.page_number == 1 and chunk.element_type == "NarrativeText"
    assert chunk.enabled and not chunk.edited and chunk.original_text == ""
    assert chunk.character_count == len(TEXTS[2]) and chunk.token_count == len(TEXTS[2].split())
    assert chunk.etag == f"{chunk.id}-0" and chunk.update_time.seconds > 0
    assert list(whole.chunks[0].boxes) == [BOX] and list(chunk.boxes) == []
    assert list(whole.chunks[0].element_types) == ["Title", "NarrativeText"] and list(chunk.element_types) == ["NarrativeText"]
    assert list_chunks(c, doc, generation=1) == whole  # generation 1 is the ACTIVE one


def test_list_chunks_refuses_bad_arguments(c):
    doc = ready(c)
    token = list_chunks(c, doc, page_size=1).next_page_token
    expect_error(lambda: list_chunks(c, doc, page_token="garbage"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN")
    other = ready(c, ["another text entirely"], "other.txt")
    expect_error(lambda: list_chunks(c, other, page_token=token), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN")
    expect_error(lambda: list_chunks(c, doc, page_size=1001), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_SIZE")
    expect_error(lambda: list_chunks(c, doc, generation=7), grpc.StatusCode.NOT_FOUND, "GENERATION_NOT_FOUND")
    expect_error(lambda: list_chunks(c, doc, generation=-1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_GENERATION")
    expect_error(lambda: list_chunks(c, "not-a-uuid"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ID")


def test_a_document_that_is_not_ready_has_no_chunks(c):
    doc = c.upload(content=b"still waiting for a worker")
    response = list_chunks(c, doc.id)
    assert list(response.chunks) == [] and response.total_size == 0 and response.next_page_token == ""


def test_another_tenants_document_and_chunk_answer_like_missing_ones(c, ingest_api):
    doc = ready(c)
    chunk = list_chunks(c, doc).chunks[0]
    stranger = document_service_pb2_grpc.DocumentServiceStub(other_tenant_channel(ingest_api.address))
    missing_doc, missing_chunk = "0b6c0e9a-1c8b-4d7e-9a59-3f1f2f0a9e11", "999999999"
    calls = {
        "list": lambda d: stranger.ListChunks(ds.ListChunksRequest(document_id=d)),
        "download": lambda d: list(stranger.DownloadDocument(ds.DownloadDocumentRequest(id=d))),
    }
    for name, call in calls.items():
        theirs = expect_error(lambda call=call: call(doc), grpc.StatusCode.NOT_FOUND, "DOCUMENT_NOT_FOUND")
        missing = expect_error(lambda call=call: call(missing_doc), grpc.StatusCode.NOT_FOUND, "DOCUMENT_NOT_FOUND")
        assert theirs.details().replace(doc, "ID") == missing.details().replace(missing_doc, "ID"), name
    theirs = expect_error(
        lambda: stranger.UpdateChunk(ds.UpdateChunkRequest(chunk_id=chunk.id, enabled=False)),
        grpc.StatusCode.NOT_FOUND,
        "CHUNK_NOT_FOUND",
    )
    missing = expect_error(
        lambda: stranger.UpdateChunk(ds.UpdateChunkRequest(chunk_id=missing_chunk, enabled=False)),
        grpc.StatusCode.NOT_FOUND,
        "CHUNK_NOT_FOUND",
    )
    assert theirs.details().replace(chunk.id, "ID") == missing.details().replace(missing_chunk, "ID")
    assert list_chunks(c, doc).chunks[0] == chunk  # untouched


def test_a_reader_lists_and_downloads_but_may_not_update(c, ingest_api):
    doc = ready(c)
    reader = document_service_pb2_grpc.DocumentServiceStub(keyed_channel(ingest_api.address, auth_keys.KEYS["reader"]))
    chunks = reader.ListChunks(ds.ListChunksRequest(document_id=doc)).chunks
    assert len(chunks) == 5
    header, data = download(reader, doc)
    assert hashlib.sha256(data).hexdigest() == header.content_sha256
    expect_error(
        lambda: reader.UpdateChunk(ds.UpdateChunkRequest(chunk_id=chunks[0].id, enabled=False)),
        grpc.StatusCode.PERMISSION_DENIED,
        "ROLE_NOT_ALLOWED",
    )
    assert list_chunks(c, doc).chunks[0].enabled


# ---------------------------------------------------------------- disable and enable


def hits(search, query: str, mode: int, **kwargs) -> list[tuple[str, int]]:
    response = search.Search(sp.SearchRequest(collection="docs", query=query, mode=mode, top_k=10, **kwargs))
    return [(h.document_id, h.chunk_index) for h in response.hits]


def updates_counted(change: str) -> float:
    """sluice_chunk_updates_total{change} of the in-process ingest-api."""
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("sluice_chunk_updates_total", {"change": change}) or 0.0


def test_a_disabled_chunk_leaves_every_search_mode_and_comes_back_enabled(c, search, database_url):
    doc = ready(c)
    ready(c, ["The harbour has no lighthouse at all, only mills."], "harbour.txt")
    chunk = list_chunks(c, doc).chunks[2]
    query = TEXTS[2]  # its own text: the nearest vector and every keyword
    for mode in (VECTOR, KEYWORD, HYBRID):
        assert (doc, 2) in hits(search, query, mode), mode
    context = search.Search(sp.SearchRequest(collection="docs", query=TEXTS[1], mode=KEYWORD, top_k=1, neighbor_chunks=1))
    assert TEXTS[2] in context.hits[0].context

    disables = updates_counted("disable")
    disabled = update(c, chunk.id, enabled=False, etag=chunk.etag)
    assert updates_counted("disable") == disables + 1
    assert not disabled.enabled and disabled.id == chunk.id and disabled.text == chunk.text
    assert disabled.etag != chunk.etag and disabled.token_count == chunk.token_count
    for mode in (VECTOR, KEYWORD, HYBRID):
        assert (doc, 2) not in hits(search, query, mode), mode
    assert (doc, 2) not in hits(search, "lighthouse keeper brass lamp", KEYWORD)
    context = search.Search(sp.SearchRequest(collection="docs", query=TEXTS[1], mode=KEYWORD, top_k=1, neighbor_chunks=1))
    assert context.hits[0].chunk_index == 1 and TEXTS[2] not in context.hits[0].context
    # The document keeps its vector for HYBRID's document context (the DELETE took it; it is computed again).
    with psycopg.connect(database_url) as conn:
        (vectors,) = conn.execute("SELECT count(*) FROM document_vectors WHERE document_id = %s", (doc,)).fetchone()
    assert vectors == 1
    listed = list_chunks(c, doc)
    assert listed.total_size == 5 and [ch.enabled for ch in listed.chunks] == [True, True, False, True, True]

    enabled = update(c, chunk.id, enabled=True)
    assert enabled.enabled and enabled.id == chunk.id and enabled.text == chunk.text
    assert enabled.element_types == chunk.element_types and enabled.page_number == chunk.page_number
    for mode in (VECTOR, KEYWORD, HYBRID):
        assert (doc, 2) in hits(search, query, mode), mode
    # Enabling an enabled chunk again changes nothing (a retried call), and counts nothing.
    enables = updates_counted("enable")
    assert update(c, chunk.id, enabled=True).etag == enabled.etag
    assert updates_counted("enable") == enables


def test_reprocess_and_deletion_take_disabled_chunks_with_them(c, database_url):
    doc = ready(c)
    update(c, list_chunks(c, doc).chunks[1].id, enabled=False)
    c.docs.ReprocessDocument(ds.ReprocessDocumentRequest(id=doc))
    assert chunks_outside_ready(database_url) == 0
    assert chunk_rows(database_url, doc) == {}
    again = c.claim()
    c.run_to_indexing(again)
    complete(c, again, TEXTS)
    assert [ch.enabled for ch in list_chunks(c, doc).chunks] == [True] * 5  # the file again, as parsed
    update(c, list_chunks(c, doc).chunks[1].id, enabled=False)
    c.docs.DeleteDocument(ds.DeleteDocumentRequest(id=doc))
    assert chunk_rows(database_url, doc) == {}


# ---------------------------------------------------------------- edit


def test_an_edit_re_embeds_that_chunk_alone(c, search, database_url):
    doc = ready(c)
    before = chunk_rows(database_url, doc)
    chunk = list_chunks(c, doc).chunks[2]
    new_text = "Chapter 2 tells of the ferryman and his zeppelin."
    edited = update(c, chunk.id, text=new_text, etag=chunk.etag)
    assert edited.text == new_text and edited.edited and edited.original_text == TEXTS[2]
    assert edited.id == chunk.id and edited.etag != chunk.etag and edited.character_count == len(new_text)
    assert edited.token_count == len(new_text.split())
    after = chunk_rows(database_url, doc)
    assert {i: r for i, r in after.items() if i != 2} == {i: r for i, r in before.items() if i != 2}
    assert after[2][1] != before[2][1]  # a new vector
    with psycopg.connect(database_url) as conn:
        (stored,) = conn.execute("SELECT embedding::text FROM chunks WHERE id = %s", (int(chunk.id),)).fetchone()
    assert [round(float(v), 4) for v in stored.strip("[]").split(",")] == [round(v, 4) for v in embed(new_text)]
    assert (doc, 2) in hits(search, "zeppelin", KEYWORD)
    assert (doc, 2) not in hits(search, "lighthouse", KEYWORD)
    assert hits(search, new_text, VECTOR)[0] == (doc, 2)
    # Editing it back to the parser's text: it is the parser's chunk again.
    back = update(c, chunk.id, text=TEXTS[2])
    assert back.text == TEXTS[2] and not back.edited and back.original_text == ""


def test_an_edit_refuses_bad_text_and_stale_etags(c):
    doc = ready(c)
    chunk = list_chunks(c, doc).chunks[0]
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    expect_error(lambda: update(c, chunk.id, text=""), invalid, "INVALID_CHUNK_TEXT")
    expect_error(lambda: update(c, chunk.id, text="   \n"), invalid, "INVALID_CHUNK_TEXT")
    expect_error(lambda: update(c, chunk.id, text="x" * 100_001), invalid, "INVALID_CHUNK_TEXT")
    expect_error(lambda: update(c, chunk.id, text="a\x00b"), invalid, "NUL_CHARACTER")
    expect_error(lambda: update(c, chunk.id), invalid, "NOTHING_TO_UPDATE")
    expect_error(lambda: update(c, "abc", enabled=False), invalid, "INVALID_ID")
    assert update(c, chunk.id, text="y" * 100_000).character_count == 100_000
    expect_error(lambda: update(c, chunk.id, text="stale", etag=chunk.etag), grpc.StatusCode.ABORTED, "CHUNK_CHANGED")
    expect_error(lambda: update(c, chunk.id, enabled=False, etag=chunk.etag), grpc.StatusCode.ABORTED, "CHUNK_CHANGED")
    assert list_chunks(c, doc).chunks[0].text == "y" * 100_000


def test_an_embedder_failure_changes_nothing(c, ingest_api, database_url):
    doc = ready(c)
    before = chunk_rows(database_url, doc)
    chunk = list_chunks(c, doc).chunks[0]

    class Down:
        provider, model, dimensions, batch_size = "hashing", "hashing-v1", DIM, 1

        async def embed_documents(self, texts):
            raise EmbeddingError("the provider answered 503", code="EMBEDDING_UNAVAILABLE", retryable=True)

    ingest_api.app.chunks.embedder_for = lambda provider, model, dimensions: Down()
    error = expect_error(lambda: update(c, chunk.id, text="new words"), grpc.StatusCode.UNAVAILABLE, "EMBEDDER_UNAVAILABLE")
    assert "nothing was changed" in error.details()
    assert chunk_rows(database_url, doc) == before


def test_two_concurrent_edits_with_one_etag_one_wins(c, ingest_api, database_url):
    doc = ready(c)
    chunk = list_chunks(c, doc).chunks[3]

    async def race() -> list[object]:
        # Two connections, so the two calls really run at once.
        channels = [keyed_aio_channel(ingest_api.address, auth_keys.KEYS["client"]) for _ in range(2)]
        try:
            stubs = [document_service_pb2_grpc.DocumentServiceStub(ch) for ch in channels]
            calls = [
                stub.UpdateChunk(ds.UpdateChunkRequest(chunk_id=chunk.id, text=f"edit number {n}", etag=chunk.etag))
                for n, stub in enumerate(stubs)
            ]
            return list(await asyncio.gather(*calls, return_exceptions=True))
        finally:
            for ch in channels:
                await ch.close()

    for _ in range(5):
        current = list_chunks(c, doc).chunks[3]
        chunk = current
        results = asyncio.run(race())
        won = [r for r in results if isinstance(r, ds.DocumentChunk)]
        lost = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
        assert len(won) == 1 and len(lost) == 1, results
        assert lost[0].code() == grpc.StatusCode.ABORTED
        assert list_chunks(c, doc).chunks[3].text == won[0].text
        assert won[0].etag == f"{chunk.id}-{int(current.etag.split('-')[1]) + 1}"


async def edit_beside_reprocess(address: str, doc: str, change: ds.UpdateChunkRequest, delay: float) -> list[object]:
    """UpdateChunk and ReprocessDocument of its document at once, over two connections."""
    channels = [keyed_aio_channel(address, auth_keys.KEYS["client"]) for _ in range(2)]
    try:
        a, b = (document_service_pb2_grpc.DocumentServiceStub(ch) for ch in channels)

        async def reprocess():
            await asyncio.sleep(delay)  # staggered, so either side may come first
            return await b.ReprocessDocument(ds.ReprocessDocumentRequest(id=doc))

        return list(await asyncio.gather(a.UpdateChunk(change), reprocess(), return_exceptions=True))
    finally:
        for ch in channels:
            await ch.close()


def test_an_edit_racing_a_reprocess_never_leaves_a_chunk_under_a_document_that_is_not_ready(c, ingest_api, database_url):
    outcomes: set[str] = set()
    for n in range(9):
        doc = ready(c, TEXTS, f"race{n}.txt")
        chunk_id = list_chunks(c, doc).chunks[n % 5].id
        change = (
            ds.UpdateChunkRequest(chunk_id=chunk_id, text=f"edited {n}")
            if n % 2 == 0
            else ds.UpdateChunkRequest(chunk_id=chunk_id, enabled=False)
        )
        edit, reprocessed = asyncio.run(edit_beside_reprocess(ingest_api.address, doc, change, (n % 3) * 0.01))
        assert isinstance(reprocessed, D.Document) and reprocessed.status == D.DOCUMENT_STATUS_PENDING
        if isinstance(edit, grpc.aio.AioRpcError):
            # Read after the reprocess (no chunk: NOT_FOUND), or locked the document after it (FAILED_PRECONDITION).
            assert edit.code() in {grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND}, edit
            outcomes.add(edit.code().name)
        else:
            outcomes.add("edited first")
        assert chunks_outside_ready(database_url) == 0
        assert chunk_rows(database_url, doc) == {}
        job = c.claim()  # finish it, so the next round's claim is its own document's
        c.run_to_indexing(job)
        complete(c, job, TEXTS)
    print(sorted(outcomes))  # which side won each round is the scheduler's choice; the rule held in every one


# ---------------------------------------------------------------- download


def test_download_streams_the_uploaded_bytes(c, ingest_api):
    content = bytes(range(256)) * 10_000  # 2.5 MB: several pieces
    doc = c.upload(content=content, filename="blob.bin")
    header, data = download(c.docs, doc.id)
    assert data == content
    assert header.filename == "blob.bin" and header.size_bytes == len(content)
    assert header.content_sha256 == hashlib.sha256(content).hexdigest() == doc.content_sha256
    assert header.mime_type == doc.mime_type
    empty_name = c.upload(content=b"<html><script>alert(1)</script></html>", filename="page.html")
    header, data = download(c.docs, f"collections/docs/documents/{empty_name.id}")
    assert header.mime_type == "text/html" and data.startswith(b"<html>")
    expect_error(
        lambda: download(c.docs, "0b6c0e9a-1c8b-4d7e-9a59-3f1f2f0a9e11"), grpc.StatusCode.NOT_FOUND, "DOCUMENT_NOT_FOUND"
    )


# ---------------------------------------------------------------- generations


def test_a_change_reaches_every_generation_that_holds_the_chunk(c, database_url):
    """During a reindex, a document already embedded into the BUILDING generation holds its chunk
    twice: ListChunks shows either generation, and an edit or a disable changes both copies, each
    embedded with its own generation's embedder; the switch then serves the change."""
    doc = ready(c)
    other = ready(c, ["a document whose EMBED job stays open"], "other.txt")
    hashing_v2 = collection_pb2.EmbedderConfig(
        provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v2", dimensions=16
    )
    c.docs.ReindexCollection(ds.ReindexCollectionRequest(name="docs", embedder=hashing_v2))
    embeds = {job.document_id: job for job in (c.claim(), c.claim())}
    assert set(embeds) == {doc, other}
    complete(c, embeds[doc], TEXTS, 16, "hashing-v2")

    active, building = list_chunks(c, doc), list_chunks(c, doc, generation=2)
    assert active.generation == 1 and building.generation == 2 and building.total_size == 5
    assert [ch.text for ch in building.chunks] == TEXTS and {ch.generation for ch in building.chunks} == {2}
    assert not {ch.id for ch in active.chunks} & {ch.id for ch in building.chunks}
    assert list(list_chunks(c, other, generation=2).chunks) == []  # not embedded there yet

    new_text = "Chapter 2 tells of the ferryman and his zeppelin."
    edited = update(c, active.chunks[2].id, text=new_text)
    assert edited.generation == 1 and edited.text == new_text
    with psycopg.connect(database_url) as conn:
        stored = dict(
            conn.execute(
                "SELECT g.number, c.embedding::text FROM chunks c JOIN collection_generations g ON g.id = c.generation_id"
                " WHERE c.document_id = %s AND c.chunk_index = 2",
                (doc,),
            ).fetchall()
        )
    assert [round(float(v), 4) for v in stored[1].strip("[]").split(",")] == [round(v, 4) for v in embed(new_text)]
    assert [round(float(v), 4) for v in stored[2].strip("[]").split(",")] == [
        round(v, 4) for v in embed(new_text, 16, "hashing-v2")
    ]
    disabled = update(c, list_chunks(c, doc, generation=2).chunks[3].id, enabled=False)
    assert disabled.generation == 2 and not disabled.enabled
    assert [ch.enabled for ch in list_chunks(c, doc).chunks] == [True, True, True, False, True]

    complete(c, embeds[other], ["a document whose EMBED job stays open"], 16, "hashing-v2")  # the last: the switch
    served = list_chunks(c, doc)
    assert served.generation == 2
    assert [(ch.text, ch.enabled, ch.edited) for ch in served.chunks] == [
        (TEXTS[0], True, False),
        (TEXTS[1], True, False),
        (new_text, True, True),
        (TEXTS[3], False, False),
        (TEXTS[4], True, False),
    ]


PIPELINE = "test-pipeline-1"


def ready_with_snapshot(c: Clients, texts: list[str] = TEXTS) -> str:
    """A READY document whose INGEST job saved its chunk snapshot, as a worker does in CHUNKING."""
    doc = c.upload(content=("\n".join(texts)).encode(), filename="snap.txt")
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    c.stage(job, D.DOCUMENT_STATUS_CHUNKING)

    def snapshot():
        yield js.SaveSnapshotRequest(header=js.SnapshotHeader(lease=job.lease, pipeline_version=PIPELINE, chunk_count=len(texts)))
        chunks = [js.Chunk(index=i, text=t, page_number=1, element_type="NarrativeText") for i, t in enumerate(texts)]
        yield js.SaveSnapshotRequest(chunks=js.ChunkBatch(chunks=chunks))

    c.jobs.SaveSnapshot(snapshot())
    c.stage(job, D.DOCUMENT_STATUS_EMBEDDING)
    c.stage(job, D.DOCUMENT_STATUS_INDEXING)
    assert complete(c, job, texts).status == D.DOCUMENT_STATUS_READY
    return doc.id


def snapshot_texts(c: Clients, job: js.Job) -> list[str]:
    """What an EMBED job's worker embeds: the snapshot, as ReadSnapshot sends it."""
    assert PIPELINE in job.snapshot_versions
    responses = c.jobs.ReadSnapshot(js.ReadSnapshotRequest(lease=job.lease, pipeline_version=PIPELINE))
    return [chunk.text for response in responses for chunk in response.chunks]


def reindex(c: Clients) -> None:
    hashing_v2 = collection_pb2.EmbedderConfig(
        provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v2", dimensions=16
    )
    c.docs.ReindexCollection(ds.ReindexCollectionRequest(name="docs", embedder=hashing_v2))


def test_a_reindex_carries_edits_and_disabled_chunks_into_the_new_generation(c, database_url):
    """Changes made before the reindex embeds the document: its EMBED job reads the snapshot with
    the edited texts (and embeds them with the new embedder), and its commit marks them edited and
    keeps the disabled chunks out (docs/chunks.md, "Later")."""
    doc = ready_with_snapshot(c)
    chunks = list_chunks(c, doc).chunks
    update(c, chunks[1].id, enabled=False)
    edit = "Chapter 3, edited before the reindex."
    update(c, chunks[3].id, text=edit)
    update(c, chunks[4].id, text="Chapter 4, edited and then disabled.")
    update(c, chunks[4].id, enabled=False)
    reindex(c)
    job = c.claim()
    assert job.kind == js.JOB_KIND_EMBED and job.document_id == doc
    texts = snapshot_texts(c, job)
    assert texts == [TEXTS[0], TEXTS[1], TEXTS[2], edit, "Chapter 4, edited and then disabled."]
    complete(c, job, texts, 16, "hashing-v2")  # the last EMBED job: the switch
    served = list_chunks(c, doc)
    assert served.generation == 2 and served.total_size == 5
    assert [(ch.text, ch.enabled, ch.original_text) for ch in served.chunks] == [
        (TEXTS[0], True, ""),
        (TEXTS[1], False, ""),
        (TEXTS[2], True, ""),
        (edit, True, TEXTS[3]),
        ("Chapter 4, edited and then disabled.", False, TEXTS[4]),
    ]
    assert chunks_outside_ready(database_url) == 0
    with psycopg.connect(database_url) as conn:
        vectors = conn.execute(
            "SELECT g.number FROM document_vectors v JOIN collection_generations g ON g.id = v.generation_id"
            " WHERE v.document_id = %s ORDER BY 1",
            (doc,),
        ).fetchall()
    assert (2,) in vectors


def test_an_edit_while_the_reindex_embeds_its_document_replaces_that_embed_job(c):
    """The EMBED job read the snapshot before the edit: the edit replaces the job, whose worker's
    commit then fails; the fresh job reads the edited text, and the switch serves it."""
    doc = ready_with_snapshot(c)
    chunk = list_chunks(c, doc).chunks[2]
    reindex(c)
    stale = c.claim()
    assert stale.kind == js.JOB_KIND_EMBED
    stale_texts = snapshot_texts(c, stale)
    edit = "Chapter 2, edited while the reindex ran."
    update(c, chunk.id, text=edit)
    error = expect_error(lambda: complete(c, stale, stale_texts, 16, "hashing-v2"), grpc.StatusCode.NOT_FOUND)
    assert "JOB" in (reason_of(error) or "")
    fresh = c.claim()
    assert fresh.kind == js.JOB_KIND_EMBED and fresh.document_id == doc
    complete(c, fresh, snapshot_texts(c, fresh), 16, "hashing-v2")
    served = list_chunks(c, doc)
    assert served.generation == 2
    assert (served.chunks[2].text, served.chunks[2].original_text) == (edit, TEXTS[2])
