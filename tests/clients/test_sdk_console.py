"""The Python SDK's console calls (issue 34) against the real ingest-api and search: a document's
chunks a page at a time, disabling, enabling and editing one (what search then returns, and a stale
etag refused), the original bytes back with their SHA-256, and search's explanations."""

from __future__ import annotations

import hashlib

import auth_keys
import pytest
from sluice.v1 import job_service_pb2 as js
from sluice_client import (
    Aborted,
    AsyncClient,
    Chunk,
    ChunkPage,
    DownloadedDocument,
    HitExplanation,
    InvalidArgument,
    NotFound,
)

PARAGRAPHS = [
    "Leases expire when the worker stops renewing them.",
    "A worker claims a job with FOR UPDATE SKIP LOCKED.",
    "Hybrid search fuses keyword and vector ranks.",
    "Webhooks are signed with a secret shown once.",
    "Quokkas are marsupials that live on Rottnest Island.",
]


@pytest.fixture
def ready(client, tmp_path):
    """A READY document of five one-paragraph chunks in collection `docs` (hashing embedder)."""
    client.collections.create("docs", embedder="hashing")
    path = tmp_path / "handbook.md"
    path.write_text("\n\n".join(PARAGRAPHS) + "\n")
    doc = client.documents.wait(client.documents.upload("docs", path).id, timeout=60)
    assert doc.ready and doc.chunk_count == len(PARAGRAPHS)
    return doc, path


def test_a_documents_chunks_come_a_page_at_a_time_with_every_field(client, ready):
    doc, _ = ready
    first = client.documents.list_chunks(doc.id, page_size=2)
    assert isinstance(first, ChunkPage) and len(first) == 2 and first.next_page_token
    assert first.total_size == len(PARAGRAPHS) and first.generation >= 1
    second = client.documents.list_chunks(doc.id, page_size=2, page_token=first.next_page_token)
    assert [c.chunk_index for c in second] == [2, 3]
    chunks = list(client.documents.iter_chunks(doc.id, page_size=2))
    assert [c.text for c in chunks] == PARAGRAPHS and [c.chunk_index for c in chunks] == [0, 1, 2, 3, 4]
    chunk = chunks[0]
    assert isinstance(chunk, Chunk) and chunk.document_id == doc.id and chunk.id and chunk.etag
    assert (chunk.page_number, chunk.element_type, chunk.generation) == (1, "NarrativeText", first.generation)
    assert chunk.enabled and not chunk.edited and chunk.original_text == ""
    assert chunk.character_count == len(PARAGRAPHS[0]) and chunk.token_count > 0 and chunk.update_time is not None
    assert len({c.id for c in chunks}) == len(PARAGRAPHS)
    # The generation named is the one listed; one the collection never had is NOT_FOUND.
    assert [c.id for c in client.documents.iter_chunks(doc.id, generation=first.generation)] == [c.id for c in chunks]
    with pytest.raises(NotFound):
        client.documents.list_chunks(doc.id, generation=first.generation + 40)
    with pytest.raises(NotFound):
        client.documents.list_chunks("00000000-0000-4000-8000-000000000000")


def test_a_disabled_chunk_leaves_search_and_an_enabled_one_comes_back(client, ready):
    doc, _ = ready
    quokka = next(c for c in client.documents.iter_chunks(doc.id) if "Quokkas" in c.text)
    assert [h.chunk_id for h in client.search("docs", "quokkas", mode="keyword")] == [quokka.id]
    disabled = client.documents.disable_chunk(quokka.id, etag=quokka.etag)
    assert not disabled.enabled and disabled.etag != quokka.etag and disabled.id == quokka.id
    assert len(client.search("docs", "quokkas", mode="keyword")) == 0
    assert [c.enabled for c in client.documents.iter_chunks(doc.id)].count(False) == 1
    # A stale etag is refused and changes nothing.
    with pytest.raises(Aborted) as stale:
        client.documents.enable_chunk(quokka.id, etag=quokka.etag)
    assert stale.value.reason == "CHUNK_CHANGED"
    assert len(client.search("docs", "quokkas", mode="keyword")) == 0
    enabled = client.documents.enable_chunk(quokka.id, etag=disabled.etag)
    assert enabled.enabled
    assert [h.chunk_id for h in client.search("docs", "quokkas", mode="keyword")] == [quokka.id]


def test_an_edited_chunk_is_searched_by_its_new_text_and_keeps_the_parsers(client, ready):
    doc, _ = ready
    webhooks = client.documents.list_chunks(doc.id, page_size=100).chunks[3]
    edited = client.documents.edit_chunk(webhooks.id, "Webhooks carry an HMAC signature of the platypus payload.")
    assert edited.edited and edited.original_text == PARAGRAPHS[3] and edited.text.startswith("Webhooks carry")
    assert edited.id == webhooks.id and edited.character_count == len(edited.text)
    assert [h.chunk_id for h in client.search("docs", "platypus", mode="keyword")] == [webhooks.id]
    assert client.documents.list_chunks(doc.id).chunks[3].edited
    with pytest.raises(InvalidArgument):
        client.documents.edit_chunk(webhooks.id, "   ")
    with pytest.raises(Aborted):
        client.documents.edit_chunk(webhooks.id, "other text", etag=webhooks.etag)
    with pytest.raises(NotFound):
        client.documents.disable_chunk("999999999")


def test_the_original_bytes_come_back_checked(client, ready, tmp_path):
    doc, path = ready
    original = path.read_bytes()
    assert client.documents.download(doc.id) == original
    out = tmp_path / "out"
    out.mkdir()
    written = client.documents.download(doc.id, out)
    assert isinstance(written, DownloadedDocument) and written.path == out / "handbook.md"
    assert written.path.read_bytes() == original and written.mime_type == "text/markdown"
    assert (written.size_bytes, written.content_sha256) == (len(original), hashlib.sha256(original).hexdigest())
    with pytest.raises(NotFound):
        client.documents.download("00000000-0000-4000-8000-000000000000", tmp_path / "nothing.md")
    assert not (tmp_path / "nothing.md").exists()


def test_an_explanation_says_which_lists_a_hit_was_in(client, ready):
    plain = client.search("docs", "quokkas marsupials", mode="hybrid")
    assert plain[0].explanation is None  # not asked for
    keyword = client.search("docs", "quokkas", mode="keyword", explain=True)
    e = keyword[0].explanation
    assert isinstance(e, HitExplanation) and e.keyword_rank == 1 and e.keyword_score and e.keyword_score > 0
    assert e.vector_similarity is None and e.vector_rank is None and e.first_stage_rank == 1
    assert e.matched_terms and e.rerank_status == "UNSPECIFIED"
    hybrid = client.search("docs", "quokkas marsupials", mode="hybrid", explain=True)
    assert [h.chunk_id for h in hybrid] == [h.chunk_id for h in plain]  # explaining changes no order
    top = hybrid[0].explanation
    assert top is not None and top.vector_rank is not None and top.vector_similarity is not None
    assert top.vector_weight is not None and top.fused_score == pytest.approx(hybrid[0].raw.first_stage_score)
    assert [h.explanation.first_stage_rank for h in hybrid] == list(range(1, len(hybrid) + 1))
    # The generation searched is the one asked for.
    generation = client.documents.list_chunks(ready[0].id).generation
    assert client.search("docs", "quokkas", generation=generation).generation == generation
    with pytest.raises(NotFound):
        client.search("docs", "quokkas", generation=generation + 40)


async def test_the_asyncio_client_does_the_same(services, client, ready, tmp_path):
    doc, path = ready
    async with AsyncClient(services.ingest, search_address=services.search, api_key=auth_keys.KEYS["client"]) as aclient:
        page = await aclient.documents.list_chunks(doc.id, page_size=3)
        assert len(page) == 3 and page.total_size == len(PARAGRAPHS)
        chunks = [c async for c in aclient.documents.iter_chunks(doc.id, page_size=2)]
        assert [c.text for c in chunks] == PARAGRAPHS
        disabled = await aclient.documents.disable_chunk(chunks[4].id)
        assert not disabled.enabled
        assert (await aclient.documents.enable_chunk(chunks[4].id, etag=disabled.etag)).enabled
        edited = await aclient.documents.edit_chunk(chunks[0].id, "Leases lapse without renewal.")
        assert edited.edited and edited.original_text == PARAGRAPHS[0]
        assert await aclient.documents.download(doc.id) == path.read_bytes()
        assert (await aclient.documents.download(doc.id, tmp_path / "copy.md")).path.read_bytes() == path.read_bytes()
        hits = await aclient.search("docs", "lapse", mode="keyword", explain=True)
        assert hits[0].chunk_id == chunks[0].id and hits[0].explanation.keyword_rank == 1


def test_a_building_generation_is_listed_and_searched_beside_the_active_one(client, services, ready, tmp_path):
    """During a reindex, generation= names the BUILDING generation: its chunks are those embedded
    so far, and a search of it finds only them, while the ACTIVE one still answers by default."""
    doc, _ = ready
    other = client.documents.wait(client.documents.upload("docs", b"Quokkas again, in a second file.", filename="b.txt").id)
    services.worker.pause()
    building = client.collections.reindex("docs", embedder="hashing", model="hashing-v2", dimensions=32).generations[-1]
    assert building.state == "BUILDING"
    # One EMBED job done by hand (the worker's own way), so the new generation holds one document.
    claimed = services.worker.jobs.ClaimJob(js.ClaimJobRequest(worker_id="by-hand", wait_seconds=5), timeout=10)
    assert claimed.HasField("job")
    services.worker._process(claimed.job)
    done, waiting = (doc, other) if claimed.job.document_id == doc.id else (other, doc)
    page = client.documents.list_chunks(done.id, generation=building.number)
    assert page.generation == building.number and len(page) == done.chunk_count
    assert {c.generation for c in page} == {building.number}
    assert len(client.documents.list_chunks(waiting.id, generation=building.number)) == 0
    assert client.documents.list_chunks(waiting.id).generation < building.number  # the ACTIVE one by default
    found = client.search("docs", "quokkas", mode="keyword", generation=building.number)
    assert found.generation == building.number and {h.document_id for h in found} == {done.id}
    assert {h.document_id for h in client.search("docs", "quokkas", mode="keyword")} == {doc.id, other.id}
    services.worker.resume()
