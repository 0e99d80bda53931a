"""UpdateChunk's use case on a fake store (no IO): what it checks before any read, the etag, a
retried call that changes nothing, one embedding per embedder, and what an embedder's failure
becomes (docs/chunks.md, "Editing re-embeds that chunk, inline")."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid

import numpy as np
import pytest
from sluice_common.embedders import EmbeddingError
from sluice_common.errors import Aborted, InvalidArgument, Unavailable
from sluice_ingest.domain import DocumentStatus
from sluice_ingest.service.chunks import ChunkUseCases
from sluice_ingest.store.chunks import ChunkCopy, ChunkTarget, DocumentChunkRow

DOCUMENT = uuid.UUID("0b6c0e9a-1c8b-4d7e-9a59-3f1f2f0a9e11")


def copy(id: int, generation: int, model: str = "hashing-v1", dimensions: int = 4, enabled: bool = True) -> ChunkCopy:
    return ChunkCopy(id, 100 + generation, generation, "hashing", model, dimensions, revision=3, enabled=enabled)


def row(copy: ChunkCopy, text: str = "old text") -> DocumentChunkRow:
    return DocumentChunkRow(
        copy.id, DOCUMENT, 7, text, 1, "NarrativeText", [], "", "", None, 2, "", None, None, copy.revision,
        dt.datetime(2026, 12, 7, tzinfo=dt.UTC), copy.generation, copy.enabled,
    )  # fmt: skip


class FakeChunks:
    """The store's port: one chunk with the given copies; records what the use case writes."""

    def __init__(self, *copies: ChunkCopy) -> None:
        self.target = ChunkTarget(DOCUMENT, DocumentStatus.READY, 7, copies)
        self.writes: list[tuple[bool | None, str | None, str, dict[int, np.ndarray]]] = []

    async def list_chunks(self, tenant_id, document_id, generation, after_index, limit):
        return [row(self.target.named)] * min(limit, 2), 2, generation

    async def chunk_target(self, tenant_id, chunk_id):
        return self.target

    async def apply_update(self, tenant_id, target, enabled, text, terms, vectors):
        self.writes.append((enabled, text, terms, vectors))
        return row(target.named, text or "old text")

    async def document_for_download(self, tenant_id, document_id):  # pragma: no cover - not used here
        raise NotImplementedError

    async def content_slice(self, tenant_id, document_id, offset, size):  # pragma: no cover - not used here
        raise NotImplementedError


class CountingEmbedder:
    provider, batch_size = "hashing", 8

    def __init__(self, model: str, dimensions: int, calls: list[str], error: EmbeddingError | None = None) -> None:
        self.model, self.dimensions, self.calls, self.error = model, dimensions, calls, error

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(self.model)
        if self.error is not None:
            raise self.error
        return [[1.0] + [0.0] * (self.dimensions - 1) for _ in texts]

    async def embed_query(self, text: str) -> list[float]:  # pragma: no cover - not used here
        raise NotImplementedError


def use_cases(store: FakeChunks, calls: list[str], error: EmbeddingError | None = None) -> ChunkUseCases:
    return ChunkUseCases(store, lambda provider, model, dimensions: CountingEmbedder(model, dimensions, calls, error))


def update(cases: ChunkUseCases, **kwargs):
    arguments = {"chunk_id": "1", "enabled": None, "text": None, "etag": "", **kwargs}
    return asyncio.run(cases.update_chunk(1, arguments["chunk_id"], arguments["enabled"], arguments["text"], arguments["etag"]))


def test_requests_that_cannot_be_right_are_refused_before_any_read():
    store = FakeChunks(copy(1, 1))
    cases = use_cases(store, [])
    for kwargs, reason in [
        ({}, "NOTHING_TO_UPDATE"),
        ({"chunk_id": "", "enabled": False}, "MISSING_ID"),
        ({"chunk_id": "-3", "enabled": False}, "INVALID_ID"),
        ({"chunk_id": "9" * 30, "enabled": False}, "INVALID_ID"),
        ({"text": ""}, "INVALID_CHUNK_TEXT"),
        ({"text": "a\x00b"}, "NUL_CHARACTER"),
        ({"text": "x" * 100_001}, "INVALID_CHUNK_TEXT"),
    ]:
        with pytest.raises(InvalidArgument) as raised:
            update(cases, **kwargs)
        assert raised.value.reason == reason, kwargs
    assert store.writes == []


def test_a_stale_etag_is_aborted_and_a_retried_enable_writes_nothing():
    store = FakeChunks(copy(1, 1), copy(2, 2, model="hashing-v2"))
    cases = use_cases(store, [])
    with pytest.raises(Aborted) as raised:
        update(cases, enabled=False, etag="1-2")
    assert raised.value.reason == "CHUNK_CHANGED"
    assert update(cases, enabled=True, etag="1-3").etag == "1-3"  # already enabled everywhere
    assert store.writes == []


def test_an_edit_embeds_once_per_embedder_and_gives_each_generation_its_vector():
    calls: list[str] = []
    store = FakeChunks(copy(1, 1), copy(2, 2, model="hashing-v1"), copy(3, 3, model="hashing-v2", dimensions=6))
    update(use_cases(store, calls), text="the new lighthouse text")
    assert sorted(calls) == ["hashing-v1", "hashing-v2"]
    ((enabled, text, terms, vectors),) = store.writes
    assert (enabled, text) == (None, "the new lighthouse text") and "lighthouse" in terms
    assert {g: v.shape for g, v in vectors.items()} == {101: (4,), 102: (4,), 103: (6,)}


@pytest.mark.parametrize(
    ("error", "expected", "reason"),
    [
        (
            EmbeddingError("503 from the provider", code="EMBEDDING_UNAVAILABLE", retryable=True),
            Unavailable,
            "EMBEDDER_UNAVAILABLE",
        ),
        (EmbeddingError("input too long", code="EMBEDDING_REJECTED", retryable=False), InvalidArgument, "INVALID_CHUNK_TEXT"),
    ],
)
def test_an_embedder_failure_writes_nothing(error, expected, reason):
    store = FakeChunks(copy(1, 1))
    with pytest.raises(expected) as raised:
        update(use_cases(store, [], error), text="new words")
    assert raised.value.reason == reason and "hashing/hashing-v1" in raised.value.message
    assert store.writes == []


def test_a_page_token_names_its_document_and_generation():
    cases = use_cases(FakeChunks(copy(1, 1)), [])
    rows, token, total, number = asyncio.run(cases.list_chunks(1, str(DOCUMENT), 1, "", 0))
    assert len(rows) == 1 and token and total == 2 and number == 0
    with pytest.raises(InvalidArgument) as raised:
        asyncio.run(cases.list_chunks(1, str(DOCUMENT), 1, token, 2))
    assert raised.value.reason == "INVALID_PAGE_TOKEN"
