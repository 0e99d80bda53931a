"""PostgreSQL adapter: every use case is one transaction made of conditional statements.

Lock order is always job row, then document row, so claims, failures, completions and
deletions never deadlock each other. A state change is an `UPDATE … WHERE status = ANY(…)`
built from the domain tables; zero rows means the move was illegal or lost a race.

One store per area, each over the shared pool, composed in main.py (no store inherits another):
CollectionStore (collections.py), DocumentStore (documents.py), GenerationStore
(generations.py), QueueStore (queue.py: claims, stages, commits; it is given the generation
store's switch), EventStore and RetentionStore (events.py), TenantStore (tenants.py), ChunkStore
(chunks.py: a document's chunks as users list and change them, and its bytes). What they
share is in common.py; row types in rows.py.
"""

from __future__ import annotations

from .chunks import ChunkStore
from .collections import CollectionStore
from .common import StoreBase
from .documents import DocumentStore
from .events import CollectionEventRow, EventStore, LogEvent, RetentionStore, SourceRunEventRow, WatchPage
from .generations import GenerationStore
from .queue import CLAIM_SQL, QueueStore
from .rows import (
    AttemptRow,
    ChunkRow,
    ClaimedJob,
    CollectionRow,
    DocumentRow,
    EventRow,
    GenerationEvaluationRow,
    GenerationFailure,
    GenerationRow,
    JobPolicy,
    NewCollection,
    NewDocument,
    UploadedContent,
)
from .tenants import TenantStore
from .versions import VersionRow, VersionsView

__all__ = [
    "CLAIM_SQL",
    "AttemptRow",
    "ChunkRow",
    "ChunkStore",
    "ClaimedJob",
    "CollectionEventRow",
    "CollectionRow",
    "CollectionStore",
    "DocumentRow",
    "DocumentStore",
    "EventRow",
    "EventStore",
    "GenerationEvaluationRow",
    "GenerationFailure",
    "GenerationRow",
    "GenerationStore",
    "JobPolicy",
    "LogEvent",
    "NewCollection",
    "NewDocument",
    "QueueStore",
    "RetentionStore",
    "SourceRunEventRow",
    "StoreBase",
    "TenantStore",
    "UploadedContent",
    "VersionRow",
    "VersionsView",
    "WatchPage",
]
