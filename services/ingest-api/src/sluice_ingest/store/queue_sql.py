"""What the queue's statements share, written once: the literals they carry and the fragments
every post-claim write repeats.

Each statement of claims.py, stages.py and commit.py is composed with
`sql.SQL(…).format(**QUEUE_LITERALS)` and rendered to bytes once, at import (psycopg renders
a Composed again on every execute). QUEUE_LITERALS is the store's one literal table
(literals.py: statuses, states and kinds from the domain's enums, literals and not parameters)
with the queue's fragments beside it: the kind table (job_kinds.py), the fence and the lazy
renewal. The claim statements name three entries by their short queue names.
"""

from __future__ import annotations

from psycopg import sql

from .job_kinds import KIND_POLICY_CTE
from .literals import LITERALS

# Fencing (docs/architecture.md#fencing): a write after a claim matches its job only while
# this lease holds it RUNNING. Zero rows: the lease is not held (or the job is gone).
HELD_BY_LEASE = sql.SQL("id = %(job)s AND lease_token = %(lease)s AND status = {job_running}").format(**LITERALS)

# The lease renewal that rides on a worker's writes: only once a tenth of the lease has passed
# (`renew_after` = lease_seconds / RENEWAL_DIVISOR). Writes that follow each other quickly then leave
# `locked_at`, an indexed column, unchanged, and PostgreSQL updates the job row in place (HOT,
# migration 0015); the lease is never shorter than 0.9 of its length.
RENEWAL_DIVISOR = 10
LAZY_RENEWAL = sql.SQL(
    "locked_at = CASE WHEN locked_at <= now() - make_interval(secs => %(renew_after)s) THEN now() ELSE locked_at END"
)

QUEUE_LITERALS: dict[str, sql.Composable] = {
    **LITERALS,
    # The claim statements' short names (claims.py), entries of the one table.
    "pending": LITERALS["job_pending"],
    "running": LITERALS["job_running"],
    "active": LITERALS["gen_active"],
    "kind_policy": KIND_POLICY_CTE,
    "held_by_lease": HELD_BY_LEASE,
    "lazy_renewal": LAZY_RENEWAL,
}

__all__ = ["HELD_BY_LEASE", "LAZY_RENEWAL", "QUEUE_LITERALS", "RENEWAL_DIVISOR"]
