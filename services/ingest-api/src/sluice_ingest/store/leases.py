"""Fencing and the attempt's record: what every write after a claim does first and last.

`hold_job` locks a job only while the caller's lease holds it (and renews the lease), then its
document; `lease_failure` says why a fenced write matched nothing; `end_attempt` closes the
attempt row a claim opened. `QueueBase` is what the three parts of the queue store (claims.py,
stages.py, commit.py) hold. Lock order, everywhere: the job row, then its document's row
(docs/architecture.md#fencing).
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
from psycopg import sql
from psycopg.rows import kwargs_row
from psycopg_pool import AsyncConnectionPool
from sluice_common.errors import LeaseNotHeld, NotFound, SluiceError
from sluice_common.reasons import Reason

from ..domain import AttemptOutcome, DocumentStatus, GenerationState, JobKind
from .job_kinds import KindPolicy, policy_of
from .literals import compose
from .queue_sql import QUEUE_LITERALS
from .rows import JobPolicy


class GenerationSwitch(Protocol):
    """The one thing the queue needs of the generation store: an EMBED commit may complete a
    reindex, and then the index build and the switch run (GenerationStore.switch_after_commit)."""

    async def switch_after_commit(self, generation_id: int) -> None: ...


class QueueBase:
    """The queue store's state, shared by its parts: the pool, the lease and retry policy, and the
    generation switch as a collaborator (the queue is no generation store)."""

    def __init__(self, pool: AsyncConnectionPool, policy: JobPolicy, generations: GenerationSwitch) -> None:
        self.pool = pool
        self.policy = policy
        self.generations = generations


@dataclass(frozen=True, slots=True)
class HeldJob:
    """A RUNNING job that the caller's lease holds, locked with its document."""

    id: uuid.UUID
    document_id: uuid.UUID
    attempts: int
    max_attempts: int
    lease_token: uuid.UUID
    locked_at: dt.datetime
    kind: JobKind
    # Set by every claim (job_kinds.py: the ACTIVE generation, or an EMBED job's own).
    generation_id: int
    document_status: DocumentStatus
    collection_id: int
    tenant_id: int
    # Only CompleteJob's lock reads it (the generation it locks FOR SHARE).
    generation_state: GenerationState | None = None

    @classmethod
    def from_row(cls, *, kind: str, document_status: str, generation_state: str | None = None, **columns: Any) -> HeldJob:
        return cls(
            kind=JobKind(kind),
            document_status=DocumentStatus(document_status),
            generation_state=GenerationState(generation_state) if generation_state is not None else None,
            **columns,
        )

    @property
    def policy(self) -> KindPolicy:
        return policy_of(self.kind)


# One round trip: the job row (locked by the UPDATE, which renews the lease) first, then its
# document's row.
HOLD_JOB_SQL = (
    sql.SQL("""
WITH job AS (
    UPDATE ingestion_jobs SET locked_at = now()
    WHERE {held_by_lease}
    RETURNING id, document_id, attempts, max_attempts, lease_token, locked_at, kind::text AS kind, generation_id
)
SELECT job.*, d.status::text AS document_status, d.collection_id, d.tenant_id
FROM job JOIN documents d ON d.id = job.document_id
FOR UPDATE OF d
""")
    .format(**QUEUE_LITERALS)
    .as_bytes(None)
)


JOB_EXISTS_SQL = "SELECT 1 FROM ingestion_jobs WHERE id = %s"

# The attempt a claim opened (with this lease), closed with its outcome.
END_ATTEMPT_SQL = compose(
    "UPDATE job_attempts SET outcome = %s, error_code = %s, error_message = %s, retryable = %s,"
    " ended_at = now() WHERE lease_token = %s AND outcome = {attempt_running}"
)


async def hold_job(conn: psycopg.AsyncConnection[Any], job_id: uuid.UUID, lease_token: uuid.UUID) -> HeldJob:
    """Fencing: lock the job only if this lease still holds it (and renew the lease), then its
    document. Raises LEASE_NOT_HELD or JOB_NOT_FOUND otherwise."""
    cur = conn.cursor(row_factory=kwargs_row(HeldJob.from_row))
    await cur.execute(HOLD_JOB_SQL, {"job": job_id, "lease": lease_token})
    job = await cur.fetchone()
    if job is None:
        raise await lease_failure(conn, job_id)
    return job


async def lease_failure(conn: psycopg.AsyncConnection[Any], job_id: uuid.UUID) -> SluiceError:
    """Why a fenced write matched no job: the job is gone (JOB_NOT_FOUND) or another lease holds it."""
    exists = await (await conn.execute(JOB_EXISTS_SQL, (job_id,))).fetchone()
    if exists is None:
        return NotFound(f"job {job_id} does not exist (its document may have been deleted)", reason=Reason.JOB_NOT_FOUND)
    return LeaseNotHeld("this worker no longer holds the job's lease; it was taken over or ended", job_id=job_id)


async def end_attempt(
    conn: psycopg.AsyncConnection[Any],
    lease_token: uuid.UUID,
    outcome: AttemptOutcome,
    error_code: str | None = None,
    error_message: str | None = None,
    retryable: bool | None = None,
) -> None:
    """Close the attempt the claim with this lease opened (job_attempts), with its outcome."""
    await conn.execute(END_ATTEMPT_SQL, (str(outcome), error_code, error_message, retryable, lease_token))


__all__ = ["HOLD_JOB_SQL", "GenerationSwitch", "HeldJob", "QueueBase", "end_attempt", "hold_job", "lease_failure"]
