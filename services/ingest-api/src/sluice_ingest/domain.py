"""The state machines of docs/architecture.md#the-state-machines, as pure Python.

Each edge of a transition table carries the reason it exists. `check_*_transition` is the
one function that applies a table; SQL enforces the same tables with conditional UPDATEs
whose `WHERE status = ANY(...)` lists come from `document_sources` / `job_sources` /
`generation_sources` (procrastinate's style, applied in transitions.py), so a lost race or an
illegal move changes zero rows instead of corrupting state. "Rule N" in a reason is rule N of
docs/architecture.md#the-rules; the tables there are generated from these
(docs/gen_state_machines.py).
"""

from __future__ import annotations

import enum
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Self

from sluice_common.errors import FailedPrecondition, InvalidArgument
from sluice_common.reasons import Reason


class StateEnum(enum.StrEnum):
    """A state whose meaning to the people who see it is written beside it, as River comments its
    job states where they are defined: `NAME = "NAME", "what it means"`. The state tables of
    docs/architecture.md are generated from these (docs/gen_state_machines.py). A lookup by value,
    `DocumentStatus("READY")`, works as for any enum."""

    meaning: str

    def __new__(cls, value: str, meaning: str = "") -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member


class DocumentStatus(StateEnum):
    """A document's status, as users see it (docs/architecture.md#the-state-machines)."""

    PENDING = "PENDING", "queued: waiting for a worker, or for its retry delay"
    PARSING = "PARSING", "a worker is reading the file into elements"
    CHUNKING = "CHUNKING", "a worker is cutting the elements into chunks and saving the snapshot"
    EMBEDDING = "EMBEDDING", "a worker is computing the chunks' vectors"
    INDEXING = "INDEXING", "the chunks and vectors are being written"
    READY = "READY", "every step succeeded; the chunks are committed"
    FAILED = "FAILED", "processing stopped for good; `error_message` says why"

    @property
    def searchable(self) -> bool:
        """Only READY is searchable (rule 3)."""
        return self is DocumentStatus.READY


class JobStatus(StateEnum):
    """An ingestion job's status, as workers drive it."""

    PENDING = "PENDING", "claimable once `available_at` has passed (a retry waits there)"
    RUNNING = "RUNNING", "claimed by a worker, which holds its lease"
    SUCCEEDED = "SUCCEEDED", "done; an INGEST job's document is READY"
    FAILED = "FAILED", "attempts exhausted or a permanent error"


class GenerationState(StateEnum):
    """An index generation of a collection (docs/architecture.md#index-generations)."""

    BUILDING = (
        "BUILDING",
        "being embedded from the chunk snapshots; search reads it only when asked by number (SearchRequest.generation)",
    )
    ACTIVE = "ACTIVE", "the generation search reads; exactly one per collection"
    RETIRED = "RETIRED", "replaced by a switch; dropped after a grace period"
    CANCELLED = "CANCELLED", "a reindex given up (CancelReindex) or refused by its eval set; dropped"


class JobKind(enum.StrEnum):
    # The pipeline that drives the document's state machine (one per document).
    INGEST = "INGEST"
    # Re-embed a READY document's chunk snapshot into a BUILDING generation; the document's
    # status never changes (one per document and generation).
    EMBED = "EMBED"


class JobPriority(enum.IntEnum):
    """How soon a job runs among its collection's queued work (docs/tenancy.md, "Priorities"); the
    numbers are JobPriority's in the protos and `ingestion_jobs.priority`'s, smaller first."""

    # A person is waiting: an upload through the API or the CLI, a retry, a reprocess.
    INTERACTIVE = 1
    # A source or folder sync, a re-index: after interactive work, never starved (BULK_TURN_AFTER).
    BULK = 2


# After this many interactive claims in a row from one collection while bulk work of it waits,
# its oldest bulk job goes next: bulk work gets at least 1 claim in BULK_TURN_AFTER + 1 of its
# collection, and an interactive job waits behind at most one bulk job.
BULK_TURN_AFTER = 10


class AttemptOutcome(enum.StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    RETRYABLE_FAILURE = "RETRYABLE_FAILURE"
    PERMANENT_FAILURE = "PERMANENT_FAILURE"
    LEASE_EXPIRED = "LEASE_EXPIRED"
    RELEASED = "RELEASED"
    CANCELLED = "CANCELLED"


# The stages a worker reports, in pipeline order (rule 2: reported before each starts).
STAGES: tuple[DocumentStatus, ...] = (
    DocumentStatus.PARSING,
    DocumentStatus.CHUNKING,
    DocumentStatus.EMBEDDING,
    DocumentStatus.INDEXING,
)
IN_PROGRESS: frozenset[DocumentStatus] = frozenset(STAGES)

DOCUMENT_TRANSITIONS: dict[tuple[DocumentStatus, DocumentStatus], str] = {
    (DocumentStatus.PENDING, DocumentStatus.PARSING): "a worker holding the lease starts parsing (status before action)",
    (DocumentStatus.PENDING, DocumentStatus.EMBEDDING): "a retry resumes from the chunk snapshot, skipping parse and chunk",
    (DocumentStatus.PARSING, DocumentStatus.CHUNKING): "parsing succeeded; chunking (and the snapshot) starts",
    (DocumentStatus.CHUNKING, DocumentStatus.EMBEDDING): "the snapshot is saved; embedding starts",
    (DocumentStatus.EMBEDDING, DocumentStatus.INDEXING): "every chunk has a vector; the index write starts",
    (DocumentStatus.INDEXING, DocumentStatus.READY): "rule 1: the atomic commit of chunks, READY and job SUCCEEDED",
    (DocumentStatus.PENDING, DocumentStatus.FAILED): "rule 8: lease expired with attempts exhausted before any stage began",
    (DocumentStatus.PARSING, DocumentStatus.FAILED): "the file is bad (permanent) or attempts are exhausted",
    (DocumentStatus.CHUNKING, DocumentStatus.FAILED): "chunking failed for good or attempts are exhausted",
    (DocumentStatus.EMBEDDING, DocumentStatus.FAILED): "the embedder rejected the input or attempts are exhausted",
    (DocumentStatus.INDEXING, DocumentStatus.FAILED): "the index write failed for good or attempts are exhausted",
    (
        DocumentStatus.PARSING,
        DocumentStatus.PENDING,
    ): "rule 7: a temporary failure, retried after a delay (or a hand-back/expired lease)",
    (
        DocumentStatus.CHUNKING,
        DocumentStatus.PENDING,
    ): "rule 7: a temporary failure, retried after a delay (or a hand-back/expired lease)",
    (
        DocumentStatus.EMBEDDING,
        DocumentStatus.PENDING,
    ): "rule 7: a temporary failure, retried after a delay (or a hand-back/expired lease)",
    (
        DocumentStatus.INDEXING,
        DocumentStatus.PENDING,
    ): "rule 7: a temporary failure, retried after a delay (or a hand-back/expired lease)",
    (DocumentStatus.PENDING, DocumentStatus.PENDING): "a failure, an expired lease or a hand-back before the first stage"
    " began: still waiting, now with the retry message",
    (DocumentStatus.FAILED, DocumentStatus.PENDING): "RetryDocument: the user asks for a fresh set of attempts",
    (DocumentStatus.READY, DocumentStatus.PENDING): "ReprocessDocument: the document leaves search until READY again",
}

JOB_TRANSITIONS: dict[tuple[JobStatus, JobStatus], str] = {
    (JobStatus.PENDING, JobStatus.RUNNING): "rule 6: a claim of a due job (attempts + 1, new lease)",
    (JobStatus.RUNNING, JobStatus.RUNNING): "rule 6: a claim that takes over an expired lease (attempts + 1, new lease)",
    (JobStatus.RUNNING, JobStatus.PENDING): "rule 7: a retryable failure with attempts left, or a hand-back at shutdown",
    (JobStatus.RUNNING, JobStatus.SUCCEEDED): "rule 1: the commit; also rule 8 when the document is already READY",
    (JobStatus.RUNNING, JobStatus.FAILED): "rule 7/8: a permanent error, or attempts exhausted",
    (JobStatus.FAILED, JobStatus.PENDING): "RetryDocument: fresh attempts for a failed document",
    (JobStatus.SUCCEEDED, JobStatus.PENDING): "ReprocessDocument: run the pipeline again",
}


GENERATION_TRANSITIONS: dict[tuple[GenerationState, GenerationState], str] = {
    (
        GenerationState.BUILDING,
        GenerationState.ACTIVE,
    ): "the switch: every READY document has its chunks in the new generation (and, with an eval set, search's verdict PASSED)",
    (
        GenerationState.ACTIVE,
        GenerationState.RETIRED,
    ): "the switch: the generation replaced; its chunks and index are dropped after a grace period",
    (
        GenerationState.BUILDING,
        GenerationState.CANCELLED,
    ): "CancelReindex, or the quality gate's FAILED verdict (the new generation scored lower on the reindex's eval set):"
    " the new generation is dropped, the active one keeps serving",
}


class IllegalTransition(FailedPrecondition):
    default_reason = Reason.ILLEGAL_TRANSITION


def check_document_transition(current: DocumentStatus, target: DocumentStatus) -> DocumentStatus:
    if (current, target) not in DOCUMENT_TRANSITIONS:
        raise IllegalTransition(f"a document cannot go from {current} to {target}", current=current, target=target)
    return target


def check_job_transition(current: JobStatus, target: JobStatus) -> JobStatus:
    if (current, target) not in JOB_TRANSITIONS:
        raise IllegalTransition(f"a job cannot go from {current} to {target}", current=current, target=target)
    return target


def check_generation_transition(current: GenerationState, target: GenerationState) -> GenerationState:
    if (current, target) not in GENERATION_TRANSITIONS:
        raise IllegalTransition(f"an index generation cannot go from {current} to {target}", current=current, target=target)
    return target


def _sources(table: dict[tuple[Any, Any], str], target: Any, narrowed: Iterable[Any] | None) -> list[str]:
    allowed = {a for (a, b) in table if b == target}
    if narrowed is not None:
        wanted = set(narrowed)
        if not wanted <= allowed:
            raise IllegalTransition(f"no edge to {target} from {sorted(map(str, wanted - allowed))}", target=target)
        allowed = wanted
    return sorted(str(a) for a in allowed)


def document_sources(target: DocumentStatus, narrowed: Iterable[DocumentStatus] | None = None) -> list[str]:
    """The statuses a document may move to `target` from, for `WHERE status = ANY(...)`;
    `narrowed` keeps a subset of them (a source the table lacks raises IllegalTransition)."""
    return _sources(DOCUMENT_TRANSITIONS, target, narrowed)


def job_sources(target: JobStatus, narrowed: Iterable[JobStatus] | None = None) -> list[str]:
    """The same for a job (JOB_TRANSITIONS)."""
    return _sources(JOB_TRANSITIONS, target, narrowed)


def generation_sources(target: GenerationState, narrowed: Iterable[GenerationState] | None = None) -> list[str]:
    """The same for an index generation (GENERATION_TRANSITIONS)."""
    return _sources(GENERATION_TRANSITIONS, target, narrowed)


@dataclass(frozen=True)
class IndexSettings:
    """What a generation embeds with: the embedder and the vector index's precision."""

    provider: str
    model: str
    dimensions: int
    precision: str


@dataclass(frozen=True)
class BuildingGeneration:
    """A collection's BUILDING generation as ReindexCollection finds it, under its locks."""

    settings: IndexSettings
    # Whether it is still BUILDING once locked (a CancelReindex may have ended it meanwhile).
    still_building: bool
    # None when the call gave no eval set; else whether it is the one the generation was started with.
    same_gate: bool | None
    failed_jobs: int


class ReindexDecision(enum.Enum):
    # A BUILDING generation with this embedder exists: its failed EMBED jobs get fresh attempts.
    RETRY_FAILED = "retry_failed"
    # None is building: a new BUILDING generation, with an EMBED job per READY document.
    NEW_GENERATION = "new_generation"


def decide_reindex(
    collection: str, wanted: IndexSettings, active: IndexSettings, building: BuildingGeneration | None
) -> ReindexDecision:
    """What ReindexCollection does (docs/architecture.md#index-generations), or the
    FAILED_PRECONDITION that says why it does nothing: another reindex in progress, a retry with
    nothing failed or with another eval set, a reindex cancelled meanwhile, or nothing to change."""
    if building is None:
        if wanted == active:
            raise FailedPrecondition(
                f"collection {collection!r} already uses {wanted.provider}/{wanted.model} with {wanted.dimensions} dimensions"
                f" and {wanted.precision} vectors: nothing to reindex",
                reason=Reason.EMBEDDER_UNCHANGED,
                collection=collection,
            )
        return ReindexDecision.NEW_GENERATION
    if building.settings != wanted:
        raise FailedPrecondition(
            f"collection {collection!r} is already being reindexed to {building.settings.provider}/{building.settings.model}"
            f" ({building.settings.precision} vectors); cancel it first",
            reason=Reason.REINDEX_IN_PROGRESS,
            collection=collection,
        )
    if not building.still_building:
        raise FailedPrecondition(
            f"the reindex of {collection!r} was cancelled meanwhile; start it again",
            reason=Reason.NO_REINDEX_IN_PROGRESS,
            collection=collection,
        )
    if building.same_gate is False:
        raise FailedPrecondition(
            f"the reindex of {collection!r} in progress has another eval set (or none): an eval set is fixed"
            " when the reindex starts; cancel it and start again to change it",
            reason=Reason.REINDEX_IN_PROGRESS,
            collection=collection,
        )
    if building.failed_jobs == 0:
        raise FailedPrecondition(
            f"collection {collection!r} is already being reindexed to this embedder and no document failed",
            reason=Reason.REINDEX_IN_PROGRESS,
            collection=collection,
        )
    return ReindexDecision.RETRY_FAILED


def retry_delay_seconds(attempts: int, base: float, cap: float = 300.0) -> float:
    """Rule 7: base x 2^(attempts-1), capped (300 s by default)."""
    if attempts < 1:
        raise ValueError("attempts starts at 1")
    exponent = min(attempts - 1, 32)  # 2^32 x any sane base is far past the cap
    return float(min(base * (2**exponent), cap))


def should_retry(retryable: bool, attempts: int, max_attempts: int) -> bool:
    """Rule 7: retry only what is temporary, and only while attempts remain."""
    return retryable and attempts < max_attempts


def retry_message(attempt: int, max_attempts: int, error: str) -> str:
    return f"attempt {attempt}/{max_attempts} failed temporarily, will retry automatically: {error}"


LEASE_EXPIRED_EXHAUSTED = "worker lease expired and the maximum number of attempts was reached"
LEASE_EXPIRED_RETRYING = "the worker stopped renewing its lease"

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def safe_error_message(message: str, limit: int = 2000) -> str:
    """A message fit to show a user: no control characters, bounded length, never empty."""
    text = _CONTROL.sub(" ", message or "").strip()
    if not text:
        text = "processing failed for an unknown reason"
    return text if len(text) <= limit else text[: limit - 1] + "…"


TENANT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def check_tenant_name(name: str) -> str:
    if not TENANT_NAME.match(name or ""):
        raise InvalidArgument(
            "tenant name must be 1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit",
            reason=Reason.INVALID_TENANT_NAME,
        )
    return name


def safe_filename(name: str) -> str:
    """The base name of an uploaded file, without directories or control characters.

    Kept for display only: the content lives in the database, never on a path built from it.
    """
    name = unicodedata.normalize("NFC", name or "")
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip().strip(".")
    if len(name) > 255:
        stem, dot, ext = name.rpartition(".")
        ext = ext[:16] if dot else ""
        name = (stem if dot else name)[: 255 - len(ext) - 1] + ("." + ext if ext else "")
    return name


MAX_SOURCE_URI_CHARS = 2048


class VersionRole(enum.StrEnum):
    """The role of one version (one `documents` row) among the live versions of its source
    (docs/architecture.md#document-versions); not a state machine: it changes once, NEXT →
    CURRENT, in the READY commit that deletes the version it replaces."""

    # The version the document serves (searchable while READY): at most one per source.
    CURRENT = "CURRENT"
    # Newer content being processed, or FAILED: at most one per source.
    NEXT = "NEXT"


class VersionOutcome(enum.StrEnum):
    """How a version's row ended (document_versions.outcome)."""

    # It was CURRENT; a newer version's READY commit deleted it.
    REPLACED = "REPLACED"
    # It was NEXT; newer content (or the current content again) arrived before it served.
    SUPERSEDED = "SUPERSEDED"
    # DeleteDocument (or its collection's deletion).
    DELETED = "DELETED"


def source_uri_of(value: str) -> str | None:
    """An upload's or a look-up's `source_uri` as given (None when empty), or INVALID_ARGUMENT:
    at most 2048 characters, no control characters, not only blanks. Not normalised: it names
    the document in its source, byte for byte."""
    if not value:
        return None
    if len(value) > MAX_SOURCE_URI_CHARS:
        raise InvalidArgument(f"source_uri is longer than {MAX_SOURCE_URI_CHARS} characters", reason=Reason.INVALID_SOURCE_URI)
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        raise InvalidArgument("source_uri contains a control character", reason=Reason.INVALID_SOURCE_URI)
    if not value.strip():
        raise InvalidArgument("source_uri is blank", reason=Reason.INVALID_SOURCE_URI)
    return value


class SourceRunEvents(enum.StrEnum):
    """Whether a WatchCollection stream carries the collection's sync-run events besides its
    document events (docs/sources.md): NONE (document events only, as before run events
    existed), INCLUDED, or ONLY (run events only)."""

    NONE = "NONE"
    INCLUDED = "INCLUDED"
    ONLY = "ONLY"


@dataclass(frozen=True, slots=True, order=True)
class EventCursor:
    """A position in a collection's events log: after the event `event_id` written by transaction
    `txid`. The log is read in (txid, event_id) order, so the cursor carries both; clients see it
    as an opaque string."""

    txid: int
    event_id: int

    def encode(self) -> str:
        return f"{self.txid}.{self.event_id}"

    @classmethod
    def parse(cls, text: str) -> EventCursor:
        txid, dot, event_id = text.partition(".")
        if not dot or not txid.isdigit() or not event_id.isdigit() or len(text) > 41:
            raise InvalidArgument(f"cursor {text[:50]!r} is not a cursor this server returned", reason=Reason.INVALID_CURSOR)
        return cls(int(txid), int(event_id))
