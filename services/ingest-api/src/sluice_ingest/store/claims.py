"""Claims and leases (rules 6 and 8 of docs/architecture.md#the-rules): who may work on a job, for how
long, and what happens when a lease ends without a commit.

A claim is one statement on the common path (FAST_CLAIM_SQL); an expired lease takes the
transactional CLAIM_SQL, which converges an exhausted job (rule 8) or takes the lease over.
Which due job a claim takes is fair (docs/tenancy.md, "Fair queues"): the one with the smallest
start tag (`fair_key`, written at enqueue by migration 0032's trigger), so the claim is one
ordered index scan and writes no row but the job's. A job of a tenant with a cap on its running
jobs is claimed in a transaction that holds the tenant's claim lock, so the cap holds exactly.
A worker renews its lease (RenewLease) and hands the job back at shutdown (ReleaseJob).
Statuses come from the job transition table: the claim is the PENDING→RUNNING and
RUNNING→RUNNING edges.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row
from sluice_common.errors import LeaseNotHeld

from .. import metrics
from ..domain import (
    IN_PROGRESS,
    LEASE_EXPIRED_EXHAUSTED,
    LEASE_EXPIRED_RETRYING,
    AttemptOutcome,
    DocumentStatus,
    JobStatus,
    job_sources,
    retry_message,
)
from ..transitions import NOW, RELEASED_LEASE, Expr, move_document, move_job
from .common import FRESH_PROGRESS, lookup_document, one_row
from .job_kinds import policy_of
from .leases import JOB_EXISTS_SQL, HeldJob, QueueBase, end_attempt, hold_job
from .queue_sql import QUEUE_LITERALS
from .rows import ClaimedJob, DocumentRow

INLINE_CONTENT_BYTES = 1024 * 1024  # a document this small is sent with its claim (Job.content)

# The claimed job's update, its attempt row and what the worker needs; shared by both claims.
# `candidate` (id, expired_token) is the job to claim; `{others}` adds the claim's other rows.
# The generation an attempt embeds for comes from the kind table (job_kinds.py): an INGEST
# attempt follows the generation ACTIVE now, an EMBED job keeps its own.
CLAIM_TAIL = """
, claimed AS (
    UPDATE ingestion_jobs j
    SET status = {running}, attempts = j.attempts + 1, locked_at = now(), locked_by = %(worker)s,
        lease_token = gen_random_uuid(), updated_at = now(), progress_stage = NULL, progress_done = 0, progress_total = 0,
        generation_id = CASE WHEN p.follows_active_generation THEN (
            SELECT g.id FROM documents gd JOIN collection_generations g ON g.collection_id = gd.collection_id
            WHERE gd.id = j.document_id AND g.state = {active}) ELSE j.generation_id END
    FROM candidate, kind_policy p
    WHERE j.id = candidate.id AND p.kind = j.kind AND j.status = ANY(%(sources)s)
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
             WHERE s.tenant_id = d.tenant_id AND s.content_sha256 = d.content_sha256) AS snapshot_versions,
       NULL::bigint AS tenant_id
FROM claimed c JOIN documents d ON d.id = c.document_id JOIN collections col ON col.id = d.collection_id
     JOIN collection_generations g ON g.id = c.generation_id
UNION ALL
{others}
"""

# Rules 6 and 8 in one statement, in the caller's transaction (ClaimStore.claim_job): an
# exhausted expired lease to converge, else an expired lease to take over, else a due job.
CLAIM_SQL = (
    sql.SQL(
        """
WITH {kind_policy}, exhausted AS (
    SELECT id, document_id, lease_token, kind, generation_id FROM ingestion_jobs
    WHERE status = {running} AND attempts >= max_attempts AND locked_at <= now() - make_interval(secs => %(lease)s)
    ORDER BY locked_at LIMIT 1 FOR UPDATE SKIP LOCKED
), expired AS (
    SELECT id, lease_token AS expired_token FROM ingestion_jobs
    WHERE status = {running} AND attempts < max_attempts AND locked_at <= now() - make_interval(secs => %(lease)s)
      AND NOT EXISTS (SELECT 1 FROM exhausted)
    ORDER BY locked_at LIMIT 1 FOR UPDATE SKIP LOCKED
), due AS (
    -- Only while a lease has expired (rare): the front of the queue of the tenants without a cap.
    SELECT id, NULL::uuid AS expired_token FROM ingestion_jobs
    WHERE status = {pending} AND NOT capped AND attempts < max_attempts AND available_at <= now()
      AND NOT EXISTS (SELECT 1 FROM exhausted) AND NOT EXISTS (SELECT 1 FROM expired)
    ORDER BY fair_key, priority LIMIT 1 FOR UPDATE SKIP LOCKED
), candidate AS (
    SELECT * FROM expired UNION ALL SELECT * FROM due
)"""
        + CLAIM_TAIL.replace(
            "{others}",
            """
SELECT 'exhausted', e.id, e.lease_token, NULL, NULL, NULL, e.document_id, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, e.kind::text, e.generation_id, NULL, NULL, NULL, NULL
FROM exhausted e""",
        )
    )
    .format(**QUEUE_LITERALS, inline=sql.Literal(INLINE_CONTENT_BYTES))
    .as_bytes(None)
)

# The common claim, a statement of its own (autocommit: one round trip in all): the due job at
# the front of the fair queue (smallest start tag, then priority), unless some lease has expired.
# Then it claims nothing and returns one "overdue" row, and the caller runs CLAIM_SQL in a
# transaction (which converges or takes over the expired lease with the statements that go with
# it). The look for an expired lease takes no lock.
#
# Tenants with a cap on their running jobs (few: an admin sets it) queue apart, each under its
# own index range. `capped` is the front job of the one under its cap whose front comes first;
# when it is ahead of the uncapped front, this claims nothing and returns a "capped" row naming
# its tenant: the caller takes that tenant's claim lock and claims with CAPPED_CLAIM_SQL, whose count of
# the tenant's running jobs, a statement started after the lock, is exact.
FAST_CLAIM_SQL = (
    sql.SQL(
        """
WITH {kind_policy}, overdue AS (
    SELECT 1 FROM ingestion_jobs
    WHERE status = {running} AND locked_at <= now() - make_interval(secs => %(lease)s)
    LIMIT 1
), capped AS (
    SELECT t.id AS tenant_id, f.fair_key, f.priority FROM tenants t
    CROSS JOIN LATERAL (
        SELECT q.fair_key, q.priority FROM ingestion_jobs q
        WHERE q.tenant_id = t.id AND q.status = {pending} AND q.capped AND q.attempts < q.max_attempts
          AND q.available_at <= now()
        ORDER BY q.fair_key, q.priority LIMIT 1) f
    WHERE t.max_running_jobs IS NOT NULL AND NOT EXISTS (SELECT 1 FROM overdue)
      AND (SELECT count(*) FROM ingestion_jobs r WHERE r.tenant_id = t.id AND r.status = {running}) < t.max_running_jobs
    ORDER BY f.fair_key, f.priority LIMIT 1
), candidate AS (
    SELECT id, NULL::uuid AS expired_token FROM ingestion_jobs
    WHERE status = {pending} AND NOT capped AND attempts < max_attempts AND available_at <= now()
      AND NOT EXISTS (SELECT 1 FROM overdue)
      AND (fair_key, priority) < (SELECT coalesce(c.fair_key, 'Infinity'), coalesce(c.priority, 0) FROM (SELECT 1) one
                                  LEFT JOIN capped c ON true)
    ORDER BY fair_key, priority LIMIT 1 FOR UPDATE SKIP LOCKED
)"""
        + CLAIM_TAIL.replace(
            "{others}",
            """
SELECT 'overdue', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM overdue
UNION ALL
SELECT 'capped', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, c.tenant_id
FROM capped c WHERE NOT EXISTS (SELECT 1 FROM candidate)""",
        )
    )
    .format(**QUEUE_LITERALS, inline=sql.Literal(INLINE_CONTENT_BYTES))
    .as_bytes(None)
)

# A claim for one tenant with a cap, in the transaction that holds its lock (LOCK_TENANT_SQL):
# its front job, while its running jobs are fewer than its cap.
CAPPED_CLAIM_SQL = (
    sql.SQL(
        """
WITH {kind_policy}, candidate AS (
    SELECT j.id, NULL::uuid AS expired_token FROM ingestion_jobs j JOIN tenants t ON t.id = j.tenant_id
    WHERE j.tenant_id = %(tenant)s AND j.status = {pending} AND j.capped AND j.attempts < j.max_attempts
      AND j.available_at <= now()
      AND (SELECT count(*) FROM ingestion_jobs r WHERE r.tenant_id = t.id AND r.status = {running})
          < coalesce(t.max_running_jobs, 2147483647)
    ORDER BY j.fair_key, j.priority LIMIT 1 FOR UPDATE OF j SKIP LOCKED
)"""
        + CLAIM_TAIL.replace("UNION ALL\n{others}", "")
    )
    .format(**QUEUE_LITERALS, inline=sql.Literal(INLINE_CONTENT_BYTES))
    .as_bytes(None)
)
# Claims for one capped tenant, one at a time (pg_advisory_xact_lock(class, tenant id), a class
# beside the index builds' 90091, the eval gate's 90092 and the sources' 90093). Not its row's
# lock: an enqueue reads that row FOR SHARE (migration 0032's trigger) until its upload commits.
CAPPED_CLAIM_LOCK_CLASS = 90094
LOCK_TENANT_SQL = "SELECT pg_advisory_xact_lock(%s, %s::integer)"

# How long until the next job becomes claimable without a notification.
NEXT_WAKEUP_SQL = (
    sql.SQL("""
SELECT least(
    (SELECT min(available_at) FROM ingestion_jobs WHERE status = {pending}),
    (SELECT min(locked_at) FROM ingestion_jobs WHERE status = {running}) + make_interval(secs => %(lease)s)
) - now()
""")
    .format(**QUEUE_LITERALS)
    .as_bytes(None)
)

# RenewLease: the lease runs lease_seconds from now.
RENEW_LEASE_SQL = (
    sql.SQL("""
UPDATE ingestion_jobs SET locked_at = now()
WHERE {held_by_lease}
RETURNING locked_at + make_interval(secs => %(seconds)s)
""")
    .format(**QUEUE_LITERALS)
    .as_bytes(None)
)


# A hand-back does not charge the attempt.
UNCHARGED = Expr("attempts - 1")

# Rule 8's convergence reads the document's status under its lock.
LOCK_DOCUMENT_STATUS_SQL = "SELECT status::text FROM documents WHERE id = %s FOR UPDATE"
# A renewal lost in a database crash only shortens the lease; skip the WAL flush.
ASYNCHRONOUS_COMMIT_SQL = "SET LOCAL synchronous_commit = off"
QUEUE_DEPTH_SQL = "SELECT status::text, count(*) FROM ingestion_jobs GROUP BY status"


async def hand_back(conn: psycopg.AsyncConnection[Any], job: HeldJob) -> None:
    """The job is due again at once and the attempt is not charged (ReleaseJob, and an INGEST
    commit that lost a switch). A job that drives its document sends it back to PENDING."""
    if job.policy.drives_document:
        await move_document(
            conn, job.document_id, DocumentStatus.PENDING, FRESH_PROGRESS, sources=IN_PROGRESS | {DocumentStatus.PENDING}
        )
    await move_job(
        conn,
        job.id,
        JobStatus.PENDING,
        {
            "attempts": UNCHARGED,
            "available_at": NOW,
            **RELEASED_LEASE,
        },
        sources=[JobStatus.RUNNING],
    )
    await end_attempt(conn, job.lease_token, AttemptOutcome.RELEASED)


class ClaimStore(QueueBase):
    async def claim_job(self, worker_id: str) -> ClaimedJob | None:
        """Rules 6 and 8: one statement, one round trip, on the common path.

        FAST_CLAIM_SQL, in autocommit, claims the front job of the fair queue with FOR UPDATE
        SKIP LOCKED, writes the attempt row and returns the job with its document and
        collection, unless some lease has expired, or a tenant with a cap is ahead (then
        CAPPED_CLAIM_SQL claims for it under its row lock). Then CLAIM_SQL runs in a transaction: it first looks for an
        exhausted job whose lease expired (rule 8): if there is one, it claims nothing and hands
        it back here to be converged, and this call returns nothing. Otherwise it claims under
        the claim condition (an expired lease first, then the oldest due job); the takeover of
        an expired lease needs two more statements (close the lost attempt, move the document).
        """
        params = {"worker": worker_id, "lease": self.policy.lease_seconds, "sources": job_sources(JobStatus.RUNNING)}
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row(ClaimedJob))
            await cur.execute(FAST_CLAIM_SQL, params)
            row = await cur.fetchone()
            if row is None or row.kind == "claimed":
                return row
        if row.kind == "capped":
            async with self.pool.connection() as conn, conn.transaction():
                await conn.execute(LOCK_TENANT_SQL, (CAPPED_CLAIM_LOCK_CLASS, row.tenant_id))
                cur = conn.cursor(row_factory=class_row(ClaimedJob))
                await cur.execute(CAPPED_CLAIM_SQL, {**params, "tenant": row.tenant_id})
                return await cur.fetchone()
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
                # Taking over an expired lease: close the lost attempt; a document the job drives
                # goes back to PENDING (rule 7's message) until the new worker reports its first
                # stage.
                await end_attempt(
                    conn, row.expired_token, AttemptOutcome.LEASE_EXPIRED, "LEASE_EXPIRED", LEASE_EXPIRED_RETRYING, True
                )
                assert row.job_kind is not None  # a claimed row has it
                if not policy_of(row.job_kind).drives_document:
                    return row
                assert row.attempts is not None and row.max_attempts is not None  # a claimed row has them
                await move_document(
                    conn,
                    row.document_id,
                    DocumentStatus.PENDING,
                    {
                        **FRESH_PROGRESS,
                        "error_code": "LEASE_EXPIRED",
                        "error_message": retry_message(row.attempts - 1, row.max_attempts, LEASE_EXPIRED_RETRYING),
                    },
                    sources=IN_PROGRESS | {DocumentStatus.PENDING},
                )
            return row

    async def _converge_exhausted(self, conn: psycopg.AsyncConnection[Any], job: ClaimedJob) -> str:
        """Rule 8: an expired lease with no attempts left ends the job for good; returns the outcome.
        (`job` is CLAIM_SQL's "exhausted" row: job_id, document_id, lease_token, job_kind.)
        A job that does not drive its document (EMBED) fails and leaves the document alone."""
        assert job.job_kind is not None  # an exhausted row has it
        if policy_of(job.job_kind).drives_document:
            doc = await one_row(conn, LOCK_DOCUMENT_STATUS_SQL, (job.document_id,))
            if doc[0] == DocumentStatus.READY:
                # The crash hit the window after the commit: the work is done.
                await move_job(conn, job.job_id, JobStatus.SUCCEEDED, RELEASED_LEASE)
                await end_attempt(conn, job.lease_token, AttemptOutcome.SUCCEEDED)
                return "succeeded"
            await move_document(
                conn,
                job.document_id,
                DocumentStatus.FAILED,
                {"error_code": "LEASE_EXPIRED", "error_message": LEASE_EXPIRED_EXHAUSTED},
            )
        await move_job(conn, job.job_id, JobStatus.FAILED, RELEASED_LEASE)
        await end_attempt(conn, job.lease_token, AttemptOutcome.LEASE_EXPIRED, "LEASE_EXPIRED", LEASE_EXPIRED_EXHAUSTED, False)
        return "failed"

    async def renew_lease(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> dt.datetime | None:
        """RenewLease: the lease runs its full length again; returns when it expires. None means
        the job no longer exists: it was cancelled by a deletion."""
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute(ASYNCHRONOUS_COMMIT_SQL)
            row = await (
                await conn.execute(
                    RENEW_LEASE_SQL,
                    {
                        "job": job_id,
                        "lease": lease_token,
                        "seconds": self.policy.lease_seconds,
                    },
                )
            ).fetchone()
            if row is not None:
                expires: dt.datetime = row[0]
                return expires
            exists = await (await conn.execute(JOB_EXISTS_SQL, (job_id,))).fetchone()
            if exists is None:
                return None
            raise LeaseNotHeld("this worker no longer holds the job's lease; it was taken over or ended", job_id=job_id)

    async def release_job(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> DocumentRow:
        """A hand-back at shutdown: the job is due again at once and the attempt is not charged."""
        async with self.pool.connection() as conn, conn.transaction():
            job = await hold_job(conn, job_id, lease_token)
            await hand_back(conn, job)
            return await lookup_document(conn, job.document_id)

    async def next_wakeup(self) -> dt.timedelta | None:
        """How long until the next job becomes claimable without a notification (a delayed retry
        or a lease expiry); None when nothing is waiting."""
        async with self.pool.connection() as conn:
            row = await one_row(conn, NEXT_WAKEUP_SQL, {"lease": self.policy.lease_seconds})
            until: dt.timedelta | None = row[0]
            return until

    async def queue_depth(self) -> dict[str, int]:
        async with self.pool.connection() as conn:
            rows = await (await conn.execute(QUEUE_DEPTH_SQL)).fetchall()
            return {status: int(count) for status, count in rows}


__all__ = ["CLAIM_SQL", "FAST_CLAIM_SQL", "INLINE_CONTENT_BYTES", "ClaimStore", "hand_back"]
