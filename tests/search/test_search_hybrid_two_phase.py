"""HYBRID in two phases (service.py, `_hybrid`): ids and scores ranked and fused, then the fused
answer's rows read in one statement that checks READY again. The same answers as fusing whole
hits; and when a document leaves READY between the two phases (a real status change, committed
by another connection at that very moment), the answer is the one a search after the change gives."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from auth_keys import search_url
from sluice_common import textsearch
from sluice_common.embedders import HashingEmbedder
from sluice_search import fusion, service
from sluice_search.db import open_read_pool
from sluice_search.domain import ContextOptions, DocumentFilter, Mode, SearchQuery
from sluice_search.repository import SearchRepository
from sluice_search.service import HYBRID_KEYWORD_EXACT, SearchService

DIMENSIONS = 16
WORDS = ("river", "bridge", "castle", "harbour", "mill", "tower", "market", "forest", "valley", "lake", "road", "wall")
QUERIES = ("river bridge", "castle tower wall", "harbour market", "forest valley lake", "mill road river")


@pytest.fixture
def corpus(seed) -> dict[str, str]:
    """Eight READY documents of six chunks of words from WORDS; returns document id -> filename."""
    rng = np.random.default_rng(7)
    embedder = HashingEmbedder("hashing-v1", DIMENSIONS)
    cid = seed.collection("race", DIMENSIONS)
    documents = {}
    for d in range(8):
        doc = seed.document(cid, f"doc{d}.txt", metadata={"group": "even" if d % 2 == 0 else "odd"})
        texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(4, 12)))) + f" filler{d}x{i}" for i in range(6)]
        seed.chunks(cid, doc, texts, asyncio.run(embedder.embed_documents(texts)))
        documents[doc] = f"doc{d}.txt"
    return documents


class RacingRepository(SearchRepository):
    """The real repository, except that before each of the first `changes` fetches of the fused
    rows another connection moves the document of the first chunk asked for out of READY and
    commits: the document leaves READY between the two phases."""

    def __init__(self, pool, seed, changes: int) -> None:
        super().__init__(pool, collection_cache_seconds=0)
        self.seed = seed
        self.changes = changes
        self.fetches: list[list[int]] = []
        self.left: list[str] = []

    async def hits_by_id(self, collection, chunk_ids, filter):
        self.fetches.append(list(chunk_ids))
        if len(self.fetches) <= self.changes:
            (document_id,) = self.seed.conn.execute(
                "SELECT document_id::text FROM chunks WHERE id = %s", (chunk_ids[0],)
            ).fetchone()
            self.seed.set_status(document_id, "EMBEDDING")
            self.left.append(document_id)
        return await super().hits_by_id(collection, chunk_ids, filter)


async def _pool(database_url):
    return await open_read_pool(
        search_url(database_url), min_size=1, max_size=4, ef_search=40, max_scan_tuples=20000, statement_timeout_ms=10000
    )


async def _service(database_url, seed=None, changes: int = 0):
    pool = await _pool(database_url)
    repository = RacingRepository(pool, seed, changes) if seed is not None else SearchRepository(pool, collection_cache_seconds=0)
    # Document context off: the equivalence is with fusing the two plain lists (_one_phase).
    return pool, repository, SearchService(repository, document_weight=0.0)


def _answer(hits):
    return [(h.chunk_id, round(h.score, 6), h.document_id, h.text) for h in hits]


async def _one_phase(repository, tenant_id: int, text: str, top_k: int, filter: DocumentFilter = DocumentFilter()):
    """HYBRID as it was answered before the two phases: whole hits on both sides, then fused."""
    collection = await repository.get_collection(tenant_id, "race", fresh=True)
    vector = await HashingEmbedder("hashing-v1", DIMENSIONS).embed_query(text)
    vector_hits = await repository.vector_search(collection, vector, 50, filter)
    keyword_hits = await repository.keyword_search(
        collection, textsearch.query_terms(text), 50, filter, exact=min(top_k, HYBRID_KEYWORD_EXACT)
    )
    return fusion.relative_score([vector_hits, keyword_hits], (0.5, 0.5), top_k)


async def _tenant(seed) -> int:
    return seed.conn.execute("SELECT tenant_id FROM collections WHERE name = 'race'").fetchone()[0]


@pytest.mark.parametrize("query", QUERIES)
async def test_two_phases_answer_as_fusing_whole_hits(database_url, seed, corpus, query):
    tenant = await _tenant(seed)
    pool, repository, search = await _service(database_url)
    try:
        for top_k, filter in ((5, DocumentFilter()), (20, DocumentFilter()), (5, DocumentFilter(metadata={"group": "odd"}))):
            hits = await search.search(
                tenant, SearchQuery(collection="race", text=query, vector=None, mode=Mode.HYBRID, top_k=top_k, filter=filter)
            )
            assert _answer(hits) == _answer(await _one_phase(repository, tenant, query, top_k, filter))
            assert all(h.highlights for h in hits if set(h.text.split()) & set(query.split()))
    finally:
        await pool.close()


async def test_a_document_leaving_ready_between_the_phases_is_ranked_again(database_url, seed, corpus):
    tenant = await _tenant(seed)
    pool, repository, search = await _service(database_url, seed, changes=1)
    try:
        hits = await search.search(
            tenant,
            SearchQuery(collection="race", text="river bridge", vector=None, mode=Mode.HYBRID, top_k=5, filter=DocumentFilter()),
        )
        assert len(repository.left) == 1 and len(repository.fetches) == 2  # ranked again once
        assert repository.left[0] not in {h.document_id for h in hits}
        # Exactly the answer of a search after the change (the fused scores renormalised without it).
        assert _answer(hits) == _answer(await _one_phase(repository, tenant, "river bridge", 5))
        assert len(hits) == 5
    finally:
        await pool.close()


async def test_documents_leaving_ready_at_every_fetch_are_filled_from_the_next_candidates(database_url, seed, corpus):
    tenant = await _tenant(seed)
    pool, repository, search = await _service(database_url, seed, changes=service.HYBRID_ATTEMPTS)
    try:
        query = SearchQuery(
            collection="race", text="castle tower wall", vector=None, mode=Mode.HYBRID, top_k=5, filter=DocumentFilter()
        )
        hits = await search.search(tenant, query)
        assert len(repository.fetches) == service.HYBRID_ATTEMPTS
        assert len(repository.left) == service.HYBRID_ATTEMPTS
        assert not set(repository.left) & {h.document_id for h in hits}
        assert len(hits) == 5 and len({h.chunk_id for h in hits}) == 5
        # The last ranking's order, its missing chunks skipped: the fused candidates it asked for, in order.
        last = repository.fetches[-1]
        assert [h.chunk_id for h in hits] == [cid for cid in last if cid in {h.chunk_id for h in hits}][:5]
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    finally:
        await pool.close()


async def test_caps_thresholds_and_context_work_on_two_phase_hits(database_url, seed, corpus):
    tenant = await _tenant(seed)
    pool, _repository, search = await _service(database_url)
    try:
        options = ContextOptions(neighbor_chunks=1, max_hits_per_document=1)
        hits = await search.search(
            tenant,
            SearchQuery(
                collection="race",
                text="river bridge",
                vector=None,
                mode=Mode.HYBRID,
                top_k=4,
                filter=DocumentFilter(),
                context=options,
            ),
        )
        assert len(hits) == 4 and len({h.document_id for h in hits}) == 4
        for hit in hits:
            assert hit.text in hit.context and hit.filename == corpus[hit.document_id]
            assert hit.context_first_chunk_index == max(0, hit.chunk_index - 1)
    finally:
        await pool.close()


async def test_concurrent_status_changes_never_show_a_document_that_was_not_ready(database_url, seed, corpus):
    """Documents flap out of READY and back from another thread while HYBRID searches run: each
    answer is whole (top_k distinct chunks, best first) and never holds a document that stayed
    out of READY the whole time."""
    tenant = await _tenant(seed)
    pool, _repository, search = await _service(database_url)
    flapping = list(corpus)[:3]
    gone = list(corpus)[3]
    seed.set_status(gone, "EMBEDDING")
    stop = asyncio.Event()

    def flap() -> None:
        n = 0
        while not stop.is_set():
            doc = flapping[n % len(flapping)]
            seed.set_status(doc, "EMBEDDING")
            seed.set_status(doc, "READY")
            n += 1

    flapper = asyncio.get_running_loop().run_in_executor(None, flap)
    try:
        for n in range(40):
            query = QUERIES[n % len(QUERIES)]
            hits = await search.search(
                tenant,
                SearchQuery(collection="race", text=query, vector=None, mode=Mode.HYBRID, top_k=8, filter=DocumentFilter()),
            )
            assert len(hits) == 8 and len({h.chunk_id for h in hits}) == 8
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
            assert gone not in {h.document_id for h in hits}
    finally:
        stop.set()
        await flapper
        await pool.close()


RIVER_BRIDGE = SearchQuery(
    collection="race", text="river bridge", vector=None, mode=Mode.HYBRID, top_k=5, filter=DocumentFilter()
)


class GatedEmbedder:
    """The real hashing embedder, except that a query's embedding finishes only once the keyword
    side has started its statement (`started`), or fails with `error` once it has: HYBRID must
    run its keyword side beside the embedding, not after it."""

    def __init__(self, started: asyncio.Event, error: Exception | None = None) -> None:
        self.real = HashingEmbedder("hashing-v1", DIMENSIONS)
        self.started = started
        self.error = error

    async def embed_query(self, text: str) -> list[float]:
        await asyncio.wait_for(self.started.wait(), timeout=10)  # TimeoutError: the keyword side waited for us
        if self.error is not None:
            raise self.error
        return await self.real.embed_query(text)


class WatchedRepository(SearchRepository):
    """The real repository; says when a keyword ranking starts, and keeps its task to look at."""

    def __init__(self, pool) -> None:
        super().__init__(pool, collection_cache_seconds=0)
        self.started = asyncio.Event()
        self.keyword_tasks: list[asyncio.Task] = []

    async def keyword_candidates(self, *args, **kwargs):
        self.keyword_tasks.append(asyncio.current_task())
        self.started.set()
        return await super().keyword_candidates(*args, **kwargs)


async def test_the_keyword_side_runs_while_the_query_is_embedded(database_url, seed, corpus):
    tenant = await _tenant(seed)
    pool = await _pool(database_url)
    try:
        repository = WatchedRepository(pool)
        embedder = GatedEmbedder(repository.started)
        search = SearchService(repository, embedder_factory=lambda *_: embedder, document_weight=0.0)
        query = RIVER_BRIDGE
        hits = await search.search(tenant, query)
        assert _answer(hits) == _answer(await _one_phase(repository, tenant, "river bridge", 5))  # the answer as before
    finally:
        await pool.close()


async def test_a_failed_embedding_cancels_the_keyword_side_and_says_why(database_url, seed, corpus):
    from sluice_common.embedders import EmbeddingError
    from sluice_common.errors import Unavailable

    tenant = await _tenant(seed)
    pool = await _pool(database_url)
    try:
        repository = WatchedRepository(pool)
        down = EmbeddingError("the embedding service is down", code="EMBEDDING_UNAVAILABLE", retryable=True)
        search = SearchService(
            repository, embedder_factory=lambda *_: GatedEmbedder(repository.started, down), document_weight=0.0
        )
        query = RIVER_BRIDGE
        with pytest.raises(Unavailable, match="the embedding service is down"):
            await search.search(tenant, query)
        assert [task.done() for task in repository.keyword_tasks] == [True]  # nothing left running
        # and the pool has every connection back: four searches at once still answer
        search = SearchService(repository, document_weight=0.0)
        answers = await asyncio.gather(*(search.search(tenant, query) for _ in range(4)))
        assert all(len(a) == 5 for a in answers)
    finally:
        await pool.close()
