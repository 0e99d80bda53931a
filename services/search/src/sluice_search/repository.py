"""SQL adapter: collection lookup and the vector and keyword queries, read-only.

Every query joins `documents` and keeps `d.status = 'READY'` in its WHERE clause (rule 3
of docs/architecture.md#the-rules): a document being ingested, reprocessed, failed or deleted is invisible to the
very next query, with no cache in between. Only the collection lookup is cached, briefly.

Tenancy twice (docs/architecture.md#tenancy-and-access): every query names the caller's tenant in its SQL, and runs on a
session whose `sluice.tenant_id` is that tenant, which PostgreSQL's row-level security
policies for search's role filter on (migration 0004), so even a query that forgot the tenant
cannot cross it, and a session that set none sees nothing. The setting is made per session,
not per transaction: a connection remembers the tenant it was set to and is set again only
when the next query is another tenant's. Setting it in a transaction around every query cost
0.37 ms of a 1.0 ms query (bench/search_bench.py); this way a query stays one round trip.

Generation id, dimension and LIMIT are SQL literals (they come from our own table and from a
validated integer), so the planner can match the per-generation partial HNSW index
(sluice_common.vector_index); everything a client sends is a bound parameter. Because the
index's predicate is a literal in the text, a prepared statement's generic plan still matches
the partial index (tests/search: test_partial_index_survives_a_generic_plan), so statements
are prepared after a few runs: planning is a fifth of a 3 ms query at 100k x 384.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import numpy as np
import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from sluice_common import textsearch, vector_index
from sluice_common.db import check_if_idle, mark_returned
from sluice_common.reranking import RerankerSpec
from sluice_common.tasks import end_if_cancelled, pause
from sluice_common.vector_index import FLOAT4

from . import explain, keyword, metrics
from .domain import Collection, DocumentFilter, Hit
from .filter_sql import filter_sql

log = logging.getLogger("sluice.search.repository")

_SET_TENANT = "SELECT set_config('sluice.tenant_id', %s, false)"

# A filtered VECTOR search scores the filter's chunks exactly while they number at most
# max(SLUICE_SEARCH_EXACT_FILTER_MAX_CHUNKS, sqrt(walk cost x ef_search x the generation's chunks)),
# capped at the ceiling (selective_vector_query). The walk cost is where the two plans crossed
# in bench/search_bench.py's filter sweep (docs/search.md, "Filters"): about 5,500 filtered chunks
# of 100,000 and 7,200 of 300,000 at ef_search 40, i.e. 7.6 and 4.3; 5 lies between. Near the
# crossing the two plans cost about the same, so the constant need not be exact.
EXACT_FILTER_WALK_COST = 5.0
EXACT_FILTER_CEILING = 100_000

_HIT_COLUMNS = sql.SQL(
    "c.id, c.text, d.id::text, d.filename, c.chunk_index, c.page_number, c.element_type, d.metadata,"
    " c.text_as_html, c.text_source, c.ocr_confidence, c.boxes"
)
_SCORE = 12  # the column after _HIT_COLUMNS
# An explained VECTOR search's two more columns (explained_vector_search): the hit's BM25 vector,
# and the query's words as the index stems them (%(kw_text)s, an InitPlan computed once).
_WORD_COLUMNS = sql.SQL(
    ", c.search_bm25, (SELECT coalesce(array_agg(l.lexeme ORDER BY l.lexeme COLLATE \"C\"), '{}')"
    " FROM unnest(to_tsvector('sluice_text', %(kw_text)s)) l)"
)
# HYBRID's candidates are ranked on ids and scores alone; only the fused answer's rows are read
# whole (hits_by_id): fusing 2 x 50 candidates into 10 reads no text, metadata or boxes for 90.
_ID_COLUMNS = sql.SQL("c.id")
_ID_SCORE = 1  # the column after _ID_COLUMNS
# The vector side of HYBRID with document context also reads the similarity of each candidate's
# document to the query: the document's vector (migration 0026) in the candidate's generation, by
# primary key, NULL for a document without one. It wraps the vector statement (whichever plan
# answers), so that it is computed for the rows returned only: as a column of the statement
# itself, PostgreSQL computed it for every row an exact scan sorts (16,000 at 94,000 chunks, 3x
# the scan's time).
_ID_DOCUMENT_COLUMNS = sql.SQL("c.id, c.document_id")
_ID_DOCUMENT_SCORE = 2  # the column after _ID_DOCUMENT_COLUMNS
_WITH_DOCUMENT_SIMILARITY = sql.SQL(
    "SELECT q.*, (SELECT 1 - (v.embedding <=> %(v)s) FROM document_vectors v"
    " WHERE v.generation_id = {gid} AND v.tenant_id = {tid} AND v.document_id = q.document_id)"
    " FROM ({query}) q"
)


async def open_read_pool(
    url: str,
    *,
    min_size: int,
    max_size: int,
    ef_search: int,
    max_scan_tuples: int,
    statement_timeout_ms: int,
) -> AsyncConnectionPool:
    """A pool of read-only sessions tuned for filtered HNSW scans.

    Session settings rather than SET LOCAL per query: these connections belong to search
    alone, and one round trip per query is what keeps gRPC latency close to raw SQL. (Behind
    a transaction-mode pooler such as PgBouncer, session settings do not stick: use session
    pooling for search, or a direct connection to a replica.)
    """

    async def configure(conn: psycopg.AsyncConnection) -> None:
        await register_vector_async(conn)
        # The vector type's input function loads pgvector's library, which defines hnsw.*.
        await conn.execute("SELECT '[1]'::vector")
        await conn.execute("SET default_transaction_read_only = on")
        # pgvector applies WHERE after the HNSW scan; an iterative scan keeps walking the
        # graph until LIMIT rows passed the READY join and the filters (or the tuple budget
        # ran out: then the exact fallback below answers).
        await conn.execute("SET hnsw.iterative_scan = relaxed_order")
        await conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(int(ef_search))))
        await conn.execute(sql.SQL("SET hnsw.max_scan_tuples = {}").format(sql.Literal(int(max_scan_tuples))))
        await conn.execute(sql.SQL("SET statement_timeout = {}").format(sql.Literal(int(statement_timeout_ms))))
        # Pages of an index are as cheap to reach as the table's (SSD, or a cache that holds
        # them). At the default 4, the planner scanned every chunk for a KEYWORD query rather
        # than the GIN index's few thousand, and paid for every row's tsvector (keyword.py).
        await conn.execute("SET random_page_cost = 1.1")

    pool = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name="sluice-search",
        configure=configure,
        check=check_if_idle,  # drop connections a PostgreSQL restart killed (sluice_common.db)
        reset=mark_returned,
        kwargs={"autocommit": True, "prepare_threshold": 5, "application_name": "sluice-search"},
        open=False,
    )
    await pool.open(wait=True, timeout=30)
    return pool


async def check_unprivileged(pool: AsyncConnectionPool) -> None:
    """search must be held by row-level security: refuse a role that bypasses it (a superuser,
    BYPASSRLS, or the tables' owner), whatever URL it was given."""
    async with pool.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT current_user, r.rolsuper OR r.rolbypassrls"
                " OR pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = 'chunks'::regclass), 'USAGE')"
                " FROM pg_roles r WHERE r.rolname = current_user"
            )
        ).fetchone()
    if row is None:  # pg_roles always holds current_user
        raise SystemExit("search could not read its own PostgreSQL role")
    if row[1]:
        raise SystemExit(
            f"search refuses to run as PostgreSQL role {row[0]!r}: it bypasses row-level security (superuser, "
            "BYPASSRLS or the tables' owner). Give SLUICE_SEARCH_DATABASE_URL a login in role sluice_search_reader."
        )


COLLECTIONS_CHANNEL = "sluice_collections"


class ConnectionSource(Protocol):
    """What the repository needs of a pool: an AsyncConnectionPool, or one behind
    consistency.GatedPool."""

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection]: ...


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
        self._exact_filter_walk_cost = exact_filter_walk_cost
        self._binary_rescore_candidates = binary_rescore_candidates
        self._cache_seconds = collection_cache_seconds
        self._exact_filter_max_chunks = exact_filter_max_chunks
        self._collections: dict[tuple[int, str], tuple[float, Collection]] = {}
        self._lock = asyncio.Lock()
        self._listener: asyncio.Task[None] | None = None
        self._notify_hooks: list[Callable[[str], None]] = []
        # The tenant each pooled session was last set to (missing: unknown), dropped with the connection.
        self._session_tenants: weakref.WeakKeyDictionary[psycopg.AsyncConnection, int] = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------ cache invalidation

    async def start_listening(self, url: str, *, timeout: float = 10.0) -> None:
        """Drop cached collections as soon as one is created, deleted or switches generation:
        ingest-api's triggers NOTIFY `sluice_collections` with `tenant:name` (migration 0009).
        One LISTEN connection, reconnected with backoff; while it is down (or on a replica, where
        LISTEN is not possible) the cache's short lifetime is the fallback."""
        connected = asyncio.Event()
        self._listener = asyncio.create_task(self._listen(url, connected), name="collections-listener")
        try:
            await asyncio.wait_for(connected.wait(), timeout=timeout)
        except TimeoutError:
            log.warning("collection notifications not available yet; the cache expires by age meanwhile")

    async def stop_listening(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener

    async def _listen(self, url: str, connected: asyncio.Event) -> None:
        backoff = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {COLLECTIONS_CHANNEL}")
                    self._collections.clear()  # anything may have changed while we were not listening
                    connected.set()
                    backoff = 0.1
                    async for note in conn.notifies():
                        self.forget(note.payload)
                        for hook in self._notify_hooks:
                            hook(note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep listening through database restarts
                end_if_cancelled(exc)
                log.warning("collection notification connection lost; reconnecting", extra={"error": str(exc)})
                self._collections.clear()
                await pause(backoff)
                backoff = min(backoff * 2, 5.0)

    def on_collection_notify(self, hook: Callable[[str], None]) -> None:
        """Call `hook(payload)` on every `sluice_collections` notification too (the reindex
        quality gate wakes on them: eval_gate.py)."""
        self._notify_hooks.append(hook)

    def forget(self, payload: str) -> None:
        """Drop the cached collection named by a `tenant:name` notification (everything if unreadable)."""
        tenant, _, name = payload.partition(":")
        try:
            self._collections.pop((int(tenant), name), None)
        except ValueError:
            self._collections.clear()

    @asynccontextmanager
    async def _tenant_session(self, tenant_id: int) -> AsyncIterator[psycopg.AsyncConnection]:
        """A connection that row-level security holds to `tenant_id`."""
        async with self._pool.connection() as conn:
            if self._session_tenants.get(conn) != tenant_id:
                self._session_tenants.pop(conn, None)  # unknown until the setting has succeeded
                await conn.execute(_SET_TENANT, (str(int(tenant_id)),))
                self._session_tenants[conn] = tenant_id
            yield conn

    async def get_collection(self, tenant_id: int, name: str, *, fresh: bool = False) -> Collection | None:
        """The tenant's collection named `name` resolved to its ACTIVE generation, from a cache
        that LISTEN/NOTIFY invalidates (and that expires after a few seconds regardless);
        `fresh` reads the database."""
        now = time.monotonic()
        key = (tenant_id, name)
        cached = self._collections.get(key)
        if cached and not fresh and now - cached[0] < self._cache_seconds:
            return cached[1]
        async with self._tenant_session(tenant_id) as conn:
            row = await (
                await conn.execute(
                    "SELECT c.id, c.name, g.embedder_provider, g.embedder_model, g.dimensions, c.tenant_id, g.id, g.number,"
                    " c.chunk_overlap, g.vector_precision, c.reranker"
                    " FROM collections c JOIN collection_generations g ON g.collection_id = c.id AND g.state = 'ACTIVE'"
                    " WHERE c.tenant_id = %s AND c.name = %s",
                    (tenant_id, name),
                )
            ).fetchone()
        if row is None:
            self._collections.pop(key, None)
            return None
        collection = _collection(row)
        if len(self._collections) > 10_000:
            self._collections.clear()
        self._collections[key] = (now, collection)
        return collection

    async def generation_collection(self, tenant_id: int, name: str, generation_id: int) -> Collection | None:
        """The tenant's collection resolved to one given generation (ACTIVE or BUILDING), never
        cached: the reindex quality gate searches both sides of a reindex through it
        (eval_gate.py). None when the collection or the generation is gone."""
        async with self._tenant_session(tenant_id) as conn:
            row = await (
                await conn.execute(
                    "SELECT c.id, c.name, g.embedder_provider, g.embedder_model, g.dimensions, c.tenant_id, g.id, g.number,"
                    " c.chunk_overlap, g.vector_precision, c.reranker"
                    " FROM collections c JOIN collection_generations g ON g.collection_id = c.id"
                    " WHERE c.tenant_id = %s AND c.name = %s AND g.id = %s AND g.state IN ('ACTIVE', 'BUILDING')",
                    (tenant_id, name, generation_id),
                )
            ).fetchone()
        if row is None:
            return None
        return _collection(row)

    async def numbered_generation(self, tenant_id: int, name: str, number: int) -> tuple[Collection | None, str] | None:
        """The tenant's collection resolved to the generation numbered `number`, whatever its
        state, and that state (SearchRequest.generation): None when there is no such collection,
        (None, "") when it has no such generation. Never cached: a reindex's BUILDING generation
        changes state (ACTIVE, CANCELLED) and the next search must see it, and a generation
        named by the request never takes the place of the cached ACTIVE one."""
        async with self._tenant_session(tenant_id) as conn:
            row = await (
                await conn.execute(
                    "SELECT c.id, c.name, g.embedder_provider, g.embedder_model, g.dimensions, c.tenant_id, g.id, g.number,"
                    " c.chunk_overlap, g.vector_precision, c.reranker, g.state"
                    " FROM collections c LEFT JOIN collection_generations g ON g.collection_id = c.id AND g.number = %s"
                    " WHERE c.tenant_id = %s AND c.name = %s",
                    (number, tenant_id, name),
                )
            ).fetchone()
        if row is None:
            return None
        if row[6] is None:
            return None, ""
        return _collection(row[:-1]), row[-1]

    async def embedders_in_use(self) -> list[tuple[str, str, int]]:
        """Every tenant's embedders, for warm-up: a SECURITY DEFINER function shows search these
        three columns of every collection and nothing else (migration 0004)."""
        async with self._pool.connection() as conn:
            rows = await (await conn.execute("SELECT provider, model, dimensions FROM sluice_embedders_in_use()")).fetchall()
        return [(provider, model, int(dimensions)) for provider, model, dimensions in rows]

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
        rows = await self._vector_rows(collection, vector, limit, filter, _HIT_COLUMNS, _SCORE)
        return [_hit(r, 1.0 - float(r[_SCORE])) for r in rows]

    async def explained_vector_search(
        self, collection: Collection, vector: Sequence[float], limit: int, filter: DocumentFilter, terms: Sequence[str]
    ) -> tuple[list[Hit], dict[int, explain.Details]]:
        """vector_search, and in the same statement which of the query's words (`terms`, as the
        index stems them) each hit holds: the hit's BM25 vector and the query's stemmed words
        are two more columns (the words an InitPlan, computed once), matched here by the words'
        dimensions, as _explain_sql matches them (explain.py)."""
        text = " ".join(t for t in dict.fromkeys(terms) if textsearch.tsquery_text([t]))
        score = _SCORE + 2
        rows = await self._vector_rows(
            collection, vector, limit, filter, _HIT_COLUMNS + _WORD_COLUMNS, score, params={"kw_text": text}
        )
        details = {}
        dims: dict[str, int] = {}  # the query's words are the same in every row
        for r in rows:
            held = set(r[_SCORE].indices()) if r[_SCORE] is not None else set()
            words = r[_SCORE + 1] or ()
            if not dims:
                dims = {word: keyword.term_dim(word) - 1 for word in words}
            matched = [word for word in words if dims[word] in held]
            details[r[0]] = explain.Details(keyword_score=None, vector_similarity=None, matched_terms=matched)
        return [_hit(r, 1.0 - float(r[score])) for r in rows], details

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
            rows = await self._vector_rows(collection, vector, limit, filter, _ID_COLUMNS, _ID_SCORE)
            return [(r[0], 1.0 - float(r[_ID_SCORE])) for r in rows]

        def with_similarity(query: sql.Composed) -> sql.Composed:
            return _WITH_DOCUMENT_SIMILARITY.format(
                gid=sql.Literal(int(collection.generation_id)), tid=sql.Literal(int(collection.tenant_id)), query=query
            )

        async with self._tenant_session(collection.tenant_id) as conn:
            rows = await self._vector_rows_on(
                conn,
                collection,
                vector,
                max(limit, depth),
                filter,
                _ID_DOCUMENT_COLUMNS,
                _ID_DOCUMENT_SCORE,
                wrap=with_similarity,
            )
        scored = []
        for chunk_id, _, distance, context in rows:
            own = 1.0 - float(distance)
            score = own if context is None else (1.0 - document_weight) * own + document_weight * float(context)
            scored.append((chunk_id, score))
        scored.sort(key=lambda pair: (-pair[1], pair[0]))
        return scored[:limit]

    async def _vector_rows(
        self,
        collection: Collection,
        vector: Sequence[float],
        limit: int,
        filter: DocumentFilter,
        columns: sql.Composable,
        score: int,
        *,
        params: dict[str, Any] | None = None,
    ) -> list[tuple[Any, ...]]:
        """vector_search's rows: `columns` (the first the chunk id) and the distance at `score`, best
        first; `params`, the parameters `columns` names."""
        async with self._tenant_session(collection.tenant_id) as conn:
            return await self._vector_rows_on(conn, collection, vector, limit, filter, columns, score, params=params)

    async def _vector_rows_on(
        self,
        conn: psycopg.AsyncConnection,
        collection: Collection,
        vector: Sequence[float],
        limit: int,
        filter: DocumentFilter,
        columns: sql.Composable,
        score: int,
        *,
        wrap: Callable[[sql.Composed], sql.Composed] = lambda query: query,
        params: dict[str, Any] | None = None,
    ) -> list[tuple[Any, ...]]:
        """_vector_rows on a tenant session; each statement passed through `wrap` (which may add
        columns after `columns` and the distance)."""
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
            rows = await (await conn.execute(wrap(query), {**params, **more})).fetchall()
            documents, chunks, cap = rows[0][:3]
            if documents <= cap and chunks <= cap:
                metrics.FILTER_PLANS.labels("exact").inc()
                hits = [row[3:] for row in rows if row[3] is not None]
                hits.sort(key=lambda r: (r[score], r[0]))
                return hits
        if filter:
            metrics.FILTER_PLANS.labels("graph").inc()
        indexed, statement_params = vector_query(
            collection, vector, limit, filter, columns=columns, rescore_candidates=self._binary_rescore_candidates
        )
        rows = await (await conn.execute(wrap(indexed), {**statement_params, **more})).fetchall()
        if len(rows) < limit:
            exact, statement_params = vector_query(collection, vector, limit, filter, exact=True, columns=columns)
            metrics.EXACT_FALLBACKS.inc()
            rows = await (await conn.execute(wrap(exact), {**statement_params, **more})).fetchall()
            log.debug("exact vector fallback", extra={"collection_id": collection.id, "rows": len(rows)})
        # relaxed_order: the index hands rows back nearly sorted; the final order is exact.
        rows.sort(key=lambda r: (r[score], r[0]))
        return rows

    async def hits_by_id(self, collection: Collection, chunk_ids: Sequence[int], filter: DocumentFilter) -> dict[int, Hit]:
        """The hits of these chunks (HYBRID's second phase), score 0, keyed by chunk id; a chunk
        whose document is no longer READY or no longer passes the filter, or that left the
        collection's generation or the tenant since it was ranked, is missing (service.py
        decides what then). One statement, under the same rules as every search."""
        hits, _ = await self._hits_by_id(collection, chunk_ids, filter, None)
        return hits

    async def explained_hits_by_id(
        self, collection: Collection, chunk_ids: Sequence[int], filter: DocumentFilter, wanted: explain.Wanted
    ) -> tuple[dict[int, Hit], dict[int, explain.Details]]:
        """hits_by_id, and in the same statement what an explanation reads of each chunk
        (_explain_sql): an explained HYBRID search costs no statement more than a plain one."""
        return await self._hits_by_id(collection, chunk_ids, filter, wanted)

    async def _hits_by_id(
        self, collection: Collection, chunk_ids: Sequence[int], filter: DocumentFilter, wanted: explain.Wanted | None
    ) -> tuple[dict[int, Hit], dict[int, explain.Details]]:
        if not chunk_ids:
            return {}, {}
        where, params = _filter_sql(filter)
        params["ids"] = list(chunk_ids)
        more: sql.Composable = sql.SQL("")
        words: list[str] = []
        if wanted is not None:
            columns, words = _explain_sql(collection, wanted, params)
            more = sql.SQL(", ") + columns
        query = sql.SQL(
            "SELECT {cols}{more} FROM chunks c JOIN documents d ON d.id = c.document_id"
            " WHERE c.id = ANY(%(ids)s::bigint[]) AND {pred} AND c.tenant_id = {tid} AND d.status = 'READY'{where}"
        ).format(
            cols=_HIT_COLUMNS,
            more=more,
            pred=vector_index.generation_predicate(collection.generation_id),
            tid=sql.Literal(int(collection.tenant_id)),
            where=where,
        )
        async with self._tenant_session(collection.tenant_id) as conn:
            rows = await (await conn.execute(query, params)).fetchall()
        hits = {r[0]: _hit(r, 0.0) for r in rows}
        return hits, ({r[0]: _details(r[_SCORE:], words) for r in rows} if wanted is not None else {})

    async def chunk_texts(self, collection: Collection, windows: Sequence[tuple[str, int, int]]) -> dict[tuple[str, int], str]:
        """The texts of the chunks in each (document, first, last chunk index) window, of READY
        documents, from the collection's generation (context.py), keyed by (document, index)."""
        if not windows:
            return {}
        query = sql.SQL(
            "SELECT c.document_id::text, c.chunk_index, c.text"
            " FROM unnest(%(documents)s::uuid[], %(firsts)s::int[], %(lasts)s::int[]) AS w(document_id, first, last)"
            " JOIN chunks c ON c.document_id = w.document_id AND c.chunk_index BETWEEN w.first AND w.last"
            " JOIN documents d ON d.id = c.document_id"
            " WHERE {pred} AND c.tenant_id = {tid} AND d.status = 'READY'"
        ).format(pred=vector_index.generation_predicate(collection.generation_id), tid=sql.Literal(int(collection.tenant_id)))
        params = {"documents": [w[0] for w in windows], "firsts": [w[1] for w in windows], "lasts": [w[2] for w in windows]}
        async with self._tenant_session(collection.tenant_id) as conn:
            rows = await (await conn.execute(query, params)).fetchall()
        return {(document_id, index): text for document_id, index, text in rows}

    async def keyword_search(
        self, collection: Collection, terms: Sequence[str], limit: int, filter: DocumentFilter, exact: int | None = None
    ) -> list[Hit]:
        """The `limit` READY chunks that contain any of `terms`, by BM25 score, the first `exact`
        of them (all by default) exactly BM25's best (keyword.py)."""
        where, params = _filter_sql(filter)
        async with self._tenant_session(collection.tenant_id) as conn:
            rows = await keyword.search(
                conn,
                collection.generation_id,
                terms,
                limit,
                self._keyword_scope(collection),
                _HIT_COLUMNS,
                where,
                params,
                _SCORE,
                exact,
            )
        return [_hit(r, float(r[_SCORE])) for r in rows]

    async def explained_keyword_search(
        self, collection: Collection, terms: Sequence[str], limit: int, filter: DocumentFilter
    ) -> tuple[list[Hit], dict[int, explain.Details]]:
        """keyword_search, and in the same statements which of the words its side weighed each
        hit holds: the hit's BM25 vector is one more column, matched here by the words'
        dimensions, as _explain_sql matches them (explain.py)."""
        where, params = _filter_sql(filter)
        weights: dict[str, float] = {}
        score = _SCORE + 1
        async with self._tenant_session(collection.tenant_id) as conn:
            rows = await keyword.search(
                conn,
                collection.generation_id,
                terms,
                limit,
                self._keyword_scope(collection),
                _HIT_COLUMNS + sql.SQL(", c.search_bm25"),
                where,
                params,
                score,
                None,
                weights,
            )
        dims = {word: keyword.term_dim(word) - 1 for word in sorted(weights)}
        details = {}
        for r in rows:
            held = set(r[_SCORE].indices()) if r[_SCORE] is not None else set()
            matched = [word for word, dim in dims.items() if dim in held]
            details[r[0]] = explain.Details(keyword_score=None, vector_similarity=None, matched_terms=matched)
        return [_hit(r, float(r[score])) for r in rows], details

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
        where, params = _filter_sql(filter)
        async with self._tenant_session(collection.tenant_id) as conn:
            rows = await keyword.search(
                conn,
                collection.generation_id,
                terms,
                limit,
                self._keyword_scope(collection),
                _ID_COLUMNS,
                where,
                params,
                _ID_SCORE,
                exact,
                weights_used,
            )
        return [(r[0], float(r[_ID_SCORE])) for r in rows]

    @staticmethod
    def _keyword_scope(collection: Collection) -> sql.Composable:
        return sql.SQL("{pred} AND c.tenant_id = {tid}").format(
            pred=vector_index.generation_predicate(collection.generation_id), tid=sql.Literal(int(collection.tenant_id))
        )


def selective_vector_query(
    collection: Collection,
    vector: Sequence[float],
    limit: int,
    filter: DocumentFilter,
    max_chunks: int,
    *,
    walk_cost: float = 0.0,
    columns: sql.Composable = _HIT_COLUMNS,
) -> tuple[sql.Composed, dict[str, Any]]:
    """One statement for a filtered VECTOR search: the READY documents the filter selects (at
    most cap + 1 of them) and, when they hold at most `cap` chunks, the `limit` nearest of those
    chunks, scored exactly. Every row starts with (documents, chunks, cap); when there are too
    many, one row of NULL hits says so and the caller walks the graph.

    The cap is max_chunks, or more in a large generation: sqrt(walk_cost x ef_search x the
    generation's chunks), read from its keyword statistics in the same statement. A graph walk
    that keeps a share s of the chunks visits about ef_search / s of them, so an exact scan of the
    filter's n chunks is the cheaper plan while n^2 < walk_cost x ef_search x chunks
    (docs/search.md, "Filters": walk_cost measured at 100,000 and 300,000 chunks). walk_cost 0
    keeps the cap at max_chunks."""
    where, params = _filter_sql(filter)
    params["v"] = np.asarray(vector, dtype=np.float32)
    distance = vector_index.exact_distance(collection.dimensions)
    query = sql.SQL(
        "WITH n AS MATERIALIZED ("
        " SELECT greatest({floor}::float8, least({ceiling}::float8, floor(sqrt({walk_cost}::float8"
        " * coalesce(nullif(current_setting('hnsw.ef_search', true), ''), '40')::float8"
        " * coalesce(sum(s.df), 0)))))::bigint AS cap"
        " FROM keyword_stats s WHERE s.generation_id = {gid} AND s.term = ''"
        "), m AS MATERIALIZED ("
        " SELECT d.id, d.chunk_count FROM documents d"
        " WHERE d.collection_id = {cid} AND d.tenant_id = {tid} AND d.status = 'READY'{where}"
        " LIMIT (SELECT n.cap + 1 FROM n)"
        "), t AS (SELECT count(*) AS documents, coalesce(sum(m.chunk_count), 0) AS chunks, (SELECT n.cap FROM n) AS cap FROM m)"
        " SELECT t.documents, t.chunks, t.cap, h.* FROM t LEFT JOIN LATERAL ("
        " SELECT {cols}, {distance} AS distance FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE t.documents <= t.cap AND t.chunks <= t.cap AND c.document_id = ANY(ARRAY(SELECT m.id FROM m))"
        " AND {pred} AND c.tenant_id = {tid} AND d.status = 'READY'{where}"
        " ORDER BY ({distance}) + 0, c.id LIMIT {limit}"
        ") h ON true"
    ).format(
        cid=sql.Literal(int(collection.id)),
        tid=sql.Literal(int(collection.tenant_id)),
        where=where,
        floor=sql.Literal(int(max_chunks)),
        ceiling=sql.Literal(int(max(max_chunks, EXACT_FILTER_CEILING))),
        walk_cost=sql.Literal(float(walk_cost)),
        gid=sql.Literal(int(collection.generation_id)),
        cols=columns,
        distance=distance,
        pred=vector_index.generation_predicate(collection.generation_id),
        limit=sql.Literal(int(limit)),
    )
    return query, params


def vector_query(
    collection: Collection,
    vector: Sequence[float],
    limit: int,
    filter: DocumentFilter,
    *,
    exact: bool = False,
    columns: sql.Composable = _HIT_COLUMNS,
    rescore_candidates: int = 0,
) -> tuple[sql.Composed, dict[str, Any]]:
    """The vector query and its parameters: through the partial HNSW index, or exact.

    The ORDER BY repeats the generation's indexed expression (vector_index.index_distance, at
    the generation's precision) so the planner uses its partial index; the distance returned is
    always the exact one on the float4 vectors. A `binary` generation's graph only proposes
    candidates: the nearest max(limit, `rescore_candidates`) by Hamming distance, re-scored
    exactly, of which the best `limit` are the answer (docs/search.md, "Vector precision")."""
    where, params = _filter_sql(filter)
    params["v"] = np.asarray(vector, dtype=np.float32)
    distance = vector_index.exact_distance(collection.dimensions)
    precision = FLOAT4 if exact else collection.vector_precision
    # Exact: `+ 0` makes the sort key an expression no index serves.
    order = (
        sql.SQL("({distance}) + 0, c.id").format(distance=distance)
        if exact
        else vector_index.index_distance(collection.dimensions, precision)
    )
    body = sql.SQL(
        "SELECT {cols}, {distance} AS distance"
        " FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE {pred} AND c.tenant_id = {tid} AND d.status = 'READY'{where}"
        " ORDER BY {order} LIMIT {limit}"
    )
    fields = {
        "cols": columns,
        "distance": distance,
        "pred": vector_index.generation_predicate(collection.generation_id),
        "tid": sql.Literal(int(collection.tenant_id)),
        "where": where,
        "order": order,
    }
    if precision == vector_index.BINARY:
        inner = body.format(**fields, limit=sql.Literal(max(int(limit), int(rescore_candidates))))
        query = sql.SQL("SELECT * FROM ({inner}) r ORDER BY r.distance LIMIT {limit}").format(
            inner=inner, limit=sql.Literal(int(limit))
        )
        return query, params
    return body.format(**fields, limit=sql.Literal(int(limit))), params


def _explain_sql(collection: Collection, wanted: explain.Wanted, params: dict[str, Any]) -> tuple[sql.Composable, list[str]]:
    """The columns an explanation reads of a chunk of `c` (_details reads them), and the words
    the first column's indexes (from 1) name; their parameters are added to `params`:

    - which of the query's words the keyword side weighed (the only ones a chunk can hold: the
      generation holds no other) the chunk holds, by their indexes, in code point order. A word
      is held when the chunk's BM25 vector has a weight at the word's dimension (a weight is
      never 0 for a word the chunk holds): one sparse product per word, a tenth of the time of
      reading the chunk's tsvector (its lexemes unnested, or converted to an array), measured
      over 500 chunks of ~1,000 characters. It shares the BM25 vector's one imprecision: two
      words whose dimensions collide (docs/search.md, "Keyword ranking").
    - with `wanted.keyword_scores`, the chunk's BM25 score: its BM25 vector times the query's of
      those weights, built as the ranking builds it (keyword.query_vector: the same float4
      values), so a chunk the ranking scored gets the same score (0 without the query's words);
    - with `wanted.vector`, the chunk's exact cosine distance to it (the expression every vector
      score comes from)."""
    words = sorted(wanted.keyword_weights)
    params["kw_words"] = [keyword.term_vector(word) for word in words]
    if wanted.keyword_scores and words:
        params["kw_query"] = keyword.query_vector(wanted.keyword_weights)
    if wanted.vector is not None:
        params["v"] = np.asarray(wanted.vector, dtype=np.float32)
    scores = "weights" if wanted.keyword_scores and words else "zero" if wanted.keyword_scores else "none"
    return _explain_columns(collection.dimensions, scores, wanted.vector is not None), words


@functools.lru_cache(maxsize=256)
def _explain_columns(dimensions: int, scores: str, similarity: bool) -> sql.SQL:
    """_explain_sql's columns, composed once per shape: BM25 scores by %(kw_query)s (`weights`),
    0 (`zero`: none of the query's words is in the generation) or none; the cosine distance or not."""
    bm25 = {"weights": "coalesce(-(c.search_bm25 <#> %(kw_query)s::sparsevec), 0)", "zero": "0::float8"}.get(
        scores, "NULL::float8"
    )
    columns = sql.SQL(
        "ARRAY(SELECT i FROM generate_subscripts(%(kw_words)s::sparsevec[], 1) AS i"
        " WHERE (c.search_bm25 <#> (%(kw_words)s::sparsevec[])[i]) < 0 ORDER BY i), {bm25}, {distance}"
    ).format(bm25=sql.SQL(bm25), distance=vector_index.exact_distance(dimensions) if similarity else sql.SQL("NULL::float8"))
    return sql.SQL(columns.as_string(None))


def _details(columns: Sequence[Any], words: Sequence[str]) -> explain.Details:
    """explain.Details from _explain_sql's columns; `words` are the words its indexes name."""
    held, score, distance = columns
    return explain.Details(
        # + 0.0: a chunk without the query's words scores -(0), which is -0.0
        keyword_score=None if score is None else float(score) + 0.0,
        vector_similarity=None if distance is None else 1.0 - float(distance),
        matched_terms=[words[i - 1] for i in held or ()],
    )


def _filter_sql(filter: DocumentFilter) -> tuple[sql.Composable, dict[str, Any]]:
    """The filter as AND-ed predicates on `documents d` (" AND …", or empty), every value a
    bound parameter named f_<n> (filter_sql.py)."""
    return filter_sql(filter)


def _collection(row: tuple[Any, ...]) -> Collection:
    """A collection from the columns get_collection and generation_collection select, in their order."""
    id_, name, provider, model, dimensions, tenant_id, generation_id, generation, chunk_overlap, precision, reranker = row
    return Collection(
        id_,
        name,
        provider,
        model,
        dimensions,
        tenant_id,
        generation_id,
        generation,
        chunk_overlap,
        reranker=RerankerSpec.from_json(reranker),
        vector_precision=precision,
    )


def _hit(row: tuple[Any, ...], score: float) -> Hit:
    chunk_id, text, document_id, filename, chunk_index, page_number, element_type, metadata = row[:8]
    text_as_html, text_source, ocr_confidence, boxes = row[8:_SCORE]
    return Hit(
        chunk_id=chunk_id,
        text=text,
        score=score,
        document_id=document_id,
        filename=filename,
        chunk_index=chunk_index,
        page_number=page_number,
        element_type=element_type,
        metadata=dict(metadata or {}),
        text_as_html=text_as_html or "",
        text_source=text_source or "",
        ocr_confidence=float(ocr_confidence or 0.0),
        boxes=list(boxes or ()),
    )


__all__ = ["SearchRepository", "check_unprivileged", "open_read_pool"]
