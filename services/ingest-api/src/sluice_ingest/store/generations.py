"""Index generations (docs/architecture.md#index-generations): reindex, the switch, cancellation and the sweep that drops
what a switch or a cancellation left behind.

Locks, in the order every path takes them: job rows, then the document row, then generation
rows (the ACTIVE one before the BUILDING one). An INGEST commit holds its generation FOR SHARE,
so a switch (FOR UPDATE on both generations) never interleaves with it.

The switch policy: a BUILDING generation becomes ACTIVE when every READY document of the
collection has a SUCCEEDED EMBED job for it and no EMBED job of it is PENDING, RUNNING or
FAILED. A FAILED EMBED job therefore holds the switch (READY ⇒ searchable after the switch)
until the user retries the failed documents (ReindexCollection again with the same embedder)
or cancels (CancelReindex).

The quality gate (docs/search.md, "Reindexing with a quality gate"): a generation reindexed
with an eval set also waits, once complete, for search's verdict (generation_evaluations,
migration 0018). PASSED switches as above; FAILED moves it BUILDING → CANCELLED (the edge
CancelReindex takes) and drops it like a cancellation, keeping the verdict.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import math
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from sluice_common import vector_index
from sluice_common.errors import FailedPrecondition, NotFound
from sluice_common.reasons import Reason

from ..domain import (
    BuildingGeneration,
    GenerationState,
    IndexSettings,
    JobStatus,
    ReindexDecision,
    decide_reindex,
)
from ..transitions import NOW, RELEASED_LEASE, move_generation, move_job
from .common import StoreBase, lookup_collection, lookup_collection_settings, named_row, named_rows, one_row
from .literals import compose
from .rows import CollectionRow, GenerationEvaluationRow, GenerationFailure, GenerationRow

log = logging.getLogger("sluice.ingest.generations")

# Advisory lock class of a generation's index build (pg_advisory_lock(class, generation id)).
INDEX_LOCK_CLASS = 90091

GENERATION_SELECT = """
    SELECT id, number, embedder_provider, embedder_model, dimensions, state::text AS state, created_at,
           activated_at, ended_at, dropped_at, vector_precision
    FROM collection_generations
"""
GENERATIONS_OF_SQL = GENERATION_SELECT + " WHERE collection_id = %s ORDER BY number"

# A generation's progress (generations_of): a BUILDING one's EMBED jobs by outcome and its first
# failures; the ACTIVE one's documents by status.
EMBED_PROGRESS_SQL = compose(
    "SELECT count(*) AS total, count(*) FILTER (WHERE status = {job_succeeded}) AS ready,"
    " count(*) FILTER (WHERE status = {job_failed}) AS failed,"
    " count(*) FILTER (WHERE status IN ({job_pending}, {job_running})) AS pending"
    " FROM ingestion_jobs WHERE kind = {kind_embed} AND generation_id = %s"
)
EMBED_FAILURES_SQL = compose(
    "SELECT j.document_id, d.filename, a.error_code, a.error_message FROM ingestion_jobs j"
    " JOIN documents d ON d.id = j.document_id"
    " LEFT JOIN LATERAL (SELECT error_code, error_message FROM job_attempts WHERE job_id = j.id"
    "                    ORDER BY id DESC LIMIT 1) a ON true"
    " WHERE j.kind = {kind_embed} AND j.generation_id = %s AND j.status = {job_failed}"
    " ORDER BY d.filename, d.id LIMIT 20"
)
DOCUMENT_PROGRESS_SQL = compose(
    "SELECT count(*) AS total, count(*) FILTER (WHERE status = {doc_ready}) AS ready,"
    " count(*) FILTER (WHERE status = {doc_failed}) AS failed"
    " FROM documents WHERE collection_id = %s"
)
# The quality gates of a collection's generations, with their verdicts if any (with_evaluations).
GATES_SQL = (
    "SELECT g.id, jsonb_array_length(g.eval_set) AS queries, g.eval_min_ratio AS min_ratio, e.passed, e.metric,"
    " e.active_generation, e.active_score, e.candidate_score, e.evaluated_at FROM collection_generations g"
    " LEFT JOIN generation_evaluations e ON e.generation_id = g.id"
    " WHERE g.collection_id = %s AND g.eval_set IS NOT NULL"
)

# A BUILDING generation that may switch: nothing left to embed or failed (cheap: the partial
# index ingestion_jobs_embed_open holds only the unfinished EMBED jobs) and every READY document
# of the collection embedded into it: sluice_generation_complete (migration 0018), the one
# definition that search's listing of generations awaiting a verdict uses too. The sweep lists
# candidates by the first, cheap half.
COMPLETE_SQL = "SELECT sluice_generation_complete(%s)"
SWITCH_CANDIDATES_SQL = compose(
    "SELECT id FROM collection_generations g WHERE state = {gen_building} AND"
    " NOT EXISTS (SELECT 1 FROM ingestion_jobs j WHERE j.generation_id = g.id AND j.kind = {kind_embed}"
    " AND j.status <> {job_succeeded})"
)
# Generations whose grace period after a switch or a cancellation is over (the sweep drops them).
OVER_SQL = compose(
    "SELECT id FROM collection_generations WHERE state IN ({gen_retired}, {gen_cancelled}) AND dropped_at IS NULL"
    " AND ended_at <= now() - make_interval(secs => %s)"
)
MARK_DROPPED_SQL = "UPDATE collection_generations SET dropped_at = now() WHERE id = %s AND dropped_at IS NULL RETURNING id"

CHUNK_COUNT_SQL = "SELECT count(*) FROM chunks WHERE generation_id = %s"

# CancelReindex: the collection's BUILDING generation.
BUILDING_OF_COLLECTION_SQL = compose(
    "SELECT g.id FROM collection_generations g JOIN collections c ON c.id = g.collection_id"
    " WHERE c.tenant_id = %s AND c.name = %s AND g.state = {gen_building}"
)
# A generation's EMBED jobs, locked first (a running EMBED job's commit holds its job, then the generation).
LOCK_EMBED_JOBS_SQL = compose("SELECT 1 FROM ingestion_jobs WHERE generation_id = %s AND kind = {kind_embed} FOR UPDATE")
# What a dropped generation leaves: its EMBED jobs, its chunks (disabled ones too).
DROP_EMBED_JOBS_SQL = compose("DELETE FROM ingestion_jobs WHERE kind = {kind_embed} AND generation_id = %s")
DROP_CHUNKS_SQL = "DELETE FROM chunks WHERE generation_id = %s"
DROP_DISABLED_CHUNKS_SQL = "DELETE FROM disabled_chunks WHERE generation_id = %s"

# The index build (ensure_index): one builder per generation (advisory lock), a BUILDING generation only.
TRY_INDEX_LOCK_SQL = "SELECT pg_try_advisory_lock(%s, %s)"
INDEX_UNLOCK_SQL = "SELECT pg_advisory_unlock(%s, %s)"
INDEX_TARGET_SQL = "SELECT dimensions, state::text AS state, vector_precision FROM collection_generations WHERE id = %s"
RESET_BUILD_SETTINGS_SQL = ("RESET max_parallel_maintenance_workers", "RESET maintenance_work_mem")

# The switch (try_switch): the gate, the two generations, locked ACTIVE first, the collection's
# embedder columns following the new one.
GATE_SQL = (
    "SELECT g.eval_set IS NOT NULL AS gated, e.passed, c.tenant_id::text || ':' || c.name AS channel_payload"
    " FROM collection_generations g JOIN collections c ON c.id = g.collection_id"
    " LEFT JOIN generation_evaluations e ON e.generation_id = g.id WHERE g.id = %s"
)
ANNOUNCE_SQL = "SELECT pg_notify('sluice_collections', %s)"
SWITCH_PAIR_SQL = compose(
    "SELECT g.collection_id, a.id AS active_id FROM collection_generations g"
    " JOIN collection_generations a ON a.collection_id = g.collection_id AND a.state = {gen_active}"
    " WHERE g.id = %s AND g.state = {gen_building}"
)
LOCK_PAIR_SQL = compose("SELECT id FROM collection_generations WHERE id = ANY(%s) ORDER BY state = {gen_building}, id FOR UPDATE")
FOLLOW_SWITCH_SQL = (
    "UPDATE collections c SET embedder_provider = g.embedder_provider, embedder_model = g.embedder_model,"
    " dimensions = g.dimensions, vector_precision = g.vector_precision"
    " FROM collection_generations g WHERE g.id = %s AND c.id = %s"
)

# A refused generation's verdict, the generation locked (_refuse).
LOCK_REFUSED_SQL = (
    "SELECT g.state::text AS state, c.name AS collection, e.active_generation, e.active_score, e.candidate_score,"
    " e.min_ratio, e.queries FROM collection_generations g JOIN collections c ON c.id = g.collection_id"
    " JOIN generation_evaluations e ON e.generation_id = g.id WHERE g.id = %s FOR UPDATE OF g"
)

# The BM25 statistics' compaction (migration 0016).
COMPACTION_DUE_SQL = "SELECT generation_id FROM keyword_stats WHERE term = '' GROUP BY generation_id HAVING count(*) >= %s"
COMPACT_SQL = "SELECT sluice_compact_keyword_stats(%s)"


async def _complete(conn: psycopg.AsyncConnection, generation_id: int) -> bool:
    (complete,) = await one_row(conn, COMPLETE_SQL, (generation_id,))
    return bool(complete)


def _eval_set_json(eval_set: list[dict[str, Any]] | None) -> str | None:
    return None if eval_set is None else json.dumps(eval_set, ensure_ascii=False)


def _same_gate(stored: tuple[object, object], eval_set: list[dict[str, Any]], min_ratio: float) -> bool:
    """Is the gate a retrying call gives the one stored (the ratio is a `real` there)?"""
    stored_set, stored_ratio = stored
    return (
        stored_set == eval_set
        and stored_ratio is not None
        and isinstance(stored_ratio, (int, float))
        and math.isclose(float(stored_ratio), min_ratio, rel_tol=1e-6)
    )


@dataclass(frozen=True)
class _CollectionLock:
    id: int
    vector_precision: str


@dataclass(frozen=True)
class _GenerationSettings:
    id: int
    embedder_provider: str
    embedder_model: str
    dimensions: int
    vector_precision: str

    @property
    def settings(self) -> IndexSettings:
        return IndexSettings(self.embedder_provider, self.embedder_model, self.dimensions, self.vector_precision)


@dataclass(frozen=True)
class _GenerationGate:
    state: str
    eval_set: Any
    eval_min_ratio: float | None


@dataclass(frozen=True, slots=True)
class _Progress:
    total: int
    ready: int
    failed: int
    pending: int = 0


@dataclass(frozen=True, slots=True)
class _Gate:
    id: int
    queries: int
    min_ratio: float
    passed: bool | None
    metric: str | None
    active_generation: int | None
    active_score: float | None
    candidate_score: float | None
    evaluated_at: dt.datetime | None

    @property
    def evaluation(self) -> GenerationEvaluationRow:
        if self.passed is None:
            return GenerationEvaluationRow(self.queries, float(self.min_ratio))
        assert self.metric is not None and self.active_generation is not None
        assert self.active_score is not None and self.candidate_score is not None
        return GenerationEvaluationRow(
            self.queries,
            float(self.min_ratio),
            self.passed,
            self.metric,
            self.active_generation,
            self.active_score,
            self.candidate_score,
            self.evaluated_at,
        )


@dataclass(frozen=True, slots=True)
class _IndexTarget:
    dimensions: int
    state: str
    vector_precision: str


@dataclass(frozen=True, slots=True)
class _SwitchGate:
    gated: bool
    passed: bool | None
    channel_payload: str


@dataclass(frozen=True, slots=True)
class _SwitchPair:
    collection_id: int
    active_id: int


@dataclass(frozen=True, slots=True)
class _Refused:
    state: str
    collection: str
    active_generation: int
    active_score: float
    candidate_score: float
    min_ratio: float
    queries: int


# ReindexCollection's statements, by name; statuses and kinds from the literal table (decide_reindex,
# in domain.py, decides between them).
_REINDEX_SQL: dict[str, bytes] = {
    name: compose(text)
    for name, text in {
        # FOR NO KEY UPDATE, not FOR UPDATE: it still serialises reindexes of the collection, but
        # lets the foreign-key checks of a concurrent commit (FOR KEY SHARE on this row, for its
        # chunks and events) through. FOR UPDATE made that commit wait here while it held the
        # ACTIVE generation FOR SHARE, which this transaction locks next: a deadlock.
        "lock_collection": "SELECT id, vector_precision FROM collections WHERE tenant_id = %s AND name = %s FOR NO KEY UPDATE",
        "lock_active": "SELECT id, embedder_provider, embedder_model, dimensions, vector_precision"
        " FROM collection_generations WHERE collection_id = %s AND state = {gen_active} FOR UPDATE",
        "building": "SELECT id, embedder_provider, embedder_model, dimensions, vector_precision"
        " FROM collection_generations WHERE collection_id = %s AND state = {gen_building}",
        "lock_failed_embed_jobs": "SELECT id FROM ingestion_jobs WHERE kind = {kind_embed} AND generation_id = %s"
        " AND status = {job_failed} FOR UPDATE",
        "lock_building": "SELECT state::text AS state, eval_set, eval_min_ratio FROM collection_generations"
        " WHERE id = %s FOR UPDATE",
        "new_generation": "INSERT INTO collection_generations (tenant_id, collection_id, number, embedder_provider,"
        " embedder_model, dimensions, eval_set, eval_min_ratio, vector_precision)"
        " SELECT %s, %s, max(number) + 1, %s, %s, %s, %s::jsonb, %s, %s"
        " FROM collection_generations WHERE collection_id = %s RETURNING id",
        "embed_jobs_of_ready_documents": "INSERT INTO ingestion_jobs (document_id, kind, generation_id, max_attempts)"
        " SELECT d.id, {kind_embed}, %s, c.max_attempts FROM documents d JOIN collections c ON c.id = d.collection_id"
        " WHERE d.collection_id = %s AND d.status = {doc_ready}",
    }.items()
}


async def generations_of(conn: psycopg.AsyncConnection, collection_id: int) -> tuple[GenerationRow, ...]:
    """A collection's generations in order, each with its progress and its quality gate."""
    rows = await named_rows(conn, GenerationRow, GENERATIONS_OF_SQL, (collection_id,))
    out = []
    for row in rows:
        if row.state == GenerationState.BUILDING:
            jobs = await named_row(conn, _Progress, EMBED_PROGRESS_SQL, (row.id,))
            assert jobs is not None  # an aggregate: always one row
            failures = await named_rows(conn, GenerationFailure, EMBED_FAILURES_SQL, (row.id,))
            row = replace(
                row,
                documents_total=jobs.total,
                documents_ready=jobs.ready,
                documents_failed=jobs.failed,
                documents_pending=jobs.pending,
                failures=tuple(failures),
            )
        elif row.state == GenerationState.ACTIVE:
            documents = await named_row(conn, _Progress, DOCUMENT_PROGRESS_SQL, (collection_id,))
            assert documents is not None  # an aggregate: always one row
            row = replace(
                row,
                documents_total=documents.total,
                documents_ready=documents.ready,
                documents_failed=documents.failed,
                documents_pending=documents.total - documents.ready - documents.failed,
            )
        out.append(row)
    return await with_evaluations(conn, collection_id, out)


async def with_evaluations(
    conn: psycopg.AsyncConnection, collection_id: int, rows: list[GenerationRow]
) -> tuple[GenerationRow, ...]:
    """The gate of every generation reindexed with an eval set, with its verdict if any."""
    gates = await named_rows(conn, _Gate, GATES_SQL, (collection_id,))
    if not gates:
        return tuple(rows)
    by_id = {gate.id: gate.evaluation for gate in gates}
    return tuple(replace(row, evaluation=by_id[row.id]) if row.id in by_id else row for row in rows)


async def with_generations(conn: psycopg.AsyncConnection, row: CollectionRow) -> CollectionRow:
    """The collection with its generations and their progress (GetCollection's answer)."""
    return replace(row, generations=await generations_of(conn, row.id))


class GenerationStore(StoreBase):
    def __init__(self, pool: AsyncConnectionPool, *, inline_index_max_chunks: int = 20000) -> None:
        super().__init__(pool)
        self.inline_index_max_chunks = inline_index_max_chunks
        self._builds: set[asyncio.Task[bool]] = set()

    async def switch_after_commit(self, generation_id: int) -> None:
        """After an EMBED commit: if it completed its generation, the index build and the switch
        (try_switch). A generation of at most `inline_index_max_chunks` chunks is built before
        this returns (the commit's answer then follows the switch, unless the sweep was building
        that index at the moment: then the sweep switches once its build is done, an instant
        after this answer; tests wait for the switch rather than assume it); a larger one's build runs in
        the background, because CompleteJob's caller, a worker, would otherwise wait minutes for
        it. If ingest-api stops first, the cancelled build leaves an invalid index that the
        sweep's try_switch drops and builds again."""
        async with self.pool.connection() as conn:
            if not await _complete(conn, generation_id):
                return
            (chunks,) = await one_row(conn, CHUNK_COUNT_SQL, (generation_id,))
        if chunks <= self.inline_index_max_chunks:
            await self.try_switch(generation_id)
            return
        build = asyncio.create_task(self.try_switch(generation_id), name=f"generation-{generation_id}-index")
        self._builds.add(build)
        build.add_done_callback(self._build_done)

    def _build_done(self, build: asyncio.Task[bool]) -> None:
        self._builds.discard(build)
        if not build.cancelled() and build.exception() is not None:
            log.error("building a generation's index failed; the sweep tries again", exc_info=build.exception())

    async def collection_with_generations(self, tenant_id: int, name: str) -> CollectionRow:
        async with self.pool.connection() as conn, conn.transaction():
            return await with_generations(conn, await lookup_collection(conn, tenant_id, name))

    async def reindex_collection(
        self,
        tenant_id: int,
        name: str,
        provider: str,
        model: str,
        dimensions: int,
        eval_set: list[dict[str, Any]] | None = None,
        min_ratio: float = 1.0,
        *,
        vector_precision: str | None = None,
    ) -> CollectionRow:
        """A BUILDING generation with the new embedder and an EMBED job per READY document; or,
        when a BUILDING generation with this embedder exists, fresh attempts for its failed jobs.

        `eval_set` (checked by the service: [{"query", "relevant", "id"}, ...]) gates the switch
        on search's verdict (module docstring); it is fixed when the generation is created: a
        retrying call may repeat it or leave it out, not change it.

        `vector_precision` (None: the collection's) is the new generation's index precision; a
        reindex to the same embedder with another precision is a reindex too (docs/search.md,
        "Vector precision")."""
        async with self.pool.connection() as conn, conn.transaction():
            # FOR NO KEY UPDATE, not FOR UPDATE: it still serialises reindexes of the collection, but
            # lets the foreign-key checks of a concurrent commit (FOR KEY SHARE on this row, for its
            # chunks and events) through. FOR UPDATE made that commit wait here while it held the
            # ACTIVE generation FOR SHARE, which this transaction locks next: a deadlock.
            found = await (
                await conn.cursor(row_factory=class_row(_CollectionLock)).execute(
                    _REINDEX_SQL["lock_collection"], (tenant_id, name)
                )
            ).fetchone()
            if found is None:
                raise NotFound(f"collection {name!r} does not exist", reason=Reason.COLLECTION_NOT_FOUND, collection=name)
            wanted = IndexSettings(provider, model, dimensions, vector_precision or found.vector_precision)
            # The ACTIVE generation is locked before anything is read: a concurrent INGEST commit
            # (FOR SHARE on it) either committed READY before (its document gets a job here) or
            # waits and then sees the new BUILDING generation (it adds the job itself).
            active = await (
                await conn.cursor(row_factory=class_row(_GenerationSettings)).execute(_REINDEX_SQL["lock_active"], (found.id,))
            ).fetchone()
            assert active is not None, "every collection has an ACTIVE generation"
            # Read without a lock: a BUILDING generation is locked only after its jobs (the order of
            # EMBED commits and CancelReindex: jobs, then the generation).
            building_row = await (
                await conn.cursor(row_factory=class_row(_GenerationSettings)).execute(_REINDEX_SQL["building"], (found.id,))
            ).fetchone()
            building = None
            failed: list[tuple[Any, ...]] = []
            if building_row is not None:
                failed = await (await conn.execute(_REINDEX_SQL["lock_failed_embed_jobs"], (building_row.id,))).fetchall()
                still = await (
                    await conn.cursor(row_factory=class_row(_GenerationGate)).execute(
                        _REINDEX_SQL["lock_building"], (building_row.id,)
                    )
                ).fetchone()
                building = BuildingGeneration(
                    building_row.settings,
                    still is not None and still.state == GenerationState.BUILDING,
                    None
                    if eval_set is None or still is None
                    else _same_gate((still.eval_set, still.eval_min_ratio), eval_set, min_ratio),
                    len(failed),
                )
            decision = decide_reindex(name, wanted, active.settings, building)
            if decision is ReindexDecision.RETRY_FAILED:
                assert building_row is not None
                for (job_id,) in failed:
                    await move_job(
                        conn,
                        job_id,
                        JobStatus.PENDING,
                        {"attempts": 0, "available_at": NOW, **RELEASED_LEASE},
                        sources=[JobStatus.FAILED],
                    )
                generation_id = building_row.id
            else:
                (generation_id,) = await one_row(
                    conn,
                    _REINDEX_SQL["new_generation"],
                    (
                        tenant_id,
                        found.id,
                        provider,
                        model,
                        dimensions,
                        _eval_set_json(eval_set),
                        None if eval_set is None else min_ratio,
                        wanted.precision,
                        found.id,
                    ),
                )
                await conn.execute(_REINDEX_SQL["embed_jobs_of_ready_documents"], (generation_id, found.id))
        # Its chunks are bulk-loaded first: EMBED commits insert into no HNSW graph of this
        # generation, and the index is built once over all of them when the generation is complete
        # (try_switch, called by every EMBED commit and by the sweep), several times faster than
        # growing a graph row by row (docs/search.md, "Vector precision"). With nothing READY to
        # embed it is complete now: built and switched here.
        await self.try_switch(generation_id, wait=True)
        return await self.collection_with_generations(tenant_id, name)

    async def cancel_reindex(self, tenant_id: int, name: str) -> CollectionRow:
        """The BUILDING generation is CANCELLED; its jobs, chunks and index are dropped."""
        async with self.pool.connection() as conn, conn.transaction():
            row = await (await conn.execute(BUILDING_OF_COLLECTION_SQL, (tenant_id, name))).fetchone()
            if row is None:
                await lookup_collection_settings(conn, tenant_id, name)  # NOT_FOUND for a missing collection
                raise FailedPrecondition(
                    f"collection {name!r} has no reindex in progress", reason=Reason.NO_REINDEX_IN_PROGRESS, collection=name
                )
            generation_id = row[0]
            # Lock order: its jobs first (a running EMBED job's commit holds its job, then the generation).
            await conn.execute(LOCK_EMBED_JOBS_SQL, (generation_id,))
            await self._cancel(conn, generation_id)
        log.info("reindex cancelled", extra={"generation_id": generation_id})
        return await self.collection_with_generations(tenant_id, name)

    async def _cancel(self, conn: psycopg.AsyncConnection, generation_id: int) -> None:
        """BUILDING → CANCELLED (CancelReindex, or a refusal by its eval set), dropped at once; its
        jobs are locked by the caller."""
        await move_generation(
            conn,
            generation_id,
            GenerationState.CANCELLED,
            {"ended_at": NOW, "dropped_at": NOW},
            sources=[GenerationState.BUILDING],
        )
        await self._drop_generation(conn, generation_id)

    async def _drop_generation(self, conn: psycopg.AsyncConnection, generation_id: int, *, index: bool = True) -> None:
        """Its EMBED jobs (a worker on one learns at its next lease renewal), chunks (disabled ones too)
        and (`index`) HNSW index."""
        await conn.execute(DROP_EMBED_JOBS_SQL, (generation_id,))
        await conn.execute(DROP_CHUNKS_SQL, (generation_id,))
        await conn.execute(DROP_DISABLED_CHUNKS_SQL, (generation_id,))
        if index:
            await conn.execute(vector_index.drop_index_sql(generation_id))

    async def ensure_index(self, generation_id: int, *, wait: bool = True) -> bool:
        """Build the BUILDING generation's partial HNSW index CONCURRENTLY (writes to chunks go on),
        replacing an invalid one a failed build left. One builder per generation at a time
        (advisory lock; `wait=False` skips a generation another process is building). True when
        the index is valid.

        Waiting polls the lock instead of blocking on it: a session blocked in pg_advisory_lock
        is a transaction that the holder's CREATE INDEX CONCURRENTLY waits for, a deadlock."""
        async with self.pool.connection() as conn:
            while True:
                (locked,) = await one_row(conn, TRY_INDEX_LOCK_SQL, (INDEX_LOCK_CLASS, generation_id))
                if locked:
                    break
                if not wait:
                    return False
                await asyncio.sleep(0.2)
            try:
                target = await named_row(conn, _IndexTarget, INDEX_TARGET_SQL, (generation_id,))
                if target is None or target.state != GenerationState.BUILDING:
                    return False
                state = await (await conn.execute(vector_index.index_state_sql(generation_id))).fetchone()
                if state is not None and state[0]:
                    return True
                if state is not None:
                    await conn.execute(vector_index.drop_index_sql(generation_id, concurrently=True))
                # A parallel build sized to the machine, in this session only (reset below).
                for setting in vector_index.build_settings_sql():
                    await conn.execute(setting)
                await conn.execute(
                    vector_index.create_index_sql(
                        generation_id, target.dimensions, precision=target.vector_precision, concurrently=True
                    )
                )
                return True
            finally:
                for reset in RESET_BUILD_SETTINGS_SQL:
                    await conn.execute(reset)
                await conn.execute(INDEX_UNLOCK_SQL, (INDEX_LOCK_CLASS, generation_id))

    async def try_switch(self, generation_id: int, *, announce: bool = True, wait: bool = False) -> bool:
        """The switch, in one transaction, if the BUILDING generation is complete: it becomes
        ACTIVE, the ACTIVE one RETIRED, the collection's embedder columns follow, and the
        generations' trigger NOTIFYs `sluice_collections`. True when it switched.

        A gated generation (reindexed with an eval set) switches only with a PASSED verdict; with
        none yet, `announce` NOTIFYs `sluice_collections` so that search's gate measures it now
        rather than at its next poll; with a FAILED one it is cancelled (`_refuse`). Unless `wait`,
        it gives up when another caller is building the generation's index (ensure_index): that
        caller switches once its build is done, or the sweep does."""
        async with self.pool.connection() as conn:
            # Without locks first: every EMBED commit calls this after its own commit, so the last
            # one to commit sees all the others; only a complete generation pays for the locks.
            if not await _complete(conn, generation_id):
                return False
        # Complete: its index, built once over its bulk-loaded chunks (reindex_collection), by the
        # last EMBED commit's call (a concurrent one leaves it to the builder); before the gate,
        # which searches the generation through it.
        if not await self.ensure_index(generation_id, wait=wait):
            return False
        async with self.pool.connection() as conn:
            gate = await named_row(conn, _SwitchGate, GATE_SQL, (generation_id,))
            if gate is None:
                return False
            if gate.gated and gate.passed is None:
                if announce:
                    await conn.execute(ANNOUNCE_SQL, (gate.channel_payload,))
                return False
        if gate.gated and gate.passed is False:
            await self._refuse(generation_id)
            return False
        async with self.pool.connection() as conn, conn.transaction():
            pair = await named_row(conn, _SwitchPair, SWITCH_PAIR_SQL, (generation_id,))
            if pair is None:
                return False
            collection_id, active_id = pair.collection_id, pair.active_id
            locked = await (await conn.execute(LOCK_PAIR_SQL, ([active_id, generation_id],))).fetchall()
            # Asked again under the locks: sluice_generation_complete requires BUILDING, so a caller
            # that lost the race to the switch (the sweep, another EMBED commit's call) stops here
            # rather than failing its own commit's answer in move_generation (a test races two).
            if len(locked) != 2 or not await _complete(conn, generation_id):
                return False
            # Never switch search onto a generation without its index (a concurrent cancel, or a failed build).
            index = await (await conn.execute(vector_index.index_state_sql(generation_id))).fetchone()
            if index is None or not index[0]:
                return False
            await move_generation(conn, active_id, GenerationState.RETIRED, {"ended_at": NOW}, sources=[GenerationState.ACTIVE])
            await move_generation(
                conn, generation_id, GenerationState.ACTIVE, {"activated_at": NOW}, sources=[GenerationState.BUILDING]
            )
            await conn.execute(FOLLOW_SWITCH_SQL, (generation_id, collection_id))
        log.info("index generation switched", extra={"generation_id": generation_id, "retired": active_id})
        return True

    async def _refuse(self, generation_id: int) -> None:
        """A complete generation whose eval set scored lower than the ACTIVE one (FAILED verdict):
        BUILDING → CANCELLED and dropped as CancelReindex drops it, the verdict kept; the ACTIVE
        generation never stopped serving."""
        async with self.pool.connection() as conn, conn.transaction():
            # Lock order: its jobs first, then the generation (as cancel_reindex).
            await conn.execute(LOCK_EMBED_JOBS_SQL, (generation_id,))
            refused = await named_row(conn, _Refused, LOCK_REFUSED_SQL, (generation_id,))
            if refused is None or refused.state != GenerationState.BUILDING:
                return  # cancelled, or refused by another caller, meanwhile
            await self._cancel(conn, generation_id)
        log.warning(
            "reindex refused by its eval set: the new generation scored lower than the active one",
            extra={
                "generation_id": generation_id,
                "collection": refused.collection,
                "active_generation": refused.active_generation,
                "metric": "mrr@10",
                "active_score": round(refused.active_score, 4),
                "candidate_score": round(refused.candidate_score, 4),
                "min_ratio": round(float(refused.min_ratio), 4),
                "queries": refused.queries,
            },
        )

    async def compact_keyword_stats(self, min_statements: int = 32) -> int:
        """Fold the BM25 statistics of every generation that gathered `min_statements` delta
        statements since its last compaction (migration 0016); returns the rows removed."""
        removed = 0
        async with self.pool.connection() as conn:
            due = await (await conn.execute(COMPACTION_DUE_SQL, (min_statements,))).fetchall()
            for (generation_id,) in due:
                row = await (await conn.execute(COMPACT_SQL, (generation_id,))).fetchone()
                removed += int(row[0]) if row else 0
        return removed

    async def sweep_generations(self, grace_seconds: float) -> tuple[int, int]:
        """The periodic safety net and clean-up: switch every BUILDING generation that is complete
        (a deletion may have completed it; its index is built first if a build failed or its
        process died), and drop the chunks and index of generations
        RETIRED more than `grace_seconds` ago (a search that resolved the old generation just
        before its switch still finds its rows meanwhile). Returns (switched, dropped)."""
        async with self.pool.connection() as conn:
            building = await (await conn.execute(SWITCH_CANDIDATES_SQL)).fetchall()
            over = await (await conn.execute(OVER_SQL, (grace_seconds,))).fetchall()
        switched = 0
        for (generation_id,) in building:
            # No announcement from here: search's gate polls on its own, and a NOTIFY every sweep
            # would drop the collection from search's cache every second.
            switched += await self.try_switch(generation_id, announce=False, wait=False)
        for (generation_id,) in over:
            # The index first, CONCURRENTLY (no lock on chunks that would stall every search), then
            # the rows; a crash in between is repaired by the next sweep (both steps are idempotent).
            async with self.pool.connection() as conn:
                await conn.execute(vector_index.drop_index_sql(generation_id, concurrently=True))
            async with self.pool.connection() as conn, conn.transaction():
                await conn.execute(LOCK_EMBED_JOBS_SQL, (generation_id,))
                row = await (await conn.execute(MARK_DROPPED_SQL, (generation_id,))).fetchone()
                if row is not None:
                    await self._drop_generation(conn, generation_id, index=False)
        return switched, len(over)


__all__ = ["GenerationStore", "generations_of", "with_generations"]
