"""PostgreSQL adapter: every use case is one transaction made of conditional statements.

Lock order is always job row, then document row, so claims, failures, completions and
deletions never deadlock each other. A state change is an `UPDATE … WHERE status = ANY(…)`
built from the domain tables; zero rows means the move was illegal or lost a race.

Split by area: collections.py, documents.py, queue.py, generations.py, over common.py; row types in rows.py.
"""

from __future__ import annotations

from .collections import CollectionStore
from .common import StoreBase
from .documents import DocumentStore
from .events import CollectionEventRow, EventStore, RetentionStore, WatchEventStore, WatchPage
from .generations import GenerationStore
from .queue import CLAIM_SQL, QueueStore
from .rows import (
    AttemptRow,
    ChunkRow,
    ClaimedJob,
    CollectionRow,
    DocumentRow,
    EventRow,
    GenerationFailure,
    GenerationRow,
    JobPolicy,
    NewCollection,
    NewDocument,
    UploadedContent,
)


class PostgresStore(CollectionStore, DocumentStore, EventStore, WatchEventStore, RetentionStore, QueueStore, GenerationStore):
    """The whole store: every area over one pool."""


__all__ = [
    "CLAIM_SQL", "AttemptRow", "ChunkRow", "ClaimedJob", "CollectionEventRow", "CollectionRow", "DocumentRow", "EventRow", "GenerationFailure", "GenerationRow", "GenerationStore", "JobPolicy", "NewCollection", "NewDocument", "PostgresStore", "StoreBase", "UploadedContent", "WatchPage",
]
