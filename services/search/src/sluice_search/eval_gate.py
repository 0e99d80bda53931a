"""The reindex quality gate, search's side (issue 18 item 7; docs/search.md, "Reindexing with a
quality gate").

A ReindexCollection call may carry an eval set (labelled queries, docs/evaluation.md). ingest-api
keeps it on the new generation and, once the generation is complete, switches it only with a
PASSED verdict (a FAILED one cancels it). ingest-api has no embedder; search has every
collection's, and the very path users' queries take. So search measures:

1. list the gated generations that are complete, indexed and without a verdict, across tenants
   (`sluice_generations_awaiting_verdict()`, a SECURITY DEFINER function, migration 0018);
2. take a session advisory lock on the generation, so that of several search replicas one
   measures it (the lock goes with the session if this process dies); no transaction stays open
   while it measures;
3. run every eval query, one at a time (the gate must not crowd out users), through the search
   path (`SearchService.search_collection`: the collection's default mode HYBRID, top 10, the
   collection's filters of none, no reranker) on the ACTIVE generation and on the new one, each
   a `Collection` object of its own, and score both by MRR@10 (`sluice_common.evaluation`);
4. record the scores with `sluice_record_generation_verdict(...)` in a READ WRITE transaction:
   search's only write. The database decides `passed` (candidate >= min_ratio x active) and
   refuses a verdict on a generation that is no longer BUILDING, or measured against a
   generation that is no longer ACTIVE.

It wakes on every `sluice_collections` notification (ingest-api announces a gated generation
that became complete) and every `poll_seconds` regardless. A generation whose measurement
failed (an embedding API down, say) is tried again after a delay that doubles up to 5 minutes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
from sluice_common.evaluation import Query, evaluate
from sluice_common.tasks import end_if_cancelled, pause, wait_event

from .collection_cache import CollectionListener
from .domain import Collection, DocumentFilter, Hit, Mode, SearchQuery
from .repository import SearchRepository
from .service import SearchService

log = logging.getLogger("sluice.search.eval_gate")

# Advisory lock class of a generation being measured: pg_try_advisory_lock(class, generation id)
# (ingest-api's index builds use 90091).
GATE_LOCK_CLASS = 90092
METRIC = "mrr@10"
TOP_K = 10
RETRY_FIRST_SECONDS = 5.0
RETRY_MAX_SECONDS = 300.0


@dataclass(frozen=True)
class AwaitingGeneration:
    """A gated BUILDING generation, complete and indexed, that has no verdict yet."""

    generation_id: int
    tenant_id: int
    collection: str
    generation: int
    active_generation_id: int
    queries: tuple[Query, ...]
    min_ratio: float


@dataclass(frozen=True)
class Measurement:
    generation_id: int
    active_generation_id: int
    active_score: float
    candidate_score: float
    queries: int


def queries_of(eval_set: Sequence[Mapping[str, Any]]) -> tuple[Query, ...]:
    """The stored eval set (collection_generations.eval_set) as evaluation queries, keyed by
    position (a client's ids are optional)."""
    return tuple(Query(str(i), item["query"], tuple(item["relevant"])) for i, item in enumerate(eval_set))


async def score(service: SearchService, collection: Collection, queries: Sequence[Query]) -> float:
    """MRR@10 of the queries on this collection object's generation, one query at a time."""
    ranked: dict[str, list[Hit]] = {}
    for query in queries:
        ranked[query.id] = await service.search_collection(
            collection,
            SearchQuery(
                collection=collection.name, text=query.query, vector=None, top_k=TOP_K, mode=Mode.HYBRID, filter=DocumentFilter()
            ),
        )
    return min(1.0, max(0.0, float(evaluate(queries, ranked).metrics[METRIC])))


class EvalGate:
    def __init__(
        self,
        service: SearchService,
        repository: SearchRepository,
        listener: CollectionListener,
        database_url: str,
        *,
        poll_seconds: float = 5.0,
        evaluated_by: str = "",
    ) -> None:
        self._service = service
        self._repository = repository
        self._listener = listener
        self._url = database_url
        self._poll_seconds = poll_seconds
        self._evaluated_by = evaluated_by or f"search@{socket.gethostname()}:{os.getpid()}"
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._retry: dict[int, tuple[float, float]] = {}  # generation id → (not before, last delay)

    def start(self) -> None:
        self._listener.on_notify(lambda _payload: self._wake.set())
        self._task = asyncio.create_task(self._run(), name="eval-gate")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _connect(self) -> psycopg.AsyncConnection:
        conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True, application_name="sluice-search-gate")
        # Read-only like every search session; the verdict's transaction says READ WRITE itself.
        await conn.execute("SET default_transaction_read_only = on")
        return conn

    async def _run(self) -> None:
        conn: psycopg.AsyncConnection | None = None
        backoff = 0.5
        try:
            while True:
                self._wake.clear()  # before the pass: a notification during it makes another pass
                try:
                    if conn is None or conn.closed:
                        conn = await self._connect()
                    await self.run_once(conn)
                    backoff = 0.5
                except Exception as exc:  # the gate outlives database restarts
                    end_if_cancelled(exc)
                    log.warning("reindex quality gate pass failed; trying again", extra={"error": str(exc)})
                    if conn is not None:
                        await conn.close()
                    conn = None
                    await pause(backoff)
                    backoff = min(backoff * 2, 30.0)
                    continue
                await wait_event(self._wake, self._poll_seconds)
        finally:
            if conn is not None:
                await conn.close()

    async def awaiting(self, conn: psycopg.AsyncConnection, generation_id: int | None = None) -> list[AwaitingGeneration]:
        rows = await (
            await conn.execute(
                "SELECT generation_id, tenant_id, collection, generation, active_generation_id, eval_set, min_ratio"
                " FROM sluice_generations_awaiting_verdict()"
                + (" WHERE generation_id = %s" if generation_id is not None else ""),
                (generation_id,) if generation_id is not None else (),
            )
        ).fetchall()
        return [
            AwaitingGeneration(gid, tenant, name, number, active, queries_of(eval_set), float(ratio))
            for gid, tenant, name, number, active, eval_set, ratio in rows
        ]

    async def run_once(self, conn: psycopg.AsyncConnection) -> list[str]:
        """One pass over the generations awaiting a verdict; returns the verdicts recorded."""
        recorded = []
        now = time.monotonic()
        for item in await self.awaiting(conn):
            not_before, _ = self._retry.get(item.generation_id, (0.0, 0.0))
            if not_before > now:
                continue
            (locked,) = await _only_row(conn, "SELECT pg_try_advisory_lock(%s, %s)", (GATE_LOCK_CLASS, item.generation_id))
            if not locked:
                continue  # another search instance is measuring it
            try:
                # Listed again under the lock: another instance may have recorded it meanwhile.
                if not await self.awaiting(conn, item.generation_id):
                    continue
                try:
                    measurement = await self.measure(item)
                except Exception as exc:  # one generation's failure must not stop the others
                    end_if_cancelled(exc)
                    _, last = self._retry.get(item.generation_id, (0.0, 0.0))
                    delay = min(max(last * 2, RETRY_FIRST_SECONDS), RETRY_MAX_SECONDS)
                    self._retry[item.generation_id] = (time.monotonic() + delay, delay)
                    log.warning(
                        "reindex quality gate could not measure a generation; trying again later",
                        extra={
                            "generation_id": item.generation_id,
                            "collection": item.collection,
                            "tenant_id": item.tenant_id,
                            "retry_seconds": delay,
                            "error": str(exc),
                        },
                    )
                    continue
                self._retry.pop(item.generation_id, None)
                if measurement is None:
                    continue
                verdict = await self.record(conn, measurement)
                if verdict is not None:
                    recorded.append(verdict)
                    log.info(
                        "reindex evaluated",
                        extra={
                            "generation_id": item.generation_id,
                            "collection": item.collection,
                            "tenant_id": item.tenant_id,
                            "generation": item.generation,
                            "verdict": verdict,
                            "metric": METRIC,
                            "active_score": round(measurement.active_score, 4),
                            "candidate_score": round(measurement.candidate_score, 4),
                            "min_ratio": round(item.min_ratio, 4),
                            "queries": measurement.queries,
                        },
                    )
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s, %s)", (GATE_LOCK_CLASS, item.generation_id))
        return recorded

    async def measure(self, item: AwaitingGeneration) -> Measurement | None:
        """Both generations' MRR@10 on the eval set; None when either is gone (cancelled,
        switched or deleted meanwhile)."""
        active = await self._repository.generation_collection(item.tenant_id, item.collection, item.active_generation_id)
        candidate = await self._repository.generation_collection(item.tenant_id, item.collection, item.generation_id)
        if active is None or candidate is None:
            return None
        active_score = await score(self._service, active, item.queries)
        candidate_score = await score(self._service, candidate, item.queries)
        return Measurement(item.generation_id, item.active_generation_id, active_score, candidate_score, len(item.queries))

    async def record(self, conn: psycopg.AsyncConnection, m: Measurement) -> str | None:
        """search's only write: 'PASSED' or 'FAILED' as the database decided, None when it
        recorded nothing (migration 0018)."""
        async with conn.transaction():
            await conn.execute("SET TRANSACTION READ WRITE")
            (verdict,) = await _only_row(
                conn,
                "SELECT sluice_record_generation_verdict(%s, %s, %s, %s, %s, %s)",
                (m.generation_id, m.active_generation_id, m.active_score, m.candidate_score, m.queries, self._evaluated_by),
            )
        return None if verdict is None else str(verdict)


async def _only_row(conn: psycopg.AsyncConnection, query: LiteralString, params: Sequence[object]) -> tuple[Any, ...]:
    """The one row of a statement that always returns one (a function call in SELECT)."""
    row = await (await conn.execute(query, params)).fetchone()
    if row is None:
        raise RuntimeError(f"{query} returned no row")
    return row


__all__ = ["GATE_LOCK_CLASS", "EvalGate", "queries_of", "score"]
