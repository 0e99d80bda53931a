"""Every conversion between the protos and the rows of the store or the use cases' types, in
both directions: the servicers (api/*.py, webhooks/api.py) only call these."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, TypeVar, overload

import numpy as np
from google.protobuf import timestamp_pb2
from sluice.v1 import admin_service_pb2 as admin_pb2
from sluice.v1 import collection_pb2, document_pb2, document_service_pb2, job_service_pb2, source_service_pb2
from sluice_common import consistency, reranking, tracing
from sluice_common import metadata as typed_metadata
from sluice_common.auth import Role, prefix_of
from sluice_common.errors import InvalidArgument
from sluice_common.names import document_name, source_name, source_run_name
from sluice_common.reasons import Reason
from sluice_common.worker_errors import client_message

from ..domain import AttemptOutcome, DocumentStatus, GenerationState, JobKind, JobPriority, SourceRunEvents, VersionRole
from ..service import IncomingChunk, KeepAlive
from ..sources.store import RunRow
from ..store import (
    AttemptRow,
    ClaimedJob,
    CollectionEventRow,
    CollectionRow,
    DocumentRow,
    GenerationEvaluationRow,
    GenerationRow,
    LogEvent,
    SourceRunEventRow,
    VersionRow,
    VersionsView,
)
from ..store.chunks import DocumentChunkRow
from ..store.tenants import ApiKeyRow, TenantRow

PROVIDER_TO_PROTO = {
    "hashing": collection_pb2.EMBEDDER_PROVIDER_HASHING,
    "sentence_transformers": collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS,
    "openai": collection_pb2.EMBEDDER_PROVIDER_OPENAI,
}
PROVIDER_FROM_PROTO = {v: k for k, v in PROVIDER_TO_PROTO.items()}
OUTCOME_TO_PROTO = {outcome: document_pb2.AttemptOutcome.Value("ATTEMPT_OUTCOME_" + outcome) for outcome in AttemptOutcome}


@overload
def timestamp(value: dt.datetime) -> timestamp_pb2.Timestamp: ...
@overload
def timestamp(value: dt.datetime | None) -> timestamp_pb2.Timestamp | None: ...
def timestamp(value: dt.datetime | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value)
    return ts


def document_status_to_proto(status: DocumentStatus | None) -> document_pb2.DocumentStatus.ValueType:
    return document_pb2.DocumentStatus.Value("DOCUMENT_STATUS_" + status) if status else document_pb2.DOCUMENT_STATUS_UNSPECIFIED


def document_status_from_proto(value: document_pb2.DocumentStatus.ValueType) -> DocumentStatus | None:
    if value == document_pb2.DOCUMENT_STATUS_UNSPECIFIED:
        return None
    try:
        return DocumentStatus(document_pb2.DocumentStatus.Name(value).removeprefix("DOCUMENT_STATUS_"))
    except ValueError:
        raise InvalidArgument(f"unknown document status {value}", reason=Reason.INVALID_STATUS) from None


def embedder_to_proto(provider: str, model: str, dimensions: int) -> collection_pb2.EmbedderConfig:
    return collection_pb2.EmbedderConfig(provider=PROVIDER_TO_PROTO[provider], model=model, dimensions=dimensions)


def chunking_to_proto(max_characters: int, new_after_n_chars: int, overlap: int) -> collection_pb2.ChunkingConfig:
    return collection_pb2.ChunkingConfig(max_characters=max_characters, new_after_n_chars=new_after_n_chars, overlap=overlap)


GENERATION_STATE_TO_PROTO = {
    state: collection_pb2.GenerationState.Value("GENERATION_STATE_" + state) for state in GenerationState
}
JOB_KIND_TO_PROTO = {JobKind.INGEST: job_service_pb2.JOB_KIND_INGEST, JobKind.EMBED: job_service_pb2.JOB_KIND_EMBED}


def generation_to_proto(row: GenerationRow) -> collection_pb2.CollectionGeneration:
    return collection_pb2.CollectionGeneration(
        number=row.number,
        embedder=embedder_to_proto(row.embedder_provider, row.embedder_model, row.dimensions),
        state=GENERATION_STATE_TO_PROTO[row.state],
        documents_total=row.documents_total,
        documents_ready=row.documents_ready,
        documents_failed=row.documents_failed,
        documents_pending=row.documents_pending,
        create_time=timestamp(row.created_at),
        activate_time=timestamp(row.activated_at),
        end_time=timestamp(row.ended_at),
        failures=[
            collection_pb2.GenerationFailure(
                document_id=str(f.document_id),
                filename=f.filename,
                error_code=f.error_code or "",
                error_message=f.error_message or "",
            )
            for f in row.failures
        ],
        evaluation=evaluation_to_proto(row.evaluation) if row.evaluation is not None else None,
        vector_precision=PRECISION_TO_PROTO[row.vector_precision],
    )


# VectorPrecision <-> collection_generations.vector_precision (sluice_common.vector_index).
PRECISION_TO_PROTO = {
    "float4": collection_pb2.VECTOR_PRECISION_FLOAT4,
    "halfvec": collection_pb2.VECTOR_PRECISION_HALFVEC,
    "binary": collection_pb2.VECTOR_PRECISION_BINARY,
}
PRECISION_FROM_PROTO = {number: name for name, number in PRECISION_TO_PROTO.items()}


def precision_of(value: collection_pb2.VectorPrecision.ValueType) -> str:
    """A VectorPrecision as its column value, "" for unset; INVALID_ARGUMENT for an unknown number."""
    if value == collection_pb2.VECTOR_PRECISION_UNSPECIFIED:
        return ""
    if value not in PRECISION_FROM_PROTO:
        raise InvalidArgument(
            f"vector_precision {value} is not one of FLOAT4, HALFVEC, BINARY", reason=Reason.INVALID_VECTOR_PRECISION
        )
    return PRECISION_FROM_PROTO[value]


def evaluation_to_proto(row: GenerationEvaluationRow) -> collection_pb2.GenerationEvaluation:
    state = (
        collection_pb2.EVALUATION_STATE_PENDING
        if row.passed is None
        else collection_pb2.EVALUATION_STATE_PASSED
        if row.passed
        else collection_pb2.EVALUATION_STATE_FAILED
    )
    return collection_pb2.GenerationEvaluation(
        state=state,
        metric=row.metric,
        active_score=row.active_score,
        candidate_score=row.candidate_score,
        queries=row.queries,
        min_ratio=row.min_ratio,
        evaluate_time=timestamp(row.evaluated_at),
        active_generation=row.active_generation,
    )


def collection_to_proto(row: CollectionRow) -> collection_pb2.Collection:
    return collection_pb2.Collection(
        generations=[generation_to_proto(g) for g in row.generations],
        name=row.name,
        description=row.description,
        embedder=embedder_to_proto(row.embedder_provider, row.embedder_model, row.dimensions),
        chunking=chunking_to_proto(row.chunk_max_characters, row.chunk_new_after_n_chars, row.chunk_overlap),
        document_count=row.document_count,
        ready_document_count=row.ready_document_count,
        create_time=timestamp(row.created_at),
        max_attempts=row.max_attempts,
        reranker=reranking.to_proto(reranking.RerankerSpec.from_json(row.reranker)),
        vector_precision=PRECISION_TO_PROTO[row.vector_precision],
    )


def version_state(row: VersionRow) -> document_pb2.VersionState.ValueType:
    """Where a version stands: its role and status while it exists, else how it ended."""
    if row.version_role is VersionRole.CURRENT:
        return document_pb2.VERSION_STATE_CURRENT
    if row.version_role is VersionRole.NEXT:
        return document_pb2.VERSION_STATE_FAILED if row.status is DocumentStatus.FAILED else document_pb2.VERSION_STATE_PENDING
    if row.outcome:
        return document_pb2.VersionState.Value("VERSION_STATE_" + str(row.outcome))
    return document_pb2.VERSION_STATE_UNSPECIFIED


def version_to_proto(row: VersionRow) -> document_pb2.DocumentVersion:
    return document_pb2.DocumentVersion(
        version=row.version,
        document_id=str(row.document_id),
        content_sha256=row.content_sha256,
        state=version_state(row),
        status=document_status_to_proto(row.status),
        error_message=row.error_message or "",
        create_time=timestamp(row.created_at),
        serving_time=timestamp(row.serving_at),
        end_time=timestamp(row.ended_at),
    )


def versions_to_proto(view: VersionsView) -> document_pb2.DocumentVersions:
    versions = document_pb2.DocumentVersions(history=[version_to_proto(v) for v in view.history])
    if view.current is not None:
        versions.current.CopyFrom(version_to_proto(view.current))
    if view.next is not None:
        versions.next.CopyFrom(version_to_proto(view.next))
    return versions


def _document_proto(
    row: DocumentRow | CollectionEventRow,
    *,
    collection: str,
    document_id: str,
    created_at: dt.datetime | None,
    as_of: dt.datetime,
) -> document_pb2.Document:
    """The Document as a document row or a collection event shows it: every field GetDocument
    answers but attempt_history and versions. An event's fields that never change are None once
    its row is gone; a retry shows as waiting when it is due after `as_of`."""
    metadata = row.metadata or {}
    doc = document_pb2.Document(
        name=document_name(collection, document_id),
        id=document_id,
        collection=collection,
        filename=row.filename or "",
        mime_type=row.mime_type or "",
        status=document_status_to_proto(row.status),
        error_message=row.error_message or "",
        error_code=row.error_code or "",
        progress=document_pb2.Progress(
            stage=document_status_to_proto(row.progress_stage),
            done=row.progress_done,
            total=row.progress_total,
            unit=row.progress_unit,
        ),
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        chunk_count=row.chunk_count,
        content_sha256=row.content_sha256 or "",
        size_bytes=row.size_bytes or 0,
        metadata=typed_metadata.text_map(metadata),
        typed_metadata=typed_metadata.typed_map(metadata),
        job_status=document_pb2.IngestionJobStatus.Value("INGESTION_JOB_STATUS_" + row.job_status),
        create_time=timestamp(created_at),
        update_time=timestamp(row.updated_at),
        source_uri=row.source_uri or "",
        version=row.version or 0,
        consistency_token=consistency.token_of(row.wal_lsn),
        # WatchCollection's events do not carry it (UNSPECIFIED): it is the job's, not the log's.
        priority=document_pb2.JobPriority.ValueType(int(row.priority) if isinstance(row, DocumentRow) else 0),
    )
    if row.job_status == "PENDING" and row.available_at > as_of:
        doc.next_attempt_time.CopyFrom(timestamp(row.available_at))
    return doc


def document_to_proto(
    row: DocumentRow,
    history: list[AttemptRow] | None = None,
    versions: VersionsView | None = None,
) -> document_pb2.Document:
    doc = _document_proto(row, collection=row.collection, document_id=str(row.id), created_at=row.created_at, as_of=row.db_now)
    if versions is not None:
        doc.versions.CopyFrom(versions_to_proto(versions))
    for attempt in history or ():
        doc.attempt_history.append(
            document_pb2.Attempt(
                number=attempt.number,
                worker_id=attempt.worker_id,
                stage=document_status_to_proto(attempt.stage),
                outcome=OUTCOME_TO_PROTO[attempt.outcome],
                error_code=attempt.error_code or "",
                error_message=attempt.error_message or "",
                retryable=bool(attempt.retryable),
                start_time=timestamp(attempt.started_at),
                end_time=timestamp(attempt.ended_at),
            )
        )
    return doc


def run_to_proto(row: RunRow, collection: str) -> source_service_pb2.SourceRun:
    """A sync run; its error_message made client-safe (sluice_common.worker_errors.client_message)."""
    src = source_service_pb2
    run = src.SourceRun(
        name=source_run_name(collection, str(row.source_id), str(row.id)),
        id=str(row.id),
        state=src.SourceRunState.Value("SOURCE_RUN_STATE_" + row.state),
        allow_mass_delete=row.allow_mass_delete,
        listed=row.listed,
        uploaded=row.uploaded,
        unchanged=row.unchanged,
        deleted=row.deleted,
        failed=row.failed,
        error_message=client_message(row.error_message) if row.error_message else "",
        attempts=row.attempts,
        create_time=timestamp(row.created_at),
        would_delete=row.would_delete,
        scheduled=row.scheduled,
    )
    if row.started_at is not None:
        run.start_time.CopyFrom(timestamp(row.started_at))
    if row.ended_at is not None:
        run.end_time.CopyFrom(timestamp(row.ended_at))
    return run


# The CollectionEventType of each kind of run event (migration 0024's run_event).
RUN_EVENT_TYPES = {
    "STARTED": document_service_pb2.COLLECTION_EVENT_TYPE_SOURCE_RUN_STARTED,
    "PROGRESS": document_service_pb2.COLLECTION_EVENT_TYPE_SOURCE_RUN_PROGRESS,
    "FINISHED": document_service_pb2.COLLECTION_EVENT_TYPE_SOURCE_RUN_FINISHED,
}
SOURCE_RUN_EVENTS_FROM_PROTO = {
    document_service_pb2.SOURCE_RUN_EVENTS_UNSPECIFIED: SourceRunEvents.NONE,
    document_service_pb2.SOURCE_RUN_EVENTS_INCLUDED: SourceRunEvents.INCLUDED,
    document_service_pb2.SOURCE_RUN_EVENTS_ONLY: SourceRunEvents.ONLY,
}


def source_run_events_from_proto(value: document_service_pb2.SourceRunEvents.ValueType) -> SourceRunEvents:
    if value not in SOURCE_RUN_EVENTS_FROM_PROTO:
        raise InvalidArgument(f"unknown source_runs value {value}", reason=Reason.INVALID_ARGUMENT)
    return SOURCE_RUN_EVENTS_FROM_PROTO[value]


def source_run_event_to_proto(collection: str, row: SourceRunEventRow) -> document_service_pb2.SourceRunEvent:
    run = RunRow.from_json(row.run)
    return document_service_pb2.SourceRunEvent(
        source=source_name(collection, str(run.source_id)),
        source_display_name=row.run.get("source_display_name") or "",
        run=run_to_proto(run, collection),
    )


def collection_event_to_proto(collection: str, row: LogEvent | KeepAlive) -> document_service_pb2.CollectionEvent:
    if isinstance(row, KeepAlive):
        return document_service_pb2.CollectionEvent(
            cursor=row.cursor.encode(), type=document_service_pb2.COLLECTION_EVENT_TYPE_HEARTBEAT
        )
    if isinstance(row, SourceRunEventRow):
        return document_service_pb2.CollectionEvent(
            cursor=row.cursor.encode(),
            event_id=row.id,
            type=RUN_EVENT_TYPES[row.kind],
            source_run=source_run_event_to_proto(collection, row),
            create_time=timestamp(row.created_at),
        )
    return document_service_pb2.CollectionEvent(
        cursor=row.cursor.encode(),
        event_id=row.id,
        type=document_service_pb2.COLLECTION_EVENT_TYPE_DELETED
        if row.deleted
        else document_service_pb2.COLLECTION_EVENT_TYPE_CHANGED,
        document=event_document_to_proto(collection, row),
        create_time=timestamp(row.created_at),
    )


def event_document_to_proto(collection: str, row: CollectionEventRow) -> document_pb2.Document:
    """The Document as GetDocument would have answered at this event (document_to_proto's fields
    but attempt_history and versions, which GetDocument alone fills): its state from the event,
    what never changes from its row (store/events.py; empty once the row is gone), and a retry
    waiting as of the event's time. The consistency token is the read's, as for GetDocument."""
    return _document_proto(
        row, collection=collection, document_id=str(row.document_id), created_at=row.document_created_at, as_of=row.created_at
    )


def check_chunk_storable(chunk: job_service_pb2.Chunk) -> None:
    """PostgreSQL text and jsonb cannot hold U+0000: refuse it here, naming the chunk, rather
    than fail with INTERNAL at the database (the worker strips it before sending)."""
    if len(chunk.element_types) > MAX_ELEMENT_TYPES or any(len(t) > 100 for t in chunk.element_types):
        raise InvalidArgument(
            f"chunk {chunk.index} has more than {MAX_ELEMENT_TYPES} element types, or one longer than 100 characters",
            reason=Reason.INVALID_CHUNK,
            chunk_index=chunk.index,
        )
    if any("\x00" in t for t in chunk.element_types):
        raise InvalidArgument(
            f"chunk {chunk.index} contains a NUL character (U+0000) in its element_types, which cannot be stored",
            reason=Reason.INVALID_CHUNK_TEXT,
            chunk_index=chunk.index,
            field="element_types",
        )
    for field in ("text", "section_title", "element_type", "text_as_html", "text_source"):
        if "\x00" in getattr(chunk, field):
            raise InvalidArgument(
                f"chunk {chunk.index} contains a NUL character (U+0000) in its {field}, which cannot be stored",
                reason=Reason.INVALID_CHUNK_TEXT,
                chunk_index=chunk.index,
                field=field,
            )


MAX_CHUNK_BOXES = 64
MAX_ELEMENT_TYPES = 32


def boxes_from_proto(chunk: job_service_pb2.Chunk) -> list[dict[str, Any]]:
    """A chunk's element boxes as stored (chunks.boxes), checked: a page from 1, edges within
    the page (0 to 1, rounded to 4 places), left ≤ right and top ≤ bottom, at most 64."""
    if len(chunk.boxes) > MAX_CHUNK_BOXES:
        raise InvalidArgument(
            f"chunk {chunk.index} has {len(chunk.boxes)} boxes; at most {MAX_CHUNK_BOXES} are allowed",
            reason=Reason.INVALID_CHUNK,
            chunk_index=chunk.index,
        )
    boxes: list[dict[str, Any]] = []
    for box in chunk.boxes:
        edges = [box.left, box.top, box.right, box.bottom]
        if box.page_number < 1 or not all(0.0 <= v <= 1.0 for v in edges) or box.left > box.right or box.top > box.bottom:
            raise InvalidArgument(
                f"chunk {chunk.index} has a box outside its page (page {box.page_number}, edges {edges}); pages count from 1 "
                "and edges are fractions of the page, 0 to 1, left ≤ right, top ≤ bottom",
                reason=Reason.INVALID_CHUNK,
                chunk_index=chunk.index,
            )
        boxes.append(
            {
                "page": box.page_number,
                "left": round(box.left, 4),
                "top": round(box.top, 4),
                "right": round(box.right, 4),
                "bottom": round(box.bottom, 4),
            }
        )
    return boxes


def chunk_from_proto(chunk: job_service_pb2.Chunk) -> IncomingChunk:
    check_chunk_storable(chunk)
    return IncomingChunk(
        index=chunk.index,
        text=chunk.text,
        page_number=chunk.page_number,
        element_type=chunk.element_type,
        section_title=chunk.section_title,
        text_as_html=chunk.text_as_html,
        text_source=chunk.text_source,
        ocr_confidence=chunk.ocr_confidence or None,
        boxes=boxes_from_proto(chunk),
        element_types=list(chunk.element_types),
        # float32 at once: a list of Python floats costs 8x the memory for a large document.
        embedding=np.asarray(chunk.embedding, dtype=np.float32),
    )


def chunk_to_proto(chunk: IncomingChunk) -> job_service_pb2.Chunk:
    return job_service_pb2.Chunk(
        index=chunk.index,
        text=chunk.text,
        page_number=chunk.page_number,
        element_type=chunk.element_type,
        section_title=chunk.section_title,
        text_as_html=chunk.text_as_html,
        text_source=chunk.text_source,
        ocr_confidence=chunk.ocr_confidence or 0.0,
        boxes=[
            document_pb2.BoundingBox(page_number=b["page"], left=b["left"], top=b["top"], right=b["right"], bottom=b["bottom"])
            for b in chunk.boxes
        ],
        element_types=chunk.element_types,
    )


def reranker_of(config: collection_pb2.RerankerConfig) -> dict[str, Any] | None:
    """A collection's default reranker, checked against the same rules as search's (the operator's
    SLUICE_RERANK_ALLOWED_URLS, read here too); INVALID_RERANKER says what is wrong."""
    try:
        spec = reranking.from_proto(config, allowed_urls=reranking.RerankSettings().allowed_urls())
    except reranking.RerankerInvalid as err:
        raise InvalidArgument(f"collection.{err}", reason=Reason.INVALID_RERANKER) from None
    return spec.to_json() if spec else None


def typed_metadata_of(values: Mapping[str, document_pb2.MetadataValue]) -> dict[str, typed_metadata.Json]:
    """An upload's typed_metadata as stored JSON; INVALID_METADATA names the entry at fault."""
    out: dict[str, typed_metadata.Json] = {}
    for key, value in values.items():
        try:
            out[key] = typed_metadata.from_proto(value)
        except typed_metadata.MetadataError as err:
            raise InvalidArgument(f"typed_metadata[{key[:64]!r}]: {err}", reason=Reason.INVALID_METADATA) from None
    return out


T = TypeVar("T")


def claimed(value: T | None, column: str) -> T:
    """A column of a claimed job's row: CLAIM_SQL's "exhausted" and "overdue" rows leave it NULL,
    but ClaimStore.claim_job hands out "claimed" rows only, where each one comes from a NOT NULL
    column."""
    if value is None:
        raise RuntimeError(f"the claimed job's row has no {column}: it is not a claimed row")
    return value


def job_to_proto(job: ClaimedJob, lease_seconds: float) -> job_service_pb2.Job:
    """A claimed job as the worker receives it (ClaimJob)."""
    return job_service_pb2.Job(
        lease=job_service_pb2.LeaseRef(job_id=str(job.job_id), lease_token=str(job.lease_token)),
        document_id=str(job.document_id),
        collection=claimed(job.collection, "collection"),
        filename=claimed(job.filename, "filename"),
        mime_type=claimed(job.mime_type, "mime_type"),
        content_sha256=claimed(job.content_sha256, "content_sha256"),
        size_bytes=claimed(job.size_bytes, "size_bytes"),
        attempt=claimed(job.attempts, "attempts"),
        max_attempts=claimed(job.max_attempts, "max_attempts"),
        lease_seconds=lease_seconds,
        embedder=embedder_to_proto(
            claimed(job.embedder_provider, "embedder_provider"),
            claimed(job.embedder_model, "embedder_model"),
            claimed(job.dimensions, "dimensions"),
        ),
        chunking=chunking_to_proto(
            claimed(job.chunk_max_characters, "chunk_max_characters"),
            claimed(job.chunk_new_after_n_chars, "chunk_new_after_n_chars"),
            claimed(job.chunk_overlap, "chunk_overlap"),
        ),
        metadata=typed_metadata.text_map(job.metadata),
        trace_context=tracing.decode_trace_context(job.trace_context),
        kind=JOB_KIND_TO_PROTO[claimed(job.job_kind, "job_kind")],
        generation=job.generation_number or 0,
        content=job.content or b"",
        snapshot_versions=job.snapshot_versions or [],
    )


ROLE_TO_PROTO = {
    Role.ADMIN: admin_pb2.API_KEY_ROLE_ADMIN,
    Role.CLIENT: admin_pb2.API_KEY_ROLE_CLIENT,
    Role.READER: admin_pb2.API_KEY_ROLE_READER,
    Role.WORKER: admin_pb2.API_KEY_ROLE_WORKER,
}
ROLE_FROM_PROTO = {v: k for k, v in ROLE_TO_PROTO.items()}


def priority_of(value: int) -> JobPriority:
    """JobPriority of a request: UNSPECIFIED is INTERACTIVE (docs/tenancy.md, "Priorities")."""
    if value == document_pb2.JOB_PRIORITY_UNSPECIFIED:
        return JobPriority.INTERACTIVE
    try:
        return JobPriority(value)
    except ValueError:
        raise InvalidArgument(f"priority {value} is not INTERACTIVE (1) or BULK (2)", reason=Reason.INVALID_PRIORITY) from None


def tenant_to_proto(row: TenantRow) -> admin_pb2.Tenant:
    q = row.quota
    return admin_pb2.Tenant(
        name=row.name,
        quota=admin_pb2.TenantQuota(
            max_documents=q.max_documents or 0,
            max_stored_bytes=q.max_stored_bytes or 0,
            max_collections=q.max_collections or 0,
        ),
        usage=admin_pb2.TenantUsage(documents=row.documents, stored_bytes=row.stored_bytes, collections=row.collections),
        create_time=timestamp(row.created_at),
        queue=admin_pb2.TenantQueue(weight=row.queue.weight, max_running_jobs=row.queue.max_running_jobs or 0),
    )


def api_key_to_proto(row: ApiKeyRow) -> admin_pb2.ApiKey:
    return admin_pb2.ApiKey(
        id=row.id,
        prefix=prefix_of(row.id),
        tenant=row.tenant,
        role=ROLE_TO_PROTO[row.role],
        name=row.name,
        create_time=timestamp(row.created_at),
        revoke_time=timestamp(row.revoked_at),
        collections=row.collections,
    )


def document_chunk_to_proto(row: DocumentChunkRow) -> document_service_pb2.DocumentChunk:
    """A chunk as ListChunks and UpdateChunk show it (docs/chunks.md)."""
    chunk = document_service_pb2.DocumentChunk()
    fill_document_chunk(chunk, row, str(row.document_id))
    return chunk


def fill_document_chunk(chunk: document_service_pb2.DocumentChunk, row: DocumentChunkRow, document_id: str) -> None:
    """Write `row` into an empty DocumentChunk (a page's `chunks.add()`: no copy). Only the
    fields a chunk has are set, the time in place: a page of 1,000 chunks converts in about half
    the time of building each message from every keyword."""
    chunk.id = str(row.id)
    chunk.document_id = document_id
    chunk.chunk_index = row.chunk_index
    chunk.text = row.text
    chunk.page_number = row.page_number
    chunk.element_type = row.element_type
    if row.element_types:
        chunk.element_types.extend(row.element_types)
    chunk.section_title = row.section_title
    if row.text_as_html:
        chunk.text_as_html = row.text_as_html
    for b in row.boxes or ():
        chunk.boxes.add(page_number=int(b["page"]), left=b["left"], top=b["top"], right=b["right"], bottom=b["bottom"])
    chunk.token_count = row.search_length
    chunk.character_count = len(row.text)
    chunk.generation = row.generation
    chunk.enabled = row.enabled
    if row.original_text is not None:
        chunk.edited = True
        chunk.original_text = row.original_text
    if row.text_source:
        chunk.text_source = row.text_source
    if row.ocr_confidence:
        chunk.ocr_confidence = row.ocr_confidence
    micros = (row.updated_at - EPOCH) // MICROSECOND
    chunk.update_time.seconds, chunk.update_time.nanos = divmod(micros, 1_000_000)
    chunk.update_time.nanos *= 1000
    chunk.etag = row.etag


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
MICROSECOND = dt.timedelta(microseconds=1)


__all__ = [
    "PROVIDER_FROM_PROTO",
    "ROLE_FROM_PROTO",
    "api_key_to_proto",
    "chunk_from_proto",
    "chunk_to_proto",
    "collection_event_to_proto",
    "collection_to_proto",
    "document_chunk_to_proto",
    "document_status_from_proto",
    "document_to_proto",
    "event_document_to_proto",
    "fill_document_chunk",
    "job_to_proto",
    "precision_of",
    "priority_of",
    "reranker_of",
    "run_to_proto",
    "source_run_event_to_proto",
    "source_run_events_from_proto",
    "tenant_to_proto",
    "timestamp",
    "typed_metadata_of",
]
