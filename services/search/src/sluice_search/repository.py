"""The read-only queries of search: resolve a collection, find the nearest or best-matching READY
chunks, read hits and their neighbours. The statements are built in the *_sql modules (and
keyword.py), the rows read by name (rows.py), the sessions held to a tenant (db.py).

Every query joins `documents` and keeps `d.status = 'READY'` in its WHERE clause (rule 3 of
docs/architecture.md#the-rules): a document being ingested, reprocessed, failed or deleted is
invisible to the very next query, with no cache in between. Only the collection lookup is cached,
briefly (collection_cache.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg import sql
from sluice_common import textsearch, vector_index

from . import collection_sql, explain, keyword, metrics, rows
from .chunk_sql import chunk_texts_query, hits_by_id_query
from .collection_cache import CollectionCache
from .db import ConnectionSource, TenantSessions
from .domain import Collection, DocumentFilter, Hit
from .filter_sql import filter_sql
from .rows import (
    BM25_COLUMN,
    HIT_COLUMNS,
    ID_COLUMNS,
    ID_DOCUMENT_COLUMNS,
    WORD_COLUMNS,
    ChunkTextRow,
    CollectionRow,
    DocumentCandidateRow,
    EmbedderRow,
    ExplainedHitRow,
    HitRow,
    KeywordCandidateRow,
    KeywordHitRow,
    KeywordWordsHitRow,
    NumberedCollectionRow,
    VectorCandidateRow,
    VectorHitRow,
    VectorWordsHitRow,
)
from .vector_sql import EXACT_FILTER_WALK_COST, selective_vector_query, vector_query, with_document_similarity

log = logging.getLogger("sluice.search.repository")


class Nearest(Protocol):
    """A row of a VECTOR statement: the chunk id, and its exact cosine distance to the query."""

    @property
    def id(self) -> int: ...

    @property
    def distance(self) -> float: ...


N = TypeVar("N", bound=Nearest)
K = TypeVar("K", bound=keyword.Ranked)


class SearchRepository:
    def __init__(
        self,
        pool: ConnectionSource,
        *,
        collection_cache_seconds: float = 5.0,
        exact_filter_max_chunks: int = 2000,
        exact_filter_walk_cost: float = EXACT_FILTER_WALK_COST,
        binary_rescore_candidates: int = 100,
    ) -> None:
        self._pool = pool
        self._sessions = TenantSessions(pool)
        # Kept current by a collection_cache.CollectionListener where one runs (main.py).
        self.collections = CollectionCache(collection_cache_seconds)
        self._exact_filter_walk_cost = exact_filter_walk_cost
        self._binary_rescore_candidates = binary_rescore_candidates
        self._exact_filter_max_chunks = exact_filter_max_chunks

    async def get_collection(self, tenant_id: int, name: str, *, fresh: bool = False) -> Collection | None:
        """The tenant's collection named `name` resolved to its ACTIVE generation, from a cache
        that LISTEN/NOTIFY invalidates (and that expires after a few seconds regardless);
        `fresh` reads the database."""
        now = time.monotonic()
        key = (tenant_id, name)
        if not fresh and (cached := self.collections.get(key, now)) is not None:
            return cached
        async with self._sessions.session(tenant_id) as conn:
            row = await rows.fetch_one(conn, collection_sql.ACTIVE_SQL, (tenant_id, name), rows.named(CollectionRow))
        if row is None:
            self.collections.drop(key)
            return None
        collection = row.collection()
        self.collections.put(key, now, collection)
        return collection

    async def generation_collection(self, tenant_id: int, name: str, generation_id: int) -> Collection | None:
        """The tenant's collection resolved to one given generation (ACTIVE or BUILDING), never
        cached: the reindex quality gate searches both sides of a reindex through it
        (eval_gate.py). None when the collection or the generation is gone."""
        async with self._sessions.session(tenant_id) as conn:
            row = await rows.fetch_one(
                conn, collection_sql.GENERATION_SQL, (tenant_id, name, generation_id), rows.named(CollectionRow)
            )
        return None if row is None else row.collection()

    async def numbered_generation(self, tenant_id: int, name: str, number: int) -> tuple[Collection | None, str] | None:
        """The tenant's collection resolved to the generation numbered `number`, whatever its
        state, and that state (SearchRequest.generation): None when there is no such collection,
        (None, "") when it has no such generation. Never cached: a reindex's BUILDING generation
        changes state (ACTIVE, CANCELLED) and the next search must see it, and a generation
        named by the request never takes the place of the cached ACTIVE one."""
        async with self._sessions.session(tenant_id) as conn:
            row = await rows.fetch_one(
                conn, collection_sql.NUMBERED_SQL, (number, tenant_id, name), rows.named(NumberedCollectionRow)
            )
        if row is None:
            return None
        if row.state is None:
            return None, ""
        return row.collection(), row.state

    async def embedders_in_use(self) -> list[tuple[str, str, int]]:
        """Every tenant's embedders, for warm-up (collection_sql.EMBEDDERS_SQL)."""
        async with self._pool.connection() as conn:
            found = await rows.fetch(conn, collection_sql.EMBEDDERS_SQL, None, rows.named(EmbedderRow))
        return [(row.provider, row.model, int(row.dimensions)) for row in found]

    async def vector_search(
        self, collection: Collection, vector: Sequence[float], limit: int, filter: DocumentFilter
    ) -> list[Hit]:
        """The `limit` READY chunks nearest to `vector` by cosine distance, best first.

        A selective filter (its READY documents hold at most `exact_filter_max_chunks` chunks)
        is answered exactly from those documents' chunks: the documents come from the filter
        (the GIN index on their metadata serves EQ, IN and EXISTS), their chunks from the
        (document, generation, index) key, and no graph walk has to pass over the chunks the
        filter rejects (docs/search.md, "Filters"). Otherwise, through the collection's partial
        HNSW index with an iterative scan; if that comes back short (the filter or the READY
        join rejected more than the scan budget), an exact scan answers, so the result is
        always min(limit, matching READY chunks).
        """
        found = await self._vector_rows(collection, vector, limit, filter, HIT_COLUMNS, VectorHitRow)
        return [row.hit(1.0 - float(row.distance)) for row in found]

    async def explained_vector_search(
        self, collection: Collection, vector: Sequence[float], limit: int, filter: DocumentFilter, terms: Sequence[str]
    ) -> tuple[list[Hit], dict[int, explain.Details]]:
        """vector_search, and in the same statement which of the query's words (`terms`, as the
        index stems them) each hit holds: the hit's BM25 vector and the query's stemmed words
        are two more columns (the words an InitPlan, computed once), matched here by the words'
        dimensions, as explain_sql matches them (explain.py)."""
        text = " ".join(t for t in dict.fromkeys(terms) if textsearch.tsquery_text([t]))
        found = await self._vector_rows(
            collection, vector, limit, filter, HIT_COLUMNS + WORD_COLUMNS, VectorWordsHitRow, params={"kw_text": text}
        )
        details = {}
        dims: dict[str, int] = {}  # the query's words are the same in every row
        for row in found:
            held = set(row.search_bm25.indices()) if row.search_bm25 is not None else set()
            words = row.query_words or ()
            if not dims:
                dims = {word: keyword.term_dim(word) - 1 for word in words}
            matched = [word for word in words if dims[word] in held]
            details[row.id] = explain.Details(keyword_score=None, vector_similarity=None, matched_terms=matched)
        return [row.hit(1.0 - float(row.distance)) for row in found], details

    async def vector_candidates(
        self,
        collection: Collection,
        vector: Sequence[float],
        limit: int,
        filter: DocumentFilter,
        *,
        document_weight: float = 0.0,
        depth: int = 0,
    ) -> list[tuple[int, float]]:
        """vector_search's answer as (chunk id, score) alone (HYBRID's first phase).

        With a `document_weight` w > 0, the nearest max(limit, `depth`) chunks are scored
        (1 - w) x their own cosine similarity + w x their document's (its vector, the normalised
        mean of its chunks': docs/search.md, "Document context"), and the best `limit` of them
        by that score are the answer."""
        if document_weight <= 0.0:
            found = await self._vector_rows(collection, vector, limit, filter, ID_COLUMNS, VectorCandidateRow)
            return [(row.id, 1.0 - float(row.distance)) for row in found]

        def with_similarity(query: sql.Composed) -> sql.Composed:
            return with_document_similarity(collection, query)

        async with self._sessions.session(collection.tenant_id) as conn:
            candidates = await self._vector_rows_on(
                conn,
                collection,
                vector,
                max(limit, depth),
                filter,
                ID_DOCUMENT_COLUMNS,
                DocumentCandidateRow,
                wrap=with_similarity,
            )
        scored = []
        for row in candidates:
            own = 1.0 - float(row.distance)
            context = row.document_similarity
            score = own if context is None else (1.0 - document_weight) * own + document_weight * float(context)
            scored.append((row.id, score))
        scored.sort(key=lambda pair: (-pair[1], pair[0]))
        return scored[:limit]

    async def _vector_rows(
        self,
        collection: Collection,
        vector: Sequence[float],
        limit: int,
        filter: DocumentFilter,
        columns: sql.Composable,
        row: type[N],
        *,
        params: dict[str, Any] | None = None,
    ) -> list[N]:
        """vector_search's rows: `columns` then the distance, as `row`s, best first; `params`, the
        parameters `columns` names."""
        async with self._sessions.session(collection.tenant_id) as conn:
            return await self._vector_rows_on(conn, collection, vector, limit, filter, columns, row, params=params)

    async def _vector_rows_on(
        self,
        conn: psycopg.AsyncConnection,
        collection: Collection,
        vector: Sequence[float],
        limit: int,
        filter: DocumentFilter,
        columns: sql.Composable,
        row: type[N],
        *,
        wrap: Callable[[sql.Composed], sql.Composed] = lambda query: query,
        params: dict[str, Any] | None = None,
    ) -> list[N]:
        """_vector_rows on a tenant session; each statement passed through `wrap` (which may add
        columns after `columns` and the distance, as `row` declares them)."""
        more = params or {}
        if filter and self._exact_filter_max_chunks > 0:
            query, params = selective_vector_query(
                collection,
                vector,
                limit,
                filter,
                self._exact_filter_max_chunks,
                walk_cost=self._exact_filter_walk_cost,
                columns=columns,
            )
            selected = await rows.fetch(conn, wrap(query), {**params, **more}, rows.filtered(row))
            counts = selected[0]
            if counts.documents <= counts.cap and counts.chunks <= counts.cap:
                metrics.FILTER_PLANS.labels("exact").inc()
                hits = [s.row for s in selected if s.row is not None]
                hits.sort(key=lambda r: (r.distance, r.id))
                return hits
        if filter:
            metrics.FILTER_PLANS.labels("graph").inc()
        indexed, statement_params = vector_query(
            collection, vector, limit, filter, columns=columns, rescore_candidates=self._binary_rescore_candidates
        )
        found = await rows.fetch(conn, wrap(indexed), {**statement_params, **more}, rows.named(row))
        if len(found) < limit:
            exact, statement_params = vector_query(collection, vector, limit, filter, exact=True, columns=columns)
            metrics.EXACT_FALLBACKS.inc()
            found = await rows.fetch(conn, wrap(exact), {**statement_params, **more}, rows.named(row))
            log.debug("exact vector fallback", extra={"collection_id": collection.id, "rows": len(found)})
        # relaxed_order: the index hands rows back nearly sorted; the final order is exact.
        found.sort(key=lambda r: (r.distance, r.id))
        return found

    async def hits_by_id(self, collection: Collection, chunk_ids: Sequence[int], filter: DocumentFilter) -> dict[int, Hit]:
        """The hits of these chunks (HYBRID's second phase), score 0, keyed by chunk id; a chunk
        whose document is no longer READY or no longer passes the filter, or that left the
        collection's generation or the tenant since it was ranked, is missing (service.py
        decides what then). One statement, under the same rules as every search."""
        if not chunk_ids:
            return {}
        query, params, _ = hits_by_id_query(collection, chunk_ids, filter, None)
        async with self._sessions.session(collection.tenant_id) as conn:
            found = await rows.fetch(conn, query, params, rows.named(HitRow))
        return {row.id: row.hit(0.0) for row in found}

    async def explained_hits_by_id(
        self, collection: Collection, chunk_ids: Sequence[int], filter: DocumentFilter, wanted: explain.Wanted
    ) -> tuple[dict[int, Hit], dict[int, explain.Details]]:
        """hits_by_id, and in the same statement what an explanation reads of each chunk
        (explain_sql.explain_columns): an explained HYBRID search costs no statement more than a plain one."""
        if not chunk_ids:
            return {}, {}
        query, params, words = hits_by_id_query(collection, chunk_ids, filter, wanted)
        async with self._sessions.session(collection.tenant_id) as conn:
            found = await rows.fetch(conn, query, params, rows.named(ExplainedHitRow))
        return {row.id: row.hit(0.0) for row in found}, {row.id: row.details(words) for row in found}

    async def chunk_texts(self, collection: Collection, windows: Sequence[tuple[str, int, int]]) -> dict[tuple[str, int], str]:
        """The texts of the chunks in each (document, first, last chunk index) window, of READY
        documents, from the collection's generation (context.py), keyed by (document, index)."""
        if not windows:
            return {}
        query, params = chunk_texts_query(collection, windows)
        async with self._sessions.session(collection.tenant_id) as conn:
            found = await rows.fetch(conn, query, params, rows.named(ChunkTextRow))
        return {(row.document_id, row.chunk_index): row.text for row in found}

    async def keyword_search(
        self, collection: Collection, terms: Sequence[str], limit: int, filter: DocumentFilter, exact: int | None = None
    ) -> list[Hit]:
        """The `limit` READY chunks that contain any of `terms`, by BM25 score, the first `exact`
        of them (all by default) exactly BM25's best (keyword.py)."""
        found = await self._keyword_rows(collection, terms, limit, filter, HIT_COLUMNS, KeywordHitRow, exact)
        return [row.hit(float(row.rank)) for row in found]

    async def explained_keyword_search(
        self, collection: Collection, terms: Sequence[str], limit: int, filter: DocumentFilter
    ) -> tuple[list[Hit], dict[int, explain.Details]]:
        """keyword_search, and in the same statements which of the words its side weighed each
        hit holds: the hit's BM25 vector is one more column, matched here by the words'
        dimensions, as explain_sql matches them (explain.py)."""
        weights: dict[str, float] = {}
        found = await self._keyword_rows(
            collection, terms, limit, filter, HIT_COLUMNS + BM25_COLUMN, KeywordWordsHitRow, None, weights
        )
        dims = {word: keyword.term_dim(word) - 1 for word in sorted(weights)}
        details = {}
        for row in found:
            held = set(row.search_bm25.indices()) if row.search_bm25 is not None else set()
            matched = [word for word, dim in dims.items() if dim in held]
            details[row.id] = explain.Details(keyword_score=None, vector_similarity=None, matched_terms=matched)
        return [row.hit(float(row.rank)) for row in found], details

    async def keyword_candidates(
        self,
        collection: Collection,
        terms: Sequence[str],
        limit: int,
        filter: DocumentFilter,
        exact: int | None = None,
        weights_used: dict[str, float] | None = None,
    ) -> list[tuple[int, float]]:
        """keyword_search's answer as (chunk id, score) alone (HYBRID's first phase); the words'
        weights it scored with go to `weights_used`, when given (keyword.search)."""
        found = await self._keyword_rows(collection, terms, limit, filter, ID_COLUMNS, KeywordCandidateRow, exact, weights_used)
        return [(row.id, float(row.rank)) for row in found]

    async def _keyword_rows(
        self,
        collection: Collection,
        terms: Sequence[str],
        limit: int,
        filter: DocumentFilter,
        columns: sql.Composable,
        row: type[K],
        exact: int | None,
        weights_used: dict[str, float] | None = None,
    ) -> list[K]:
        """keyword.search over the collection's generation and tenant, on a tenant session."""
        where, params = filter_sql(filter)
        async with self._sessions.session(collection.tenant_id) as conn:
            return await keyword.search(
                conn,
                collection.generation_id,
                terms,
                limit,
                self._keyword_scope(collection),
                columns,
                where,
                params,
                row,
                exact,
                weights_used,
            )

    @staticmethod
    def _keyword_scope(collection: Collection) -> sql.Composable:
        return sql.SQL("{pred} AND c.tenant_id = {tid}").format(
            pred=vector_index.generation_predicate(collection.generation_id), tid=sql.Literal(int(collection.tenant_id))
        )


__all__ = ["SearchRepository"]
