"""The queue: claims (rules 6 and 8), leases and their fencing, stages, snapshots and the
end of every attempt (rules 1 and 7)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row, dict_row
from psycopg.types.json import Jsonb

from sluice_common.errors import (
    FailedPrecondition,
    LeaseNotHeld,
    NotFound,
)
from sluice_common.reasons import Reason

from .. import metrics
from ..domain import (
    IN_PROGRESS,
    LEASE_EXPIRED_EXHAUSTED,
    LEASE_EXPIRED_RETRYING,
    AttemptOutcome,
    IllegalTransition,
    check_document_transition,
    document_sources,
    job_sources,
    retry_delay_seconds,
    retry_message,
    should_retry,
    DocumentStatus as D,
    GenerationState,
    JobKind,
    JobStatus as J,
)
from ..transitions import (
    NOW,
    RELEASED_LEASE,
    Expr,
    document_move_sql,
    move_document,
    move_job,
    send_move_document,
    send_move_job,
)
from .common import FRESH_PROGRESS, NO_ERROR, _one
from .generations import GenerationStore
from .rows import ChunkRow, ClaimedJob, DocumentRow

# The claims (PostgresStore.claim_job). Statuses come from the transition table (the claim is the
# PENDING→RUNNING and RUNNING→RUNNING edges).
INLINE_CONTENT_BYTES = 1024 * 1024  # a document this small is sent with its claim (Job.content)

# The claimed job's update, its attempt row and what the worker needs; shared by both claims.
# `candidate` (id, expired_token) is the job to claim; `{others}` adds the claim's other rows.
CLAIM_TAIL = """
, claimed AS (
    UPDATE ingestion_jobs j
    SET status = {running}, attempts = j.attempts + 1, locked_at = now(), locked_by = %(worker)s,
        lease_token = gen_random_uuid(), updated_at = now(), progress_stage = NULL, progress_done = 0, progress_total = 0,
        -- An INGEST attempt embeds for the generation ACTIVE now; an EMBED job keeps its own.
        generation_id = CASE WHEN j.kind = {ingest} THEN (
            SELECT g.id FROM documents gd JOIN collection_generations g ON g.collection_id = gd.collection_id
            WHERE gd.id = j.document_id AND g.state = {active}) ELSE j.generation_id END
    FROM candidate
    WHERE j.id = candidate.id AND j.status = ANY(%(sources)s)
    RETURNING j.id, j.document_id, j.attempts, j.max_attempts, j.lease_token, candidate.expired_token, j.trace_context,
              j.kind, j.generation_id
), attempt AS (
    INSERT INTO job_attempts (job_id, number, worker_id, lease_token)
    SELECT id, attempts, %(worker)s, lease_token FROM claimed
)
SELECT 'claimed' AS kind, c.id AS job_id, c.lease_token, c.attempts, c.max_attempts, c.expired_token,
       d.id AS document_id, d.filename, d.mime_type, d.content_sha256, d.size_bytes, d.metadata,
       col.name AS collection, g.embedder_provider, g.embedder_model, g.dimensions,
       col.chunk_max_characters, col.chunk_new_after_n_chars, col.chunk_overlap, c.trace_context,
       c.kind::text AS job_kind, g.id AS generation_id, g.number AS generation_number,
       -- A small document travels with its claim, and the snapshots saved for its content are
       -- listed: a first attempt then makes neither ReadDocumentContent nor ReadSnapshot.
       CASE WHEN d.size_bytes <= {inline} THEN (SELECT dc.content FROM document_contents dc WHERE dc.document_id = d.id)
       END AS content,
       ARRAY(SELECT s.pipeline_version FROM chunk_snapshots s
             WHERE s.tenant_id = d.tenant_id AND s.content_sha256 = d.content_sha256) AS snapshot_versions
FROM claimed c JOIN documents d ON d.id = c.document_id JOIN collections col ON col.id = d.collection_id
     JOIN collection_generations g ON g.id = c.generation_id
UNION ALL
{others}
"""

# Rules 6 and 8 in one statement, in the caller's transaction (PostgresStore.claim_job): an
# exhausted expired lease to converge, else an expired lease to take over, else a due job.
CLAIM_SQL = sql.SQL("""
WITH exhausted AS (
    SELECT id, document_id, lease_token, kind, generation_id FROM ingestion_jobs
    WHERE status = {running} AND attempts >= max_attempts AND locked_at <= now() - make_interval(secs => %(lease)s)
    ORDER BY locked_at LIMIT 1 FOR UPDATE SKIP LOCKED
), expired AS (
    SELECT id, lease_token AS expired_token FROM ingestion_jobs
    WHERE status = {running} AND attempts < max_attempts AND locked_at <= now() - make_interval(secs => %(lease)s)
      AND NOT EXISTS (SELECT 1 FROM exhausted)
    ORDER BY locked_at LIMIT 1 FOR UPDATE SKIP LOCKED
), due AS (
    SELECT id, NULL::uuid AS expired_token FROM ingestion_jobs
    WHERE status = {pending} AND attempts < max_attempts AND available_at <= now()
      AND NOT EXISTS (SELECT 1 FROM exhausted) AND NOT EXISTS (SELECT 1 FROM expired)
    ORDER BY available_at LIMIT 1 FOR UPDATE SKIP LOCKED
), candidate AS (
    SELECT * FROM expired UNION ALL SELECT * FROM due
)""" + CLAIM_TAIL.replace("{others}", """
SELECT 'exhausted', e.id, e.lease_token, NULL, NULL, NULL, e.document_id, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, e.kind::text, e.generation_id, NULL, NULL, NULL
FROM exhausted e""")).format(
    # Literals, not parameters: the partial indexes on status (0001) match only a literal,
    # also once the statement is prepared. Their values come from the job table's enum.
    running=sql.Literal(str(J.RUNNING)),
    pending=sql.Literal(str(J.PENDING)),
    ingest=sql.Literal(str(JobKind.INGEST)),
    active=sql.Literal(str(GenerationState.ACTIVE)),
    inline=sql.Literal(INLINE_CONTENT_BYTES),
).as_bytes(None)

# The common claim, a statement of its own (autocommit: one round trip in all): the oldest due
# job, unless some lease has expired. Then it claims nothing and returns one "overdue" row, and
# the caller runs CLAIM_SQL in a transaction (which converges or takes over the expired lease
# with the statements that go with it). The look for an expired lease takes no lock.
FAST_CLAIM_SQL = sql.SQL("""
WITH overdue AS (
    SELECT 1 FROM ingestion_jobs
    WHERE status = {running} AND locked_at <= now() - make_interval(secs => %(lease)s)
    LIMIT 1
), candidate AS (
    SELECT id, NULL::uuid AS expired_token FROM ingestion_jobs
    WHERE status = {pending} AND attempts < max_attempts AND available_at <= now()
      AND NOT EXISTS (SELECT 1 FROM overdue)
    ORDER BY available_at LIMIT 1 FOR UPDATE SKIP LOCKED
)""" + CLAIM_TAIL.replace("{others}", """
SELECT 'overdue', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM overdue""")).format(
    running=sql.Literal(str(J.RUNNING)),
    pending=sql.Literal(str(J.PENDING)),
    ingest=sql.Literal(str(JobKind.INGEST)),
    active=sql.Literal(str(GenerationState.ACTIVE)),
    inline=sql.Literal(INLINE_CONTENT_BYTES),
).as_bytes(None)  # rendered once (a Composed is rendered again on every execute), as the statements below

# ReportStage in one statement (QueueStore.report_stage). `job` fences: it matches only while
# this lease holds the RUNNING job, renews the lease and, for an EMBED job, records the progress
# on the job itself (an EMBED job never touches its READY document). `doc` locks an INGEST job's
# document (job row first, then document: the lock order used everywhere). Then exactly one of
# `tick` (the document is already in this stage: progress only) or `moved` (the stage change,
# along DOCUMENT_TRANSITIONS: `sources` is document_sources(stage)) writes the document. The
# attempt records its stage on a move (and on every EMBED report). A tick or an EMBED report
# commits asynchronously: set_config(…, is_local) holds for this statement's own transaction.
# The lease is renewed only once a tenth of it has passed (`renew_after`): reports that follow
# each other quickly then leave `locked_at`, an indexed column, unchanged, and PostgreSQL updates
# the job row in place (HOT, migration 0015); the lease is never shorter than 0.9 of its length.
# Zero rows: the lease is not held. `moved` false on an INGEST job in another stage: illegal edge.
REPORT_STAGE_SQL = sql.SQL("""
WITH job AS (
    UPDATE ingestion_jobs
    SET locked_at = CASE WHEN locked_at <= now() - make_interval(secs => %(renew_after)s) THEN now() ELSE locked_at END,
        progress_stage = CASE WHEN kind = {embed} THEN %(stage)s::document_status ELSE progress_stage END,
        progress_done = CASE WHEN kind = {embed} THEN %(done)s ELSE progress_done END,
        progress_total = CASE WHEN kind = {embed} THEN %(total)s ELSE progress_total END,
        updated_at = CASE WHEN kind = {embed} THEN now() ELSE updated_at END
    WHERE id = %(job)s AND lease_token = %(lease)s AND status = {running}
    RETURNING id, document_id, kind, locked_at
), doc AS (
    SELECT d.id, d.status FROM documents d JOIN job ON d.id = job.document_id AND job.kind = {ingest}
    FOR UPDATE OF d
), tick AS (
    UPDATE documents d SET progress_stage = %(stage)s::document_status, progress_done = %(done)s,
        progress_total = %(total)s, progress_unit = %(unit)s, updated_at = now()
    FROM doc WHERE d.id = doc.id AND doc.status = %(stage)s::document_status
    RETURNING d.id
), moved AS (
    {move}
), attempt AS (
    UPDATE job_attempts SET stage = %(stage)s::document_status
    WHERE lease_token = %(lease)s AND (EXISTS (SELECT 1 FROM moved) OR EXISTS (SELECT 1 FROM job WHERE kind = {embed}))
)
SELECT job.locked_at, job.kind::text, doc.status::text, EXISTS (SELECT 1 FROM moved) AS moved,
       CASE WHEN NOT EXISTS (SELECT 1 FROM moved) THEN set_config('synchronous_commit', 'off', true) END
FROM job LEFT JOIN doc ON true
""").format(
    running=sql.Literal(str(J.RUNNING)),
    ingest=sql.Literal(str(JobKind.INGEST)),
    embed=sql.Literal(str(JobKind.EMBED)),
    move=document_move_sql("%(stage)s::document_status", {
        "error_code": "NULL", "error_message": "NULL", "progress_stage": "%(stage)s::document_status",
        "progress_done": "%(done)s", "progress_total": "%(total)s", "progress_unit": "%(unit)s", "updated_at": "now()",
    }, where="id = (SELECT id FROM doc WHERE status <> %(stage)s::document_status)",
        sources="%(sources)s::document_status[]"),
).as_bytes(None)


# SaveSnapshot in one statement: fence the lease (renewed as ReportStage renews it) and store the
# chunk list under the content's hash and the pipeline version. No row: the lease is not held.
SAVE_SNAPSHOT_SQL = sql.SQL("""
WITH job AS (
    UPDATE ingestion_jobs
    SET locked_at = CASE WHEN locked_at <= now() - make_interval(secs => %(renew_after)s) THEN now() ELSE locked_at END
    WHERE id = %(job)s AND lease_token = %(lease)s AND status = {running}
    RETURNING document_id
)
INSERT INTO chunk_snapshots (tenant_id, content_sha256, pipeline_version, chunk_count, chunks)
SELECT d.tenant_id, d.content_sha256, %(version)s, %(count)s, %(chunks)s FROM job JOIN documents d ON d.id = job.document_id
ON CONFLICT (tenant_id, content_sha256, pipeline_version)
DO UPDATE SET chunks = EXCLUDED.chunks, chunk_count = EXCLUDED.chunk_count, created_at = now()
RETURNING 1
""").format(running=sql.Literal(str(J.RUNNING))).as_bytes(None)


# CompleteJob's first round trip: fence (and renew) the lease, lock the document and, FOR SHARE,
# the generation the job writes into (job, document, generation: the lock order used
# everywhere), and delete the chunks this commit replaces, only when complete_job's checks will
# pass (an INGEST job into the ACTIVE generation of an INDEXING document: every generation's
# chunks; an EMBED job into its BUILDING generation of a READY document: that generation's).
COMPLETE_LOCK_SQL = sql.SQL("""
WITH job AS (
    UPDATE ingestion_jobs SET locked_at = now()
    WHERE id = %(job)s AND lease_token = %(lease)s AND status = {running}
    RETURNING id, document_id, attempts, max_attempts, lease_token, locked_at, kind, generation_id
), locked AS (
    SELECT job.id, job.document_id, job.attempts, job.max_attempts, job.lease_token, job.locked_at,
           job.kind::text AS kind, job.generation_id, d.status::text AS document_status, d.collection_id, d.tenant_id,
           g.state::text AS generation_state
    FROM job JOIN documents d ON d.id = job.document_id JOIN collection_generations g ON g.id = job.generation_id
    FOR UPDATE OF d FOR SHARE OF g
), cleared AS (
    DELETE FROM chunks c USING locked l
    WHERE c.document_id = l.document_id AND (
        (l.kind = {ingest} AND l.generation_state = {active} AND l.document_status = {indexing})
        OR (l.kind = {embed} AND l.generation_state = {building} AND l.document_status = {ready}
            AND c.generation_id = l.generation_id))
)
SELECT * FROM locked
""").format(
    running=sql.Literal(str(J.RUNNING)),
    ingest=sql.Literal(str(JobKind.INGEST)),
    embed=sql.Literal(str(JobKind.EMBED)),
    active=sql.Literal(str(GenerationState.ACTIVE)),
    building=sql.Literal(str(GenerationState.BUILDING)),
    indexing=sql.Literal(str(D.INDEXING)),
    ready=sql.Literal(str(D.READY)),
).as_bytes(None)


class QueueStore(GenerationStore):
    async def claim_job(self, worker_id: str) -> ClaimedJob | None:
        """Rules 6 and 8: one statement, one round trip, on the common path.

        FAST_CLAIM_SQL, in autocommit, claims the oldest due job with FOR UPDATE SKIP LOCKED,
        writes the attempt row and returns the job with its document and collection, unless
        some lease has expired. Then CLAIM_SQL runs in a transaction: it first looks for an
        exhausted job whose lease expired (rule 8): if there is one, it claims nothing and hands
        it back here to be converged, and this call returns nothing. Otherwise it claims under
        the claim condition (an expired lease first, then the oldest due job); the takeover of
        an expired lease needs two more statements (close the lost attempt, move the document).
        """
        params = {"worker": worker_id, "lease": self.policy.lease_seconds, "sources": job_sources(J.RUNNING)}
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row(ClaimedJob))
            await cur.execute(FAST_CLAIM_SQL, params)
            row = await cur.fetchone()
            if row is None or row.kind == "claimed":
                return row
        async with self.pool.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=class_row(ClaimedJob))
            await cur.execute(CLAIM_SQL, params)
            row = await cur.fetchone()
            if row is None:
                return None
            if row.kind == "exhausted":
                outcome = await self._converge_exhausted(conn, row)
                metrics.LEASE_EXPIRIES.labels(outcome=outcome).inc()
                return None
            if row.expired_token is not None:
                metrics.LEASE_EXPIRIES.labels(outcome="reclaimed").inc()
                # Taking over an expired lease: close the lost attempt; the document goes back to
                # PENDING (rule 7's message) until the new worker reports its first stage. An
                # EMBED job never moves its (READY) document.
                await self._end_attempt(conn, row.expired_token, AttemptOutcome.LEASE_EXPIRED,
                                        "LEASE_EXPIRED", LEASE_EXPIRED_RETRYING, True)
                if row.job_kind == JobKind.EMBED:
                    return row
                assert row.attempts is not None and row.max_attempts is not None  # a claimed row has them
                await move_document(conn, row.document_id, D.PENDING, {
                    **FRESH_PROGRESS, "error_code": "LEASE_EXPIRED",
                    "error_message": retry_message(row.attempts - 1, row.max_attempts, LEASE_EXPIRED_RETRYING),
                }, sources=IN_PROGRESS | {D.PENDING})
            return row

    async def _converge_exhausted(self, conn: psycopg.AsyncConnection, job: ClaimedJob) -> str:
        """Rule 8: an expired lease with no attempts left ends the job for good; returns the outcome.
        (`job` is CLAIM_SQL's "exhausted" row: job_id, document_id, lease_token, job_kind.)
        An EMBED job fails for its generation and leaves its document alone."""
        if job.job_kind == JobKind.EMBED:
            await move_job(conn, job.job_id, J.FAILED, RELEASED_LEASE)
            await self._end_attempt(conn, job.lease_token, AttemptOutcome.LEASE_EXPIRED, "LEASE_EXPIRED",
                                    LEASE_EXPIRED_EXHAUSTED, False)
            return "failed"
        doc = await _one(conn, "SELECT status::text FROM documents WHERE id = %s FOR UPDATE", (job.document_id,))
        if doc[0] == D.READY:
            # The crash hit the window after the commit: the work is done.
            await move_job(conn, job.job_id, J.SUCCEEDED, RELEASED_LEASE)
            await self._end_attempt(conn, job.lease_token, AttemptOutcome.SUCCEEDED, None, None, None)
            return "succeeded"
        await move_document(conn, job.document_id, D.FAILED,
                            {"error_code": "LEASE_EXPIRED", "error_message": LEASE_EXPIRED_EXHAUSTED})
        await move_job(conn, job.job_id, J.FAILED, RELEASED_LEASE)
        await self._end_attempt(conn, job.lease_token, AttemptOutcome.LEASE_EXPIRED, "LEASE_EXPIRED",
                                LEASE_EXPIRED_EXHAUSTED, False)
        return "failed"

    async def next_wakeup(self) -> dt.timedelta | None:
        """How long until the next job becomes claimable without a notification (a delayed retry
        or a lease expiry); None when nothing is waiting."""
        async with self.pool.connection() as conn:
            row = await _one(
                conn,
                """
                SELECT least(
                    (SELECT min(available_at) FROM ingestion_jobs WHERE status = 'PENDING'),
                    (SELECT min(locked_at) FROM ingestion_jobs WHERE status = 'RUNNING') + make_interval(secs => %s)
                ) - now()
                """,
                (self.policy.lease_seconds,),
            )
            until: dt.timedelta | None = row[0]
            return until

    async def _locked_lease(self, conn: psycopg.AsyncConnection, job_id: uuid.UUID, lease_token: uuid.UUID) -> dict[str, Any]:
        """Fencing: lock the job only if this lease still holds it (and renew the lease)."""
        # One round trip: the job row (locked by the UPDATE) first, then its document's row,
        # the lock order used everywhere.
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(
            """
            WITH job AS (
                UPDATE ingestion_jobs SET locked_at = now()
                WHERE id = %s AND lease_token = %s AND status = 'RUNNING'
                RETURNING id, document_id, attempts, max_attempts, lease_token, locked_at, kind::text AS kind, generation_id
            )
            SELECT job.*, d.status::text AS document_status, d.collection_id, d.tenant_id
            FROM job JOIN documents d ON d.id = job.document_id
            FOR UPDATE OF d
            """,
            (job_id, lease_token),
        )
        job = await cur.fetchone()
        if job is None:
            raise await self._lease_failure(conn, job_id)
        job["document_status"] = D(job["document_status"])
        job["kind"] = JobKind(job["kind"])
        return job

    async def renew_lease(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> dt.datetime | None:
        """Heartbeat. None means the job no longer exists: it was cancelled by a deletion."""
        async with self.pool.connection() as conn, conn.transaction():
            # A heartbeat lost in a database crash only shortens the lease; skip the WAL flush.
            await conn.execute("SET LOCAL synchronous_commit = off")
            row = await (
                await conn.execute(
                    "UPDATE ingestion_jobs SET locked_at = now() WHERE id = %s AND lease_token = %s AND status = 'RUNNING'"
                    " RETURNING locked_at + make_interval(secs => %s)",
                    (job_id, lease_token, self.policy.lease_seconds),
                )
            ).fetchone()
            if row is not None:
                expires: dt.datetime = row[0]
                return expires
            exists = await (await conn.execute("SELECT 1 FROM ingestion_jobs WHERE id = %s", (job_id,))).fetchone()
            if exists is None:
                return None
            raise LeaseNotHeld("this worker no longer holds the job's lease; it was taken over or ended", job_id=job_id)

    async def report_stage(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, stage: D, done: int, total: int, unit: str
    ) -> dt.datetime:
        """Rule 2 (status before action) and rule 4 (a new stage clears a stale error).

        One statement, one round trip, its own transaction (the pool's connections are in
        autocommit): REPORT_STAGE_SQL fences and renews the lease, locks the document, moves it
        along DOCUMENT_TRANSITIONS or records a tick, and marks the attempt's stage. A stage
        change commits durably before this returns (rule 2); a tick, and an EMBED job's
        progress, commit without waiting for the WAL flush. Only a failure costs a second look:
        which of LEASE_NOT_HELD / JOB_NOT_FOUND, or the illegal edge."""
        async with self.pool.connection() as conn:
            row = await (await conn.execute(REPORT_STAGE_SQL, {
                "job": job_id, "lease": lease_token, "stage": str(stage), "done": done, "total": total,
                "unit": unit, "sources": document_sources(stage), "renew_after": self.policy.lease_seconds / 10,
            })).fetchone()
            if row is None:
                raise await self._lease_failure(conn, job_id)
            locked_at, kind, current, moved, _ = row
            if kind == JobKind.INGEST and current != stage and not moved:
                # Nothing was written but the lease renewal: the edge is not in the table.
                check_document_transition(D(current), stage)
                raise IllegalTransition(  # pragma: no cover - check_document_transition raised
                    f"a document cannot go from {current} to {stage}", current=current, target=stage)
            expires: dt.datetime = locked_at + dt.timedelta(seconds=self.policy.lease_seconds)
            return expires

    @staticmethod
    async def _lease_failure(conn: psycopg.AsyncConnection, job_id: uuid.UUID) -> Exception:
        """Why a fenced write matched no job: the job is gone (JOB_NOT_FOUND) or another lease holds it."""
        exists = await (await conn.execute("SELECT 1 FROM ingestion_jobs WHERE id = %s", (job_id,))).fetchone()
        if exists is None:
            return NotFound(f"job {job_id} does not exist (its document may have been deleted)", reason=Reason.JOB_NOT_FOUND)
        return LeaseNotHeld("this worker no longer holds the job's lease; it was taken over or ended", job_id=job_id)

    async def content_length(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> tuple[uuid.UUID, int]:
        async with self.pool.connection() as conn, conn.transaction():
            job = await self._locked_lease(conn, job_id, lease_token)
            row = await (
                await conn.execute(
                    "SELECT length(content) FROM document_contents WHERE document_id = %s", (job["document_id"],)
                )
            ).fetchone()
            if row is None:
                raise NotFound("the document's content is missing", reason=Reason.CONTENT_NOT_FOUND)
            return job["document_id"], int(row[0])

    async def content_slice(self, document_id: uuid.UUID, offset: int, size: int) -> bytes:
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT substring(content FROM %s FOR %s) FROM document_contents WHERE document_id = %s",
                    (offset + 1, size, document_id),
                )
            ).fetchone()
            if row is None:
                raise NotFound("the document was deleted while its content was being read", reason=Reason.JOB_NOT_FOUND)
            return bytes(row[0])

    async def save_snapshot(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, pipeline_version: str, chunks: list[dict[str, Any]]
    ) -> None:
        """One statement in its own transaction: fence the lease and store the content's chunk list."""
        async with self.pool.connection() as conn:
            row = await (await conn.execute(SAVE_SNAPSHOT_SQL, {
                "job": job_id, "lease": lease_token, "renew_after": self.policy.lease_seconds / 10,
                "version": pipeline_version, "count": len(chunks), "chunks": json.dumps(chunks),
            })).fetchone()
            if row is None:
                raise await self._lease_failure(conn, job_id)

    async def read_snapshot(self, job_id: uuid.UUID, lease_token: uuid.UUID, pipeline_version: str) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn, conn.transaction():
            job = await self._locked_lease(conn, job_id, lease_token)
            row = await (
                await conn.execute(
                    "SELECT s.chunks FROM chunk_snapshots s"
                    " JOIN documents d ON d.tenant_id = s.tenant_id AND d.content_sha256 = s.content_sha256"
                    " WHERE d.id = %s AND s.pipeline_version = %s",
                    (job["document_id"], pipeline_version),
                )
            ).fetchone()
            if row is None:
                raise NotFound("no snapshot for this content and pipeline version", reason=Reason.SNAPSHOT_NOT_FOUND)
            chunks: list[dict[str, Any]] = row[0]
            return chunks

    async def collection_dimensions(self, job_id: uuid.UUID) -> int:
        """The dimensions of the generation the job embeds for (its claim set it)."""
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT g.dimensions FROM ingestion_jobs j JOIN collection_generations g ON g.id = j.generation_id"
                    " WHERE j.id = %s",
                    (job_id,),
                )
            ).fetchone()
            if row is None:
                raise NotFound(f"job {job_id} does not exist (its document may have been deleted)", reason=Reason.JOB_NOT_FOUND)
            return int(row[0])

    async def complete_job(self, job_id: uuid.UUID, lease_token: uuid.UUID, chunks: list[ChunkRow]) -> DocumentRow:
        """Rule 1: replace the chunks, set READY and SUCCEEDED in one transaction (binary COPY).

        An INGEST job writes into the generation it was claimed for, which must still be the
        ACTIVE one (locked FOR SHARE, so a switch waits for this commit or this commit sees the
        switch); if a reindex is BUILDING, the same transaction adds the EMBED job that brings
        the now READY document into the new generation. If the collection switched while the
        job ran, the job is handed back (run again with the new embedder) and the call fails
        with LEASE_NOT_HELD. An EMBED job writes into its BUILDING generation and leaves the
        document READY; a second transaction then tries the switch."""
        switched_under_us = False
        async with self.pool.connection() as conn, conn.transaction():
            # One round trip: fence, lock the document, lock the generation FOR SHARE and clear
            # the chunks this commit replaces (only when the checks below will pass).
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(COMPLETE_LOCK_SQL, {"job": job_id, "lease": lease_token})
            job = await cur.fetchone()
            if job is None:
                raise await self._lease_failure(conn, job_id)
            job["document_status"] = D(job["document_status"])
            job["kind"] = JobKind(job["kind"])
            generation_id, state = job["generation_id"], job["generation_state"]
            if job["kind"] == JobKind.EMBED:
                if state != GenerationState.BUILDING:
                    raise LeaseNotHeld("the generation this job builds is no longer being built", job_id=job_id)
                if job["document_status"] != D.READY:
                    raise FailedPrecondition(f"the document is {job['document_status']}, not READY",
                                             reason=Reason.DOCUMENT_NOT_READY)
                await self._copy_chunks(conn, job, chunks)
                async with conn.pipeline():  # one round trip: the results are read after its sync
                    moved = await send_move_job(conn, job_id, J.SUCCEEDED, RELEASED_LEASE)
                    await self._end_attempt(conn, lease_token, AttemptOutcome.SUCCEEDED, None, None, None)
                    document_cursor = await self._send_document(conn, job["document_id"])
                await moved.confirm()
                document = await self._fetch_document(document_cursor)
            elif state != GenerationState.ACTIVE:
                await self._hand_back(conn, job, job_id, lease_token)
                switched_under_us = True
            else:
                if job["document_status"] != D.INDEXING:
                    raise FailedPrecondition(
                        f"the document is {job['document_status']}; report INDEXING before completing",
                        reason=Reason.STAGE_NOT_INDEXING,
                    )
                # Every generation's chunks of the document were stale (COMPLETE_LOCK_SQL cleared
                # them; a BUILDING generation gets a new EMBED job).
                await self._copy_chunks(conn, job, chunks)
                check_document_transition(D.INDEXING, D.READY)
                # The rest shares one round trip (pipeline mode); each move is confirmed after the sync.
                async with conn.pipeline():
                    moves = [
                        await send_move_document(conn, job["document_id"], D.READY, {
                            **NO_ERROR, "chunk_count": len(chunks), "progress_stage": str(D.INDEXING),
                            "progress_done": len(chunks), "progress_total": len(chunks), "progress_unit": "chunks",
                        }, sources=[D.INDEXING]),
                        await send_move_job(conn, job_id, J.SUCCEEDED, RELEASED_LEASE),
                    ]
                    await self._end_attempt(conn, lease_token, AttemptOutcome.SUCCEEDED, None, None, None)
                    building_cursor = await conn.execute(
                        "SELECT id FROM collection_generations WHERE collection_id = %s AND state = %s FOR SHARE",
                        (job["collection_id"], str(GenerationState.BUILDING)),
                    )
                    document_cursor = await self._send_document(conn, job["document_id"])
                # The pipeline's sync has fetched every result (a failed move raises here, in the transaction).
                for move in moves:
                    await move.confirm()
                building = await building_cursor.fetchone()
                document = await self._fetch_document(document_cursor)
                if building is not None:
                    await self._add_embed_job(conn, job["document_id"], building[0])
        if switched_under_us:
            raise LeaseNotHeld("the collection switched to a new index generation while this job ran; it will run again",
                               job_id=job_id)
        if job["kind"] == JobKind.EMBED:
            await self.try_switch(generation_id)
        return document

    async def _add_embed_job(self, conn: psycopg.AsyncConnection, document_id: uuid.UUID, generation_id: int) -> None:
        """A fresh EMBED job of a READY document for a BUILDING generation (replacing an older one)."""
        await conn.execute("DELETE FROM ingestion_jobs WHERE kind = 'EMBED' AND document_id = %s AND generation_id = %s",
                           (document_id, generation_id))
        await conn.execute(
            "INSERT INTO ingestion_jobs (document_id, kind, generation_id, max_attempts)"
            " SELECT d.id, 'EMBED', %s, c.max_attempts FROM documents d JOIN collections c ON c.id = d.collection_id"
            " WHERE d.id = %s",
            (generation_id, document_id),
        )

    async def _hand_back(self, conn: psycopg.AsyncConnection, job: dict[str, Any], job_id: uuid.UUID,
                         lease_token: uuid.UUID) -> None:
        """The job is due again at once and the attempt is not charged (ReleaseJob, and an INGEST
        commit that lost a switch)."""
        if job["kind"] == JobKind.INGEST:
            await move_document(conn, job["document_id"], D.PENDING, FRESH_PROGRESS, sources=IN_PROGRESS | {D.PENDING})
        await move_job(conn, job_id, J.PENDING, {
            "attempts": Expr("attempts - 1"), "available_at": NOW, **RELEASED_LEASE,
        }, sources=[J.RUNNING])
        await self._end_attempt(conn, lease_token, AttemptOutcome.RELEASED, None, None, None)

    @staticmethod
    async def _copy_chunks(conn: psycopg.AsyncConnection, job: dict[str, Any], chunks: list[ChunkRow]) -> None:
        async with conn.cursor().copy(
            "COPY chunks (document_id, tenant_id, collection_id, generation_id, chunk_index, text, page_number, element_type,"
            " section_title, text_as_html, embedding, search_terms, text_source, ocr_confidence, boxes)"
            " FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["uuid", "int8", "int8", "int8", "int4", "text", "int4", "text", "text", "text", "vector", "text",
                            "text", "float4", "jsonb"])
            for chunk in chunks:
                await copy.write_row(
                    (
                        job["document_id"],
                        job["tenant_id"],
                        job["collection_id"],
                        job["generation_id"],
                        chunk.index,
                        chunk.text,
                        chunk.page_number,
                        chunk.element_type,
                        chunk.section_title,
                        chunk.text_as_html,
                        chunk.embedding,
                        chunk.search_terms,
                        chunk.text_source,
                        chunk.ocr_confidence,
                        Jsonb(chunk.boxes),
                    )
                )

    async def fail_job(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, retryable: bool, error_code: str, error_message: str
    ) -> tuple[DocumentRow, bool]:
        """Rule 7: retry a temporary failure after a delay while attempts remain; else fail for good."""
        async with self.pool.connection() as conn, conn.transaction():
            job = await self._locked_lease(conn, job_id, lease_token)
            attempts, max_attempts = job["attempts"], job["max_attempts"]
            retry = should_retry(retryable, attempts, max_attempts)
            if job["kind"] == JobKind.EMBED:
                # Only the job records it: the document stays READY in the active generation.
                if retry:
                    delay = retry_delay_seconds(attempts, self.policy.retry_delay_seconds, self.policy.max_retry_delay_seconds)
                    await move_job(conn, job_id, J.PENDING, {
                        "available_at": Expr("now() + make_interval(secs => %s)", delay), **RELEASED_LEASE,
                    }, sources=[J.RUNNING])
                else:
                    if retryable:
                        error_message = f"failed after {attempts} attempts: {error_message}"
                    await move_job(conn, job_id, J.FAILED, RELEASED_LEASE)
            elif retry:
                delay = retry_delay_seconds(attempts, self.policy.retry_delay_seconds, self.policy.max_retry_delay_seconds)
                await move_document(conn, job["document_id"], D.PENDING, {
                    "error_code": error_code, "error_message": retry_message(attempts, max_attempts, error_message),
                }, sources=IN_PROGRESS | {D.PENDING})
                await move_job(conn, job_id, J.PENDING, {
                    "available_at": Expr("now() + make_interval(secs => %s)", delay), **RELEASED_LEASE,
                }, sources=[J.RUNNING])
            else:
                if retryable:
                    error_message = f"failed after {attempts} attempts: {error_message}"
                await move_document(conn, job["document_id"], D.FAILED,
                                    {"error_code": error_code, "error_message": error_message})
                await move_job(conn, job_id, J.FAILED, RELEASED_LEASE)
            outcome = AttemptOutcome.RETRYABLE_FAILURE if retryable else AttemptOutcome.PERMANENT_FAILURE
            await self._end_attempt(conn, lease_token, outcome, error_code, error_message, retryable)
            return await self._document(conn, job["document_id"]), retry

    async def release_job(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> DocumentRow:
        """A hand-back at shutdown: the job is due again at once and the attempt is not charged."""
        async with self.pool.connection() as conn, conn.transaction():
            job = await self._locked_lease(conn, job_id, lease_token)
            await self._hand_back(conn, job, job_id, lease_token)
            return await self._document(conn, job["document_id"])

    async def _end_attempt(
        self,
        conn: psycopg.AsyncConnection,
        lease_token: uuid.UUID,
        outcome: AttemptOutcome,
        error_code: str | None,
        error_message: str | None,
        retryable: bool | None,
    ) -> None:
        await conn.execute(
            "UPDATE job_attempts SET outcome = %s, error_code = %s, error_message = %s, retryable = %s,"
            " ended_at = now() WHERE lease_token = %s AND outcome = 'RUNNING'",
            (str(outcome), error_code, error_message, retryable, lease_token),
        )

    async def queue_depth(self) -> dict[str, int]:
        async with self.pool.connection() as conn:
            rows = await (await conn.execute("SELECT status::text, count(*) FROM ingestion_jobs GROUP BY status")).fetchall()
            return {status: int(count) for status, count in rows}
