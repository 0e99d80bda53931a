"""What calls return: plain dataclasses made from the messages, with the message kept as `raw`.

Enums are Python enums named without their protobuf prefix (`DocumentStatus.READY`), times are
timezone-aware `datetime`s (None when unset), int64 fields are ints, typed metadata holds Python
values (str, float, bool, datetime, list[str]). `raw` is the message as received, for a field
this module does not surface and for printing it as the contract's JSON.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

from google.protobuf.timestamp_pb2 import Timestamp

from .protos import admin_service_pb2, collection_pb2, document_pb2, document_service_pb2, search_service_pb2, webhook_service_pb2
from .sources import SourceRunEvent


class DocumentStatus(enum.Enum):
    """Where a document is: PENDING → PARSING → CHUNKING → EMBEDDING → INDEXING → READY, or FAILED."""

    UNSPECIFIED = 0
    PENDING = 1
    PARSING = 2
    CHUNKING = 3
    EMBEDDING = 4
    INDEXING = 5
    READY = 6
    FAILED = 7

    @property
    def terminal(self) -> bool:
        """READY or FAILED: nothing more happens to the document unless someone asks."""
        return self in (DocumentStatus.READY, DocumentStatus.FAILED)

    @classmethod
    def of(cls, value: DocumentStatus | str | int | None) -> DocumentStatus:
        """A status from its name ("ready", "DOCUMENT_STATUS_READY"), number or itself."""
        if value is None:
            return cls.UNSPECIFIED
        if isinstance(value, cls):
            return value
        if isinstance(value, int):
            return cls(value)
        name = str(value).strip().upper().removeprefix("DOCUMENT_STATUS_")
        try:
            return cls[name]
        except KeyError:
            names = ", ".join(s.name.lower() for s in cls if s is not cls.UNSPECIFIED)
            raise ValueError(f"unknown status {value!r}; use one of {names}") from None


class SearchMode(enum.Enum):
    """How chunks are matched; HYBRID fuses VECTOR and KEYWORD."""

    UNSPECIFIED = 0
    VECTOR = 1
    KEYWORD = 2
    HYBRID = 3

    @classmethod
    def of(cls, value: SearchMode | str | int | None) -> SearchMode:
        if value is None:
            return cls.UNSPECIFIED
        if isinstance(value, cls):
            return value
        if isinstance(value, int):
            return cls(value)
        name = str(value).strip().upper().removeprefix("SEARCH_MODE_")
        try:
            return cls[name]
        except KeyError:
            raise ValueError(f"unknown search mode {value!r}; use vector, keyword or hybrid") from None


class Embedder(enum.Enum):
    """Who computes a collection's vectors: LOCAL (a model on the servers' CPU, offline), HASHING
    (fast, for tests) or OPENAI (any OpenAI-compatible API configured on the servers)."""

    UNSPECIFIED = 0
    HASHING = 1
    LOCAL = 2
    OPENAI = 3

    @classmethod
    def of(cls, value: Embedder | str | int | None) -> Embedder:
        if value is None:
            return cls.UNSPECIFIED
        if isinstance(value, cls):
            return value
        if isinstance(value, int):
            return cls(value)
        name = str(value).strip().upper().removeprefix("EMBEDDER_PROVIDER_")
        name = "LOCAL" if name == "SENTENCE_TRANSFORMERS" else name
        try:
            return cls[name]
        except KeyError:
            raise ValueError(f"unknown embedder {value!r}; use local, hashing or openai") from None


def _time(stamp: Timestamp, present: bool = True) -> dt.datetime | None:
    if not present or (stamp.seconds == 0 and stamp.nanos == 0):
        return None
    value: dt.datetime = stamp.ToDatetime(tzinfo=dt.UTC)
    return value


def python_value(value: document_pb2.MetadataValue) -> Any:
    """A MetadataValue as a Python value."""
    kind = value.WhichOneof("kind")
    if kind == "timestamp_value":
        return value.timestamp_value.ToDatetime(tzinfo=dt.UTC)
    if kind == "string_list_value":
        return list(value.string_list_value.values)
    return getattr(value, kind) if kind else None


@dataclass(frozen=True)
class Progress:
    """How far the current stage has come (`done` of `total` `unit`s; total 0 while unknown)."""

    stage: DocumentStatus
    done: int
    total: int
    unit: str

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total > 0 else 0.0


@dataclass(frozen=True)
class Attempt:
    """One processing attempt of a document (Document.attempts from `documents.get`)."""

    number: int
    worker_id: str
    stage: DocumentStatus
    outcome: str  # SUCCEEDED, RETRYABLE_FAILURE, PERMANENT_FAILURE, LEASE_EXPIRED, RELEASED, CANCELLED, RUNNING
    error_code: str
    error_message: str
    retryable: bool
    start_time: dt.datetime | None
    end_time: dt.datetime | None


@dataclass(frozen=True)
class Document:
    """An uploaded file and where its processing is."""

    id: str
    name: str
    collection: str
    filename: str
    mime_type: str
    status: DocumentStatus
    error_message: str
    error_code: str
    progress: Progress | None
    attempts: int
    max_attempts: int
    chunk_count: int
    content_sha256: str
    size_bytes: int
    metadata: dict[str, str]
    typed_metadata: dict[str, Any]
    create_time: dt.datetime | None
    update_time: dt.datetime | None
    next_attempt_time: dt.datetime | None
    attempt_history: list[Attempt] = field(default_factory=list)
    # The path or URL naming the document in its source, and this version's number (0 without
    # one); GetDocument's `raw.versions` shows the current, pending or failed and past versions.
    source_uri: str = ""
    version: int = 0
    # Opaque: pass it to search(consistency_token=...) to read this state of the document from a
    # search served by a replica (docs/scaling.md#read-replicas-and-the-consistency-token).
    consistency_token: str = field(default="", repr=False, compare=False)
    raw: document_pb2.Document = field(default_factory=document_pb2.Document, repr=False, compare=False)

    @property
    def done(self) -> bool:
        """READY or FAILED."""
        return self.status.terminal

    @property
    def ready(self) -> bool:
        return self.status is DocumentStatus.READY

    @property
    def failed(self) -> bool:
        return self.status is DocumentStatus.FAILED

    @classmethod
    def from_proto(cls, message: document_pb2.Document) -> Document:
        progress = None
        if message.HasField("progress") and message.progress.stage:
            p = message.progress
            progress = Progress(DocumentStatus(p.stage), p.done, p.total, p.unit)
        return cls(
            id=message.id,
            name=message.name,
            collection=message.collection,
            filename=message.filename,
            mime_type=message.mime_type,
            status=DocumentStatus(message.status),
            error_message=message.error_message,
            error_code=message.error_code,
            progress=progress,
            attempts=message.attempts,
            max_attempts=message.max_attempts,
            chunk_count=message.chunk_count,
            content_sha256=message.content_sha256,
            size_bytes=message.size_bytes,
            metadata=dict(message.metadata),
            typed_metadata={key: python_value(value) for key, value in message.typed_metadata.items()},
            create_time=_time(message.create_time),
            update_time=_time(message.update_time),
            next_attempt_time=_time(message.next_attempt_time, message.HasField("next_attempt_time")),
            source_uri=message.source_uri,
            version=message.version,
            consistency_token=message.consistency_token,
            attempt_history=[
                Attempt(
                    a.number,
                    a.worker_id,
                    DocumentStatus(a.stage),
                    document_pb2.AttemptOutcome.Name(a.outcome).removeprefix("ATTEMPT_OUTCOME_"),
                    a.error_code,
                    a.error_message,
                    a.retryable,
                    _time(a.start_time),
                    _time(a.end_time),
                )
                for a in message.attempt_history
            ],
            raw=message,
        )


@dataclass(frozen=True)
class EmbedderConfig:
    """A collection's embedder: who (`provider`), which `model`, how many `dimensions`."""

    provider: Embedder
    model: str
    dimensions: int


@dataclass(frozen=True)
class Generation:
    """One index generation of a collection (a reindex builds a new one; docs/search.md)."""

    number: int
    state: str  # BUILDING, ACTIVE, RETIRED, CANCELLED
    embedder: EmbedderConfig
    documents_total: int
    documents_ready: int
    documents_failed: int
    documents_pending: int
    raw: collection_pb2.CollectionGeneration = field(repr=False, compare=False)


@dataclass(frozen=True)
class Collection:
    """A named set of documents that share one embedder and chunking."""

    name: str
    description: str
    embedder: EmbedderConfig
    chunk_max_characters: int
    chunk_overlap: int
    max_attempts: int
    document_count: int
    ready_document_count: int
    create_time: dt.datetime | None
    generations: list[Generation]
    raw: collection_pb2.Collection = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, message: collection_pb2.Collection) -> Collection:
        def embedder(config: collection_pb2.EmbedderConfig) -> EmbedderConfig:
            return EmbedderConfig(Embedder(config.provider), config.model, config.dimensions)

        return cls(
            name=message.name,
            description=message.description,
            embedder=embedder(message.embedder),
            chunk_max_characters=message.chunking.max_characters,
            chunk_overlap=message.chunking.overlap,
            max_attempts=message.max_attempts,
            document_count=message.document_count,
            ready_document_count=message.ready_document_count,
            create_time=_time(message.create_time),
            generations=[
                Generation(
                    g.number,
                    collection_pb2.GenerationState.Name(g.state).removeprefix("GENERATION_STATE_"),
                    embedder(g.embedder),
                    g.documents_total,
                    g.documents_ready,
                    g.documents_failed,
                    g.documents_pending,
                    g,
                )
                for g in message.generations
            ],
            raw=message,
        )


def rerank_status_name(value: search_service_pb2.RerankStatus.ValueType) -> str:
    """UNSPECIFIED (not asked for), APPLIED, FAILED, TIMED_OUT or SKIPPED."""
    name: str = search_service_pb2.RerankStatus.Name(value)
    return name.removeprefix("RERANK_STATUS_")


@dataclass(frozen=True)
class HitExplanation:
    """Why a hit ranked where it did (`search(..., explain=True)`; docs/search.md, "Why a hit ranked").

    A list the hit was not in (the keyword list of a chunk without the query's words, or a side
    the mode does not use) leaves its rank None, and its score too unless search measured it for
    the explanation (a HYBRID hit outside the keyword list scores 0.0 there); None is never a
    score of 0. The HYBRID parts are None in another mode, the reranker's score when it did not
    answer in time. Ranks count from 1."""

    keyword_score: float | None
    keyword_rank: int | None
    vector_similarity: float | None
    vector_rank: int | None
    fused_score: float  # HYBRID: the fused score (the hit's first-stage score); the mode's score otherwise
    keyword_contribution: float | None  # HYBRID: the keyword list's part of the fused score
    vector_contribution: float | None  # HYBRID: the vector list's part
    vector_weight: float | None  # HYBRID: the vector list's weight for this query (keyword's is 1 minus it)
    first_stage_rank: int
    rerank_score: float | None
    rerank_status: str  # as SearchResults.rerank_status
    matched_terms: list[str]  # the query's terms (stemmed as the keyword index stems them) the chunk contains
    raw: search_service_pb2.HitExplanation = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, e: search_service_pb2.HitExplanation) -> HitExplanation:
        # proto3 `optional`: HasField tells an unset score from a real 0.0.
        return cls(
            keyword_score=e.keyword_score if e.HasField("keyword_score") else None,
            keyword_rank=e.keyword_rank if e.HasField("keyword_rank") else None,
            vector_similarity=e.vector_similarity if e.HasField("vector_similarity") else None,
            vector_rank=e.vector_rank if e.HasField("vector_rank") else None,
            fused_score=e.fused_score,
            keyword_contribution=e.keyword_contribution if e.HasField("keyword_contribution") else None,
            vector_contribution=e.vector_contribution if e.HasField("vector_contribution") else None,
            vector_weight=e.vector_weight if e.HasField("vector_weight") else None,
            first_stage_rank=e.first_stage_rank,
            rerank_score=e.rerank_score if e.HasField("rerank_score") else None,
            rerank_status=rerank_status_name(e.rerank_status),
            matched_terms=list(e.matched_terms),
            raw=e,
        )


@dataclass(frozen=True)
class Hit:
    """One matching chunk: its text, score, document and position."""

    text: str
    score: float
    document_id: str
    filename: str
    chunk_index: int
    page_number: int  # 0 when the format has no pages
    metadata: dict[str, str]
    context: str  # with neighbors > 0: this chunk and its neighbours; else ""
    raw: search_service_pb2.SearchHit = field(repr=False, compare=False)
    chunk_id: str = ""  # the chunk's id, for documents.disable_chunk / enable_chunk / edit_chunk
    explanation: HitExplanation | None = None  # with search(..., explain=True); None otherwise

    @classmethod
    def from_proto(cls, hit: search_service_pb2.SearchHit) -> Hit:
        return cls(
            hit.text,
            hit.score,
            hit.document_id,
            hit.filename,
            hit.chunk_index,
            hit.page_number,
            dict(hit.metadata),
            hit.context,
            hit,
            hit.chunk_id,
            HitExplanation.from_proto(hit.explanation) if hit.HasField("explanation") else None,
        )


class SearchResults(Sequence[Hit]):
    """The hits, best first (a sequence: iterate, index, len), with how they were found."""

    __slots__ = ("_hits", "raw")

    def __init__(self, response: search_service_pb2.SearchResponse) -> None:
        self.raw = response
        self._hits: list[Hit] | None = None

    @property
    def hits(self) -> list[Hit]:
        if self._hits is None:  # made when first read: a caller that only counts pays nothing
            self._hits = [Hit.from_proto(h) for h in self.raw.hits]
        return self._hits

    @property
    def mode(self) -> SearchMode:
        return SearchMode(self.raw.mode)

    @property
    def rerank_status(self) -> str:
        """UNSPECIFIED (not asked for), APPLIED, FAILED, TIMED_OUT or SKIPPED."""
        return rerank_status_name(self.raw.rerank.status)

    @property
    def generation(self) -> int:
        """The index generation that answered (search(..., generation=N) asks for one)."""
        return self.raw.generation

    @overload
    def __getitem__(self, index: int) -> Hit: ...

    @overload
    def __getitem__(self, index: slice) -> list[Hit]: ...

    def __getitem__(self, index: int | slice) -> Hit | list[Hit]:
        return self.hits[index]

    def __len__(self) -> int:
        return len(self.raw.hits)

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __repr__(self) -> str:
        return f"SearchResults({len(self)} hits, mode={self.mode.name})"


@dataclass(frozen=True)
class BoundingBox:
    """Where an element of a chunk lies on its page (PDF and images): edges 0 to 1, page from 1."""

    page_number: int
    left: float
    top: float
    right: float
    bottom: float


@dataclass(frozen=True)
class Chunk:
    """One chunk of a document as an index generation holds it (`documents.list_chunks`, and what
    `disable_chunk`, `enable_chunk` and `edit_chunk` return). `etag` changes whenever the chunk
    does: pass it back to refuse a lost update (Aborted, reason CHUNK_CHANGED)."""

    id: str
    document_id: str
    chunk_index: int
    text: str  # the edited text when it was edited
    page_number: int  # 0 when the format has no pages
    element_type: str
    element_types: list[str]
    section_title: str
    text_as_html: str  # tables only
    boxes: list[BoundingBox]
    token_count: int  # words as the keyword index counts them
    character_count: int
    generation: int
    enabled: bool  # False: search does not return it
    edited: bool
    original_text: str  # the parser's text, when edited
    text_source: str  # text_layer, ocr or mixed
    ocr_confidence: float
    update_time: dt.datetime | None
    etag: str
    raw: document_service_pb2.DocumentChunk = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, c: document_service_pb2.DocumentChunk) -> Chunk:
        return cls(
            id=c.id,
            document_id=c.document_id,
            chunk_index=c.chunk_index,
            text=c.text,
            page_number=c.page_number,
            element_type=c.element_type,
            element_types=list(c.element_types),
            section_title=c.section_title,
            text_as_html=c.text_as_html,
            boxes=[BoundingBox(b.page_number, b.left, b.top, b.right, b.bottom) for b in c.boxes],
            token_count=c.token_count,
            character_count=c.character_count,
            generation=c.generation,
            enabled=c.enabled,
            edited=c.edited,
            original_text=c.original_text,
            text_source=c.text_source,
            ocr_confidence=c.ocr_confidence,
            update_time=_time(c.update_time, c.HasField("update_time")),
            etag=c.etag,
            raw=c,
        )


@dataclass(frozen=True)
class ChunkPage:
    """One page of a document's chunks, in chunk_index order; `next_page_token` is empty on the
    last page. `total_size` counts the document's chunks in `generation`, enabled or not."""

    chunks: list[Chunk]
    next_page_token: str
    total_size: int
    generation: int
    raw: document_service_pb2.ListChunksResponse = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, page: document_service_pb2.ListChunksResponse) -> ChunkPage:
        return cls([Chunk.from_proto(c) for c in page.chunks], page.next_page_token, page.total_size, page.generation, page)

    def __iter__(self) -> Iterator[Chunk]:
        return iter(self.chunks)

    def __len__(self) -> int:
        return len(self.chunks)


@dataclass(frozen=True)
class DownloadedDocument:
    """What `documents.download` wrote: the header's description of the bytes (checked: the
    size and SHA-256 of what arrived are these) and where they went (`path`, None for a file object)."""

    filename: str
    mime_type: str
    size_bytes: int
    content_sha256: str
    path: Path | None
    raw: document_service_pb2.DownloadDocumentHeader = field(repr=False, compare=False)


@dataclass(frozen=True)
class CollectionEvent:
    """One change of a document of a watched collection, or one event of a sync run of its
    sources (asked for with `source_runs=`); `cursor` resumes after it.

    `kind` is CHANGED, DELETED, HEARTBEAT (no document: the server read up to `cursor`),
    SOURCE_RUN_STARTED, SOURCE_RUN_PROGRESS or SOURCE_RUN_FINISHED (`source_run` is set,
    `document` is None), or UNKNOWN_<n> for a kind this SDK is older than."""

    cursor: str
    kind: str
    document: Document | None
    time: dt.datetime | None
    raw: document_service_pb2.CollectionEvent = field(repr=False, compare=False)
    source_run: SourceRunEvent | None = None

    @property
    def is_source_run(self) -> bool:
        return self.source_run is not None

    @classmethod
    def from_proto(cls, event: document_service_pb2.CollectionEvent) -> CollectionEvent:
        try:
            kind = document_service_pb2.CollectionEventType.Name(event.type).removeprefix("COLLECTION_EVENT_TYPE_")
        except ValueError:  # a kind added to the server after this SDK: shown, not fatal
            kind = f"UNKNOWN_{event.type}"
        document = Document.from_proto(event.document) if event.HasField("document") else None
        run = SourceRunEvent.from_proto(event.source_run) if event.HasField("source_run") else None
        return cls(event.cursor, kind, document, _time(event.create_time), event, run)


@dataclass(frozen=True)
class Tenant:
    name: str
    max_documents: int
    max_stored_bytes: int
    max_collections: int
    collections: int
    documents: int
    stored_bytes: int
    raw: admin_service_pb2.Tenant = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, t: admin_service_pb2.Tenant) -> Tenant:
        return cls(
            t.name,
            t.quota.max_documents,
            t.quota.max_stored_bytes,
            t.quota.max_collections,
            t.usage.collections,
            t.usage.documents,
            t.usage.stored_bytes,
            t,
        )


@dataclass(frozen=True)
class ApiKey:
    """An API key as listed: its public id and prefix, never its secret."""

    id: str
    prefix: str
    tenant: str
    role: str  # admin, client, reader, worker
    name: str
    create_time: dt.datetime | None
    revoke_time: dt.datetime | None
    raw: admin_service_pb2.ApiKey = field(repr=False, compare=False)
    collections: tuple[str, ...] = ()  # the collections the key is limited to; empty: every one

    @classmethod
    def from_proto(cls, k: admin_service_pb2.ApiKey) -> ApiKey:
        role = admin_service_pb2.ApiKeyRole.Name(k.role).removeprefix("API_KEY_ROLE_").lower()
        return cls(
            k.id,
            k.prefix,
            k.tenant,
            role,
            k.name,
            _time(k.create_time),
            _time(k.revoke_time, k.HasField("revoke_time")),
            k,
            tuple(k.collections),
        )


@dataclass(frozen=True)
class NewApiKey:
    """A key just made: `secret` is the whole key, shown this once."""

    key: ApiKey
    secret: str


@dataclass(frozen=True)
class Webhook:
    id: str
    collection: str
    url: str
    event_types: list[str]  # document.ready, document.failed, …
    state: str
    raw: webhook_service_pb2.Webhook = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, w: webhook_service_pb2.Webhook) -> Webhook:
        return cls(
            w.id,
            w.collection,
            w.url,
            [webhook_event_name(t) for t in w.event_types],
            webhook_service_pb2.WebhookState.Name(w.state).removeprefix("WEBHOOK_STATE_").lower(),
            w,
        )


@dataclass(frozen=True)
class NewWebhook:
    """A webhook just made: `secret` signs its deliveries, shown this once."""

    webhook: Webhook
    secret: str


# Collections.watch's `source_runs`: which sync-run events a watch carries besides the documents'.
SOURCE_RUN_EVENTS = {
    "none": document_service_pb2.SOURCE_RUN_EVENTS_UNSPECIFIED,
    "included": document_service_pb2.SOURCE_RUN_EVENTS_INCLUDED,
    "only": document_service_pb2.SOURCE_RUN_EVENTS_ONLY,
}


def source_run_events(value: str) -> int:
    if value not in SOURCE_RUN_EVENTS:
        raise ValueError(f"source_runs must be one of {', '.join(SOURCE_RUN_EVENTS)}, not {value!r}")
    return SOURCE_RUN_EVENTS[value]


def webhook_event_name(value: webhook_service_pb2.WebhookEventType.ValueType) -> str:
    """WEBHOOK_EVENT_TYPE_DOCUMENT_READY → document.ready (the payload's `type`)."""
    name = webhook_service_pb2.WebhookEventType.Name(value).removeprefix("WEBHOOK_EVENT_TYPE_").lower()
    kind = "source_run" if name.startswith("source_run_") else name.partition("_")[0]  # source_run.started
    return f"{kind}.{name.removeprefix(kind + '_')}"


WEBHOOK_EVENT_TYPES = {
    webhook_event_name(v): v
    for v in webhook_service_pb2.WebhookEventType.values()
    if v != webhook_service_pb2.WEBHOOK_EVENT_TYPE_UNSPECIFIED
}


@dataclass(frozen=True)
class WebhookDelivery:
    event_type: str
    document_id: str
    state: str
    attempts: int
    last_error: str
    last_status_code: int
    raw: webhook_service_pb2.WebhookDelivery = field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, d: webhook_service_pb2.WebhookDelivery) -> WebhookDelivery:
        state = webhook_service_pb2.WebhookDeliveryState.Name(d.state).removeprefix("WEBHOOK_DELIVERY_STATE_").lower()
        return cls(d.event_type, d.document_id, state, d.attempts, d.last_error, d.last_status_code, d)


__all__ = [
    "ApiKey",
    "Attempt",
    "BoundingBox",
    "Chunk",
    "ChunkPage",
    "Collection",
    "CollectionEvent",
    "Document",
    "DocumentStatus",
    "DownloadedDocument",
    "Embedder",
    "EmbedderConfig",
    "Generation",
    "Hit",
    "HitExplanation",
    "NewApiKey",
    "NewWebhook",
    "Progress",
    "SearchMode",
    "SearchResults",
    "Tenant",
    "Webhook",
    "WebhookDelivery",
    "python_value",
]
