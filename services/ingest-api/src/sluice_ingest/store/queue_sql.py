"""What the queue's statements share, written once: the literals they carry and the fragments
every post-claim write repeats.

Each statement of claims.py, stages.py and commit.py is composed with
`sql.SQL(…).format(**QUEUE_LITERALS)` and rendered to bytes once, at import (psycopg renders
a Composed again on every execute). Statuses, states and kinds are literals, not parameters:
the partial indexes on status (migration 0001) match only a literal, also once the statement
is prepared. Their values come from the domain's enums and the kind table (job_kinds.py).
"""

from __future__ import annotations

from psycopg import sql

from ..domain import DocumentStatus, GenerationState, JobStatus
from .job_kinds import KIND_POLICY_CTE

# Fencing (docs/architecture.md#fencing): a write after a claim matches its job only while
# this lease holds it RUNNING. Zero rows: the lease is not held (or the job is gone).
HELD_BY_LEASE = sql.SQL("id = %(job)s AND lease_token = %(lease)s AND status = {running}").format(
    running=sql.Literal(str(JobStatus.RUNNING))
)

# The lease renewal that rides on a worker's writes: only once a tenth of the lease has passed
# (`renew_after` = lease_seconds / RENEWAL_DIVISOR). Writes that follow each other quickly then leave
# `locked_at`, an indexed column, unchanged, and PostgreSQL updates the job row in place (HOT,
# migration 0015); the lease is never shorter than 0.9 of its length.
RENEWAL_DIVISOR = 10
LAZY_RENEWAL = sql.SQL(
    "locked_at = CASE WHEN locked_at <= now() - make_interval(secs => %(renew_after)s) THEN now() ELSE locked_at END"
)

QUEUE_LITERALS: dict[str, sql.Composable] = {
    "pending": sql.Literal(str(JobStatus.PENDING)),
    "running": sql.Literal(str(JobStatus.RUNNING)),
    "active": sql.Literal(str(GenerationState.ACTIVE)),
    "building": sql.Literal(str(GenerationState.BUILDING)),
    "ready": sql.Literal(str(DocumentStatus.READY)),
    "kind_policy": KIND_POLICY_CTE,
    "held_by_lease": HELD_BY_LEASE,
    "lazy_renewal": LAZY_RENEWAL,
}

__all__ = ["HELD_BY_LEASE", "LAZY_RENEWAL", "QUEUE_LITERALS", "RENEWAL_DIVISOR"]
