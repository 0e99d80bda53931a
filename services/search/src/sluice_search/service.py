"""The search use case: resolve the collection, embed the query, query, fuse, highlight."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

from sluice_common import textsearch
from sluice_common.embedders import Embedder, EmbeddingError, get_embedder
from sluice_common.errors import FailedPrecondition, NotFound, Unavailable
from sluice_common.reasons import Reason
from sluice_common.reranking import RerankerSpec

from . import context, explain, fusion, highlight, rerank
from .consistency import ReplayWaiter
from .domain import Collection, DocumentFilter, Hit, Mode, SearchQuery, check_dimensions

# The states of a generation a request may name (SearchRequest.generation): the one search
# serves, and a reindex's BUILDING one, to compare before it switches (docs/architecture.md,
# "Index generations"). RETIRED and CANCELLED ones are being or have been dropped.
SEARCHABLE_GENERATION_STATES = ("ACTIVE", "BUILDING")


class Repository(Protocol):
    async def get_collection(self, tenant_id: int, name: str, *, fresh: bool = False) -> Collection | None: ...

    async def vector_search(
        self, collection: Collection, vector: Sequence[float], limit: int, filter: DocumentFilter
    ) -> list[Hit]: ...

    async def explained_vector_search(
        self, collection: Collection, vector: Sequence[float], limit: int, filter: DocumentFilter, terms: Sequence[str]
    ) -> tuple[list[Hit], dict[int, explain.Details]]: ...

    async def keyword_search(
        self, collection: Collection, terms: Sequence[str], limit: int, filter: DocumentFilter, exact: int | None = None
    ) -> list[Hit]: ...

    async def vector_candidates(
        self,
        collection: Collection,
        vector: Sequence[float],
        limit: int,
        filter: DocumentFilter,
        *,
        document_weight: float = 0.0,
        depth: int = 0,
    ) -> list[tuple[int, float]]: ...

    async def keyword_candidates(
        self,
        collection: Collection,
        terms: Sequence[str],
        limit: int,
        filter: DocumentFilter,
        exact: int | None = None,
        weights_used: dict[str, float] | None = None,
    ) -> list[tuple[int, float]]: ...

    async def hits_by_id(self, collection: Collection, chunk_ids: Sequence[int], filter: DocumentFilter) -> dict[int, Hit]: ...

    async def numbered_generation(self, tenant_id: int, name: str, number: int) -> tuple[Collection | None, str] | None: ...

    async def explained_hits_by_id(
        self, collection: Collection, chunk_ids: Sequence[int], filter: DocumentFilter, wanted: explain.Wanted
    ) -> tuple[dict[int, Hit], dict[int, explain.Details]]: ...

    async def explained_keyword_search(
        self, collection: Collection, terms: Sequence[str], limit: int, filter: DocumentFilter
    ) -> tuple[list[Hit], dict[int, explain.Details]]: ...

    async def embedders_in_use(self) -> list[tuple[str, str, int]]: ...

    async def chunk_texts(
        self, collection: Collection, windows: Sequence[tuple[str, int, int]]
    ) -> dict[tuple[str, int], str]: ...


EmbedderFactory = Callable[[str, str, int], Embedder]

# HYBRID ranks ids and scores, then reads the fused answer's rows (_hybrid): when a chosen chunk
# is gone by then (its document left READY between the two statements), the ranking is run again
# this many times in all, the last time filling from the next fused candidates.
HYBRID_ATTEMPTS = 3
# HYBRID's keyword list is exactly BM25's for its first this many (at most top_k) hits, the rest
# the best of the chunks scored by then (keyword.py): at 100,000 chunks a head of 5 instead of 10
# left the keyword top 10 the same for 98.8 % of queries (overlap 0.999) and every eval set's
# answers the same, for 10 % of HYBRID's p50 and a third of its p99 (docs/search.md, "Exact head,
# approximate tail").
HYBRID_KEYWORD_EXACT = 5


class SearchService:
    def __init__(
        self,
        repository: Repository,
        *,
        embedder_factory: EmbedderFactory = get_embedder,
        hybrid_candidates: int = 50,
        rrf_k: int = 60,
        fusion_method: str = "relative_score",
        vector_weight: float = 0.5,
        document_weight: float = 0.2,
        document_depth: int = 50,
        foreign_vector_weight: float = 0.1,
        rerankers: rerank.Rerankers | None = None,
        replay: ReplayWaiter | None = None,
    ) -> None:
        self._repository = repository
        self._replay = replay
        self._rerankers = rerankers or rerank.Rerankers()
        self._embedder_factory = embedder_factory
        self._hybrid_candidates = hybrid_candidates
        self._rrf_k = rrf_k
        self._fusion_method = fusion_method
        self._vector_weight = vector_weight
        self._document_weight = document_weight
        self._document_depth = document_depth
        self._foreign_vector_weight = foreign_vector_weight
        self._warmed: set[tuple[str, str, int]] = set()
        self._segmenter_warm = False

    async def close(self) -> None:
        await self._rerankers.close()

    async def warm_up(self) -> int:
        """Load every embedder the collections use that is not loaded yet, so that no query
        pays for it (the local model takes seconds to load). Returns how many were loaded."""
        if not self._segmenter_warm:
            await asyncio.to_thread(textsearch.query_terms, "预热 warm-up")  # loads jieba's dictionary
            self._segmenter_warm = True
        loaded = 0
        for key in await self._repository.embedders_in_use():
            provider, model, dimensions = key
            if key in self._warmed or provider == "openai":
                continue  # nothing to load for an API, and no reason to spend a paid call
            await self._embedder_factory(provider, model, dimensions).embed_query("warm-up")
            self._warmed.add(key)
            loaded += 1
        return loaded

    async def search(self, tenant_id: int, query: SearchQuery) -> list[Hit]:
        """Search the caller's tenant's collection (another tenant's answers NOT_FOUND)."""
        hits, _ = await self.search_generation(tenant_id, query)
        return hits

    async def search_generation(self, tenant_id: int, query: SearchQuery) -> tuple[list[Hit], Collection]:
        hits, collection, _ = await self.answer(tenant_id, query)
        return hits, collection

    async def answer(
        self, tenant_id: int, query: SearchQuery, *, after_lsn: int | None = None, time_remaining: float | None = None
    ) -> tuple[list[Hit], Collection, rerank.RerankOutcome]:
        """The hits, the collection generation that answered, and what reranking did.

        The collection comes from a cache that notifications invalidate; an answer shorter than
        top_k is the one a stale entry could have caused (a deleted or recreated collection, a
        retired generation already dropped), so it is checked against the database and, if the
        collection changed meanwhile, asked again once.

        `after_lsn` (a consistency token's): every connection the search uses must first show
        that point, waited for within `time_remaining` (consistency.py); the collection is then
        read afresh, since a replica gets no notifications to keep the cache current."""
        if after_lsn is None or self._replay is None:
            return await self._answer(tenant_id, query, fresh=False)
        requirement = self._replay.require(after_lsn, time_remaining)
        try:
            return await self._answer(tenant_id, query, fresh=True)
        finally:
            self._replay.release(requirement)

    async def _answer(
        self, tenant_id: int, query: SearchQuery, *, fresh: bool
    ) -> tuple[list[Hit], Collection, rerank.RerankOutcome]:
        if query.generation:
            collection = await self._resolve_generation(tenant_id, query.collection, query.generation)
        else:
            collection = await self._resolve(tenant_id, query.collection, fresh=fresh)
        reranker = rerank.choose(collection.reranker, query.rerank)
        # The first stage may be asked for more than top_k: what follows it can drop hits or
        # reorder them (context.py, rerank.py).
        first = dataclasses.replace(
            query, top_k=context.candidates(query.top_k, query.context, reranker.candidates if reranker else 0)
        )
        hits = await self._search(collection, first)
        # Short of what was asked (the candidates may be many more): the cached ACTIVE generation
        # may be stale. A generation the request named was read afresh and stays the one searched.
        if len(hits) < query.top_k and not query.generation:
            current = await self._resolve(tenant_id, query.collection, fresh=True)
            if (current.id, current.generation_id) != (collection.id, collection.generation_id):
                collection = current
                hits = await self._search(collection, first)
        hits, outcome = await self._finish(collection, query, hits, reranker)
        return hits, collection, outcome

    async def search_collection(self, collection: Collection, query: SearchQuery) -> list[Hit]:
        """The hits of `query` on this very collection object, whichever generation it names, by
        the path `answer` takes but without the collection's reranker: the reindex quality gate
        compares two generations with it (eval_gate.py), and the reranker, the same on both
        sides, would only add its cost and its time budget's randomness."""
        hits = await self._search(collection, dataclasses.replace(query, top_k=context.candidates(query.top_k, query.context, 0)))
        hits, _ = await self._finish(collection, query, hits, None)
        return hits

    async def _finish(
        self, collection: Collection, query: SearchQuery, hits: list[Hit], reranker: RerankerSpec | None
    ) -> tuple[list[Hit], rerank.RerankOutcome]:
        """After the first stage: the threshold, the reranker, the cap per document, top_k, the
        neighbours (context.py, rerank.py); and with `explain`, the explanations' last figures
        (explain.py)."""
        for hit in hits:
            hit.first_stage_score = hit.score
        if query.explain:
            explain.first_stage(hits)
        outcome = rerank.RerankOutcome()
        if reranker is not None:
            passed = context.select(hits, len(hits), dataclasses.replace(query.context, max_hits_per_document=0))
            candidates = passed[: max(reranker.candidates, query.top_k)]
            hits, outcome = await self._rerankers.rerank(reranker, query.text, candidates)
            threshold = query.rerank.min_score if query.rerank is not None else None
            if outcome.status == rerank.APPLIED and threshold is not None:
                hits = [hit for hit in hits if hit.rerank_score >= threshold]
        hits = context.select(hits, query.top_k, query.context)
        if query.explain:
            explain.reranked(hits, outcome.status, outcome.status == rerank.APPLIED)
        if query.context.neighbor_chunks and hits:
            texts = await self._repository.chunk_texts(collection, context.windows(hits, query.context.neighbor_chunks))
            context.attach(hits, query.context.neighbor_chunks, texts, collection.chunk_overlap)
        return hits, outcome

    async def _resolve(self, tenant_id: int, name: str, *, fresh: bool) -> Collection:
        collection = await self._repository.get_collection(tenant_id, name, fresh=fresh)
        if collection is None:
            raise NotFound(f"collection {name!r} does not exist", reason=Reason.COLLECTION_NOT_FOUND, collection=name)
        return collection

    async def _resolve_generation(self, tenant_id: int, name: str, number: int) -> Collection:
        """The collection resolved to the generation the request named: ACTIVE or BUILDING (a
        reindex's, embedded with its own embedder and holding the chunks of the READY documents
        embedded into it so far); read afresh every time (repository.numbered_generation)."""
        found = await self._repository.numbered_generation(tenant_id, name, number)
        if found is None:
            raise NotFound(f"collection {name!r} does not exist", reason=Reason.COLLECTION_NOT_FOUND, collection=name)
        collection, state = found
        if collection is None:
            raise NotFound(f"collection {name!r} has no generation {number}", reason=Reason.GENERATION_NOT_FOUND, collection=name)
        if state not in SEARCHABLE_GENERATION_STATES:
            raise FailedPrecondition(
                f"generation {number} of collection {name!r} is {state}: only the ACTIVE generation and a reindex's"
                " BUILDING one can be searched",
                reason=Reason.GENERATION_NOT_SEARCHABLE,
                collection=name,
            )
        return collection

    async def _search(self, collection: Collection, query: SearchQuery) -> list[Hit]:
        if query.vector is not None:
            check_dimensions(query.vector, collection)

        if query.mode is Mode.VECTOR:
            vector = query.vector or await self._embed(collection, query.text)
            if query.explain and query.text:
                # The words each hit holds come with the rows (explained_vector_search).
                hits, details = await self._repository.explained_vector_search(
                    collection, vector, query.top_k, query.filter, textsearch.query_terms(query.text)
                )
                explain.single_list(hits, vector=True)
                explain.complete(hits, details)
                return hits
            hits = await self._repository.vector_search(collection, vector, query.top_k, query.filter)
            if query.explain:
                explain.single_list(hits, vector=True)
            return hits

        terms = textsearch.query_terms(query.text)
        if query.mode is Mode.KEYWORD and query.explain:
            # The words each hit holds come with the rows (explained_keyword_search).
            hits, details = await self._repository.explained_keyword_search(collection, terms, query.top_k, query.filter)
            explain.single_list(hits, vector=False)
            explain.complete(hits, details)
        elif query.mode is Mode.KEYWORD:
            hits = await self._repository.keyword_search(collection, terms, query.top_k, query.filter)
        else:
            hits = await self._hybrid(collection, query, query.vector, terms)
        for hit in hits:
            hit.highlights = highlight.highlight_spans(hit.text, terms)
        return hits

    async def _hybrid(
        self, collection: Collection, query: SearchQuery, vector: Sequence[float] | None, terms: Sequence[str]
    ) -> list[Hit]:
        """Both rankings as (chunk id, score), fused, then the rows of the fused top_k alone, in
        one statement that checks READY, the generation, the tenant and the filter again.

        A chunk ranked but missing from the rows left the answer between the two statements (its
        document stopped being READY, or was deleted). The answer is then ranked again, as the
        single statement of the old path would have ranked it a moment later: removing a
        candidate moves the others' normalised scores (relative score) or ranks (RRF), and lets
        in one more candidate at each list's tail, so the next fused candidate is not always
        the right one. After HYBRID_ATTEMPTS rankings that each lost a chunk (documents leaving
        READY faster than a query runs), the last one's top_k is filled from its next candidates."""
        candidates = max(query.top_k, self._hybrid_candidates)
        share = self._vector_share(collection, query.text)
        for attempt in range(1, HYBRID_ATTEMPTS + 1):
            # With explain, the weights the keyword side scored with score the hits it did not rank.
            weights: dict[str, float] | None = {} if query.explain else None
            vector, vector_ranked, keyword_ranked = await self._both_sides(collection, query, vector, terms, candidates, weights)
            lists = [[_ranked(cid, score) for cid, score in ranked] for ranked in (vector_ranked, keyword_ranked)]
            fused, parts = self._fuse(lists[0], lists[1], len(vector_ranked) + len(keyword_ranked), share)
            last = attempt == HYBRID_ATTEMPTS
            wanted = fused if last else fused[: query.top_k]
            ids = [hit.chunk_id for hit in wanted]
            if query.explain:
                # What the explanations need beyond the lists is read with the rows (explain.py).
                rows, details = await self._repository.explained_hits_by_id(
                    collection,
                    ids,
                    query.filter,
                    self._explain_wanted(ids, vector, vector_ranked, keyword_ranked, weights),
                )
            else:
                rows = await self._repository.hits_by_id(collection, ids, query.filter)
            if last or len(rows) == len(wanted):
                break
        hits = []
        for ranked in wanted:
            row = rows.get(ranked.chunk_id)
            if row is not None:
                row.score = ranked.score
                hits.append(row)
        hits = hits[: query.top_k]
        if query.explain:
            # With document context the vector list ranked by a blend of the chunk's and its
            # document's similarity: the chunk's own is read for the answer (explain.py).
            explain.hybrid(
                hits, vector_ranked, keyword_ranked, parts, share, vector_scores_are_similarities=self._document_weight <= 0
            )
            explain.complete(hits, details)
        return hits

    def _explain_wanted(
        self,
        ids: Sequence[int],
        vector: Sequence[float] | None,
        vector_ranked: Sequence[tuple[int, float]],
        keyword_ranked: Sequence[tuple[int, float]],
        weights: dict[str, float] | None,
    ) -> explain.Wanted:
        """What HYBRID's explanations must read of these chunks: a keyword score where a chunk
        was no keyword candidate; a similarity where one was no vector candidate, or for every
        chunk when document context blended the vector list's scores."""
        keyword_ids = {cid for cid, _ in keyword_ranked}
        vector_ids = {cid for cid, _ in vector_ranked}
        similarities = self._document_weight > 0 or any(cid not in vector_ids for cid in ids)
        return explain.Wanted(
            weights or {}, keyword_scores=any(cid not in keyword_ids for cid in ids), vector=vector if similarities else None
        )

    async def _both_sides(
        self,
        collection: Collection,
        query: SearchQuery,
        vector: Sequence[float] | None,
        terms: Sequence[str],
        candidates: int,
        weights_used: dict[str, float] | None = None,
    ) -> tuple[Sequence[float], list[tuple[int, float]], list[tuple[int, float]]]:
        """The query's vector and both rankings, side by side. The keyword side needs no vector,
        so it starts at once, while the query is embedded (a text query's first ranking): the
        vector side takes its connection only once it has its vector, so no connection waits on
        a model, and a HYBRID search costs the embedding or the keyword ranking, whichever is
        longer, rather than both (docs/search.md, "Latency at 100,000 chunks"). If either side
        fails, the other is cancelled and awaited before the error goes on."""
        # Only the head must be exact: the tail is the best scored so far (keyword.py, HYBRID_KEYWORD_EXACT).
        keyword_side = asyncio.ensure_future(
            self._repository.keyword_candidates(
                collection,
                terms,
                candidates,
                query.filter,
                exact=min(query.top_k, HYBRID_KEYWORD_EXACT),
                weights_used=weights_used,
            )
        )
        try:
            if vector is None:
                vector = await self._embed(collection, query.text)
            vector_ranked = await self._repository.vector_candidates(
                collection,
                vector,
                candidates,
                query.filter,
                document_weight=self._document_weight,
                depth=self._document_depth,
            )
            keyword_ranked = await keyword_side
        except BaseException:
            keyword_side.cancel()
            await asyncio.wait([keyword_side])
            raise
        return vector, vector_ranked, keyword_ranked

    def _vector_share(self, collection: Collection, text: str) -> float:
        """The vector list's weight in HYBRID: the configured one, except for a query in another
        script than Latin against an English-only model, whose vectors are noise (fusion.py)."""
        if fusion.english_only(collection) and fusion.mostly_non_latin(text):
            return min(self._vector_weight, self._foreign_vector_weight)
        return self._vector_weight

    def _fuse(
        self, vector_hits: list[Hit], keyword_hits: list[Hit], top_k: int, vector_weight: float
    ) -> tuple[list[Hit], fusion.Parts]:
        """The fused candidates, best first, and each one's parts of its fused score (vector, keyword)."""
        lists = [vector_hits, keyword_hits]
        weights = (vector_weight, 1.0 - vector_weight)
        if self._fusion_method == "relative_score":
            parts = fusion.relative_score_parts(lists, weights)
        else:
            # Weights around 1 each, so that rrf_k keeps its usual meaning.
            parts = fusion.reciprocal_rank_parts(lists, [2 * w for w in weights], self._rrf_k)
        return fusion.fused(lists, parts, top_k), parts

    async def _embed(self, collection: Collection, text: str) -> list[float]:
        try:
            embedder = self._embedder_factory(collection.embedder_provider, collection.embedder_model, collection.dimensions)
            vector = await embedder.embed_query(text)
        except EmbeddingError as err:
            error = Unavailable if err.retryable else FailedPrecondition
            raise error(f"the query could not be embedded: {err.message}", reason=err.code) from err
        if len(vector) != collection.dimensions:
            raise FailedPrecondition(
                f"the embedder of collection {collection.name!r} made a {len(vector)}-dimensional vector, "
                f"the collection has {collection.dimensions}",
                reason=Reason.EMBEDDER_DIMENSION_MISMATCH,
            )
        return vector


def _ranked(chunk_id: int, score: float) -> Hit:
    """A candidate as fusion sees it: an id and a score (the row is read after fusion)."""
    return Hit(
        chunk_id=chunk_id,
        text="",
        score=score,
        document_id="",
        filename="",
        chunk_index=0,
        page_number=0,
        element_type="",
        metadata={},
    )
