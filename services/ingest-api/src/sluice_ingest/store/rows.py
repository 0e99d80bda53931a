"""The store's row types: what goes in (New*, ChunkRow) and what comes out."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..domain import AttemptOutcome, DocumentStatus, GenerationState, JobKind, JobPriority, JobStatus, VersionRole


@dataclass(frozen=True)
class NewCollection:
    tenant_id: int
    name: str
    description: str
    embedder_provider: str
    embedder_model: str
    dimensions: int
    chunk_max_characters: int
    chunk_new_after_n_chars: int
    chunk_overlap: int
    max_attempts: int
    reranker: dict[str, Any] | None = None
    vector_precision: str = "float4"  # sluice_common.vector_index.PRECISIONS


class Fence(Protocol):
    """A check run inside a write's transaction that raises when the writer may no longer write
    (a source run whose lease was lost: sources/store.py)."""

    async def __call__(self, conn: Any) -> None: ...


class UploadedContent(Protocol):
    """An upload's bytes, read back in pieces (uploads.SpooledContent): never one bytes object."""

    size: int

    def pieces(self) -> AsyncIterator[bytes]: ...


@dataclass(frozen=True)
class NewDocument:
    tenant_id: int
    collection: str
    filename: str
    mime_type: str
    metadata: dict[str, Any]
    request_id: str | None
    content: UploadedContent
    content_sha256: str
    source_uri: str | None = None  # a version of this source (docs/architecture.md#document-versions)
    # Run first inside the upload's transaction; raises to refuse it (a source run's lease, docs/sources.md).
    fence: Fence | None = None
    priority: JobPriority = JobPriority.INTERACTIVE


@dataclass(frozen=True)
class ChunkRow:
    index: int
    text: str
    page_number: int
    element_type: str
    section_title: str
    text_as_html: str
    embedding: np.ndarray | None
    search_terms: str = ""
    text_source: str = ""
    ocr_confidence: float | None = None
    boxes: list[dict[str, Any]] = field(default_factory=list)
    element_types: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class JobPolicy:
    lease_seconds: float
    retry_delay_seconds: float
    max_retry_delay_seconds: float


# ---------------------------------------------------------------- what the store returns
# Built by psycopg's class_row from the selects in common.py and claims.py: a column the select
# adds without a field here fails at once, in the tests. The selects return an enum column as its
# text; `as_members` stores it as the domain's member, so each field has its enum's type.


def as_members(row: object, **columns: type[enum.StrEnum] | type[enum.IntEnum]) -> None:
    """Replace the text of each enum column of a (frozen) row by its member; None stays None."""
    for name, kind in columns.items():
        value = getattr(row, name)
        if value is not None:
            object.__setattr__(row, name, kind(value))


@dataclass(frozen=True, slots=True)
class GenerationFailure:
    """A document whose EMBED job failed for good in a BUILDING generation."""

    document_id: uuid.UUID
    filename: str
    error_code: str | None
    error_message: str | None


@dataclass(frozen=True, slots=True)
class GenerationEvaluationRow:
    """The quality gate of a generation reindexed with an eval set (migration 0018): `passed` is
    None while no verdict is recorded (PENDING)."""

    queries: int
    min_ratio: float
    passed: bool | None = None
    metric: str = "mrr@10"
    active_generation: int = 0
    active_score: float = 0.0
    candidate_score: float = 0.0
    evaluated_at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class GenerationRow:
    """An index generation of a collection with its progress (documents_*: for a BUILDING
    generation, its EMBED jobs by outcome; for the ACTIVE one, the collection's documents)."""

    id: int
    number: int
    embedder_provider: str
    embedder_model: str
    dimensions: int
    state: GenerationState
    created_at: dt.datetime
    activated_at: dt.datetime | None
    ended_at: dt.datetime | None
    dropped_at: dt.datetime | None
    documents_total: int = 0
    documents_ready: int = 0
    documents_failed: int = 0
    documents_pending: int = 0
    failures: tuple[GenerationFailure, ...] = ()
    evaluation: GenerationEvaluationRow | None = None
    vector_precision: str = "float4"  # its index's (migration 0023)

    def __post_init__(self) -> None:
        as_members(self, state=GenerationState)


@dataclass(frozen=True, slots=True)
class CollectionRow:
    id: int
    tenant_id: int
    name: str
    description: str
    embedder_provider: str
    embedder_model: str
    dimensions: int
    chunk_max_characters: int
    chunk_new_after_n_chars: int
    chunk_overlap: int
    max_attempts: int
    created_at: dt.datetime
    document_count: int = 0
    ready_document_count: int = 0
    generations: tuple[GenerationRow, ...] = field(default=())
    reranker: dict[str, Any] | None = None
    vector_precision: str = "float4"  # what its next generations take (migration 0023)


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """A document with its job's state, as every DocumentService answer shows it."""

    id: uuid.UUID
    collection_id: int
    collection: str
    filename: str
    mime_type: str
    status: DocumentStatus
    error_code: str | None
    error_message: str | None
    progress_stage: DocumentStatus | None
    progress_done: int
    progress_total: int
    progress_unit: str
    content_sha256: str
    size_bytes: int
    metadata: dict[str, Any]
    request_id: str | None
    chunk_count: int
    created_at: dt.datetime
    updated_at: dt.datetime
    job_id: uuid.UUID
    job_status: JobStatus
    attempts: int
    max_attempts: int
    available_at: dt.datetime
    db_now: dt.datetime
    # A version of a source (docs/architecture.md#document-versions); None without a source.
    source_uri: str | None = None
    version: int | None = None
    version_role: VersionRole | None = None
    # pg_current_wal_insert_lsn() read by the statement that read this row, or after the write
    # that returned it committed: at or after every commit the row shows
    # (sluice_common.consistency; the token of Document.consistency_token).
    wal_lsn: str = ""
    priority: JobPriority = JobPriority.INTERACTIVE

    def __post_init__(self) -> None:
        as_members(
            self,
            status=DocumentStatus,
            progress_stage=DocumentStatus,
            job_status=JobStatus,
            version_role=VersionRole,
            priority=JobPriority,
        )


@dataclass(frozen=True, slots=True)
class EventRow:
    """One committed change of a document (document_events): the fields it changes."""

    id: int
    status: DocumentStatus
    error_code: str | None
    error_message: str | None
    progress_stage: DocumentStatus | None
    progress_done: int
    progress_total: int
    progress_unit: str
    chunk_count: int
    job_status: JobStatus
    attempts: int
    max_attempts: int
    available_at: dt.datetime
    updated_at: dt.datetime
    db_now: dt.datetime
    # As DocumentRow.wal_lsn: read by the statement that read this committed event.
    wal_lsn: str = ""

    def __post_init__(self) -> None:
        as_members(self, status=DocumentStatus, progress_stage=DocumentStatus, job_status=JobStatus)

    def applied_to(self, document: DocumentRow) -> DocumentRow:
        """The document as this event left it."""
        from dataclasses import fields, replace

        return replace(document, **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "id"})


@dataclass(frozen=True, slots=True)
class AttemptRow:
    number: int
    worker_id: str
    stage: DocumentStatus | None  # None until the attempt reported its first stage
    outcome: AttemptOutcome
    error_code: str | None
    error_message: str | None
    retryable: bool | None
    started_at: dt.datetime
    ended_at: dt.datetime | None

    def __post_init__(self) -> None:
        as_members(self, stage=DocumentStatus, outcome=AttemptOutcome)


@dataclass(frozen=True, slots=True)
class ClaimedJob:
    """CLAIM_SQL's row: a claimed job with what the worker needs, or (kind "exhausted") a job
    for rule 8 to converge, with only job_id, lease_token and document_id set."""

    kind: str
    job_id: uuid.UUID
    lease_token: uuid.UUID
    attempts: int | None
    max_attempts: int | None
    expired_token: uuid.UUID | None
    document_id: uuid.UUID
    filename: str | None
    mime_type: str | None
    content_sha256: str | None
    size_bytes: int | None
    metadata: dict[str, Any] | None
    collection: str | None
    embedder_provider: str | None
    embedder_model: str | None
    dimensions: int | None
    chunk_max_characters: int | None
    chunk_new_after_n_chars: int | None
    chunk_overlap: int | None
    trace_context: str | None
    job_kind: JobKind | None = JobKind.INGEST  # None only on FAST_CLAIM_SQL's "overdue" row
    generation_id: int | None = None
    generation_number: int | None = None
    content: bytes | None = None  # the whole document when it is small (INLINE_CONTENT_BYTES)
    snapshot_versions: list[str] | None = None  # pipeline versions of the snapshots of its content
    tenant_id: int | None = None  # on a "capped" row, the tenant to claim for under its lock

    def __post_init__(self) -> None:
        as_members(self, job_kind=JobKind)
