"""The queue: a job's life from claim to the end of its attempt, in three modules over the kind
table (job_kinds.py) and the statements' shared literals (queue_sql.py):

- claims.py: claims (rules 6 and 8 of docs/architecture.md#the-rules), lease renewal, hand-back;
- stages.py: what a worker writes and reads under its lease (stage reports, snapshots, content);
- commit.py: the end of an attempt (the commit of rule 1, the failure of rule 7);

with leases.py (fencing, the attempt row and QueueBase: the pool, the JobPolicy and the
generation switch a commit may trigger, given by main.py) under all three.
"""

from __future__ import annotations

from .claims import CLAIM_SQL, ClaimStore
from .commit import CommitStore
from .stages import StageStore


class QueueStore(ClaimStore, StageStore, CommitStore):
    """Every JobService use case over one pool: one store, its parts in three modules over QueueBase."""


__all__ = ["CLAIM_SQL", "QueueStore"]
