"""Use cases of ingest-api: validation and orchestration around one store call each."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import logging
import mimetypes
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sluice_common import embedders, metadata as typed_metadata
from sluice_common.errors import InvalidArgument, NotFound, OutOfRange, Unavailable
from sluice_common.names import document_id_of
from sluice_common.reasons import Reason
from sluice_common.worker_errors import WorkerErrorCode, is_registered

from . import metrics, uploads
from .domain import IN_PROGRESS, DocumentStatus as D, EventCursor, safe_error_message, safe_filename
from .notify import NotificationHub
from .ports import IngestStore
from .settings import IngestSettings
from .store import ChunkRow, CollectionEventRow, NewCollection, NewDocument

log = logging.getLogger("sluice.ingest")

COLLECTION_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
ERROR_CODE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
MIME_TYPE = re.compile(r"^[\w.+-]+/[\w.+-]+$")
PROVIDERS = {"hashing", "sentence_transformers", "openai"}
# The local default is embedders.DEFAULT_LOCAL_MODEL (docs/embedders.md says why that one).
DEFAULT_MODELS = {"hashing": ("hashing-v1", 256),
                  "sentence_transformers": (embedders.DEFAULT_LOCAL_MODEL, embedders.DEFAULT_LOCAL_DIMENSIONS)}
MAX_HNSW_DIMENSIONS = 2000  # pgvector's HNSW limit for the vector type
CONTENT_SLICE = 1024 * 1024
EXTRA_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".eml": "message/rfc822",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".txt": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
}
TERMINAL = {D.READY, D.FAILED}
# A reindex's eval set (docs/search.md, "Reindexing with a quality gate"): search runs every query
# twice (the ACTIVE and the new generation), so its size bounds the gate's work.
MAX_EVAL_QUERIES = 1000
MAX_EVAL_QUERY_CHARACTERS = 4096  # search's default SLUICE_SEARCH_MAX_QUERY_CHARACTERS
MAX_EVAL_RELEVANT = 100
MAX_EVAL_LABEL_CHARACTERS = 1024
MAX_EVAL_ID_CHARACTERS = 200
WATCH_WINDOW = 500  # log rows one WatchCollection read looks at
FIRST_RECHECK_SECONDS = 1.0  # WatchDocument's first re-read, then one every RECHECK_SECONDS without news
RECHECK_SECONDS = 30.0


@dataclass(frozen=True)
class EvalQueryIn:
    """One query of a reindex's eval set as the client sent it (ReindexCollectionRequest.eval_queries)."""

    query: str
    relevant: tuple[str, ...]
    id: str = ""


def eval_set_of(queries: list[EvalQueryIn], min_ratio: float) -> tuple[list[dict] | None, float]:
    """The eval set as stored (collection_generations.eval_set) and its ratio, or (None, 1.0)
    for a reindex without one; INVALID_ARGUMENT / INVALID_EVAL_SET naming the first fault."""
    def bad(message: str) -> InvalidArgument:
        return InvalidArgument(message, reason=Reason.INVALID_EVAL_SET)

    if min_ratio != min_ratio or not 0.0 <= min_ratio <= 2.0:  # NaN, negative, above 2
        raise bad("min_ratio must be in (0, 2], or 0 for the default 1.0")
    if not queries:
        if min_ratio:
            raise bad("min_ratio needs eval_queries")
        return None, 1.0
    if len(queries) > MAX_EVAL_QUERIES:
        raise bad(f"eval_queries has {len(queries)} queries; at most {MAX_EVAL_QUERIES}")
    seen: dict[str, int] = {}
    stored = []
    for i, q in enumerate(queries):
        where = f"eval_queries[{i}]" + (f" ({q.id!r})" if q.id else "")
        if len(q.id) > MAX_EVAL_ID_CHARACTERS:
            raise bad(f"eval_queries[{i}].id is longer than {MAX_EVAL_ID_CHARACTERS} characters")
        if q.id and q.id in seen:
            raise bad(f"{where}: id repeats eval_queries[{seen[q.id]}]")
        seen.setdefault(q.id, i)
        if not q.query.strip():
            raise bad(f"{where}: query must be non-empty text")
        if len(q.query) > MAX_EVAL_QUERY_CHARACTERS:
            raise bad(f"{where}: query is longer than {MAX_EVAL_QUERY_CHARACTERS} characters")
        if not q.relevant:
            raise bad(f"{where}: relevant must name at least one document")
        if len(q.relevant) > MAX_EVAL_RELEVANT:
            raise bad(f"{where}: relevant has {len(q.relevant)} entries; at most {MAX_EVAL_RELEVANT}")
        for label in q.relevant:
            if not label.strip() or len(label) > MAX_EVAL_LABEL_CHARACTERS:
                raise bad(f"{where}: each relevant entry must be 1 to {MAX_EVAL_LABEL_CHARACTERS} characters of text")
        stored.append({"id": q.id, "query": q.query, "relevant": list(dict.fromkeys(q.relevant))})
    return stored, min_ratio or 1.0


@dataclass(frozen=True)
class Heartbeat:
    """Nothing to send up to `cursor` (nothing happened, or nothing matched the filters)."""

    cursor: EventCursor


@dataclass
class CollectionSpec:
    name: str
    description: str = ""
    provider: str = ""
    model: str = ""
    dimensions: int = 0
    chunk_max_characters: int = 0
    chunk_new_after_n_chars: int = 0
    chunk_overlap: int = 0
    max_attempts: int = 0
    # The default reranker, checked (sluice_common.reranking.RerankerSpec.to_json); None for none.
    reranker: dict[str, Any] | None = None


@dataclass
class UploadMeta:
    collection: str
    filename: str
    mime_type: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    request_id: str = ""
    expected_size_bytes: int = 0
    expected_sha256: str = ""
    # Typed entries, already converted to their stored JSON (sluice_common.metadata.from_proto).
    typed_metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class IncomingChunk:
    index: int
    text: str
    page_number: int = 0
    element_type: str = ""
    section_title: str = ""
    text_as_html: str = ""
    embedding: np.ndarray | list[float] = field(default_factory=list)
    text_source: str = ""
    ocr_confidence: float | None = None
    # {"page", "left", "top", "right", "bottom"} per element (Chunk.boxes), checked by api.py.
    boxes: list[dict[str, Any]] = field(default_factory=list)


def parse_id(value: str, what: str = "document") -> uuid.UUID:
    """A UUID from a bare id or (for documents) a resource name `collections/c/documents/id`."""
    if what == "document":
        value = document_id_of(value)
    if not value:
        raise InvalidArgument(f"{what} id is required", reason=Reason.MISSING_ID)
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidArgument(f"{what} id {value[:80]!r} is not a valid UUID", reason=Reason.INVALID_ID) from None


def page_size_of(value: int) -> int:
    if value < 0 or value > 1000:
        raise InvalidArgument("page_size must be between 0 and 1000", reason=Reason.INVALID_PAGE_SIZE)
    return value or 100


def encode_token(payload: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()


def decode_token(token: str, filters: str) -> dict[str, Any] | None:
    if not token:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(token.encode()))
        assert isinstance(payload, dict)
    except Exception:  # noqa: BLE001 - any garbage is the same invalid token
        raise InvalidArgument("page_token is not valid", reason=Reason.INVALID_PAGE_TOKEN) from None
    if payload.get("f") != filters:
        raise InvalidArgument("page_token was issued for other filters", reason=Reason.INVALID_PAGE_TOKEN)
    return payload


def detect_mime_type(filename: str, given: str, head: bytes) -> str:
    if given:
        if len(given) > 255 or not MIME_TYPE.match(given):
            raise InvalidArgument(f"mime_type {given[:80]!r} is not a media type like 'text/plain'", reason=Reason.INVALID_MIME_TYPE)
        return given.lower()
    suffix = ("." + filename.rsplit(".", 1)[-1].lower()) if "." in filename else ""
    if suffix in EXTRA_TYPES:
        return EXTRA_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(filename)
    if guessed:
        return guessed
    if head.startswith(b"%PDF"):
        return "application/pdf"
    return "application/octet-stream"


class IngestService:
    def __init__(self, store: IngestStore, hub: NotificationHub, settings: IngestSettings) -> None:
        self.store = store
        self.hub = hub
        self.settings = settings
        self.uploads = uploads.UploadGate(settings.max_concurrent_uploads, settings.upload_idle_timeout_seconds)

    # ------------------------------------------------------------ collections

    async def create_collection(self, tenant_id: int, spec: CollectionSpec) -> dict[str, Any]:
        s = self.settings
        if not COLLECTION_NAME.match(spec.name or ""):
            raise InvalidArgument(
                "collection name must be 1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit",
                reason=Reason.INVALID_COLLECTION_NAME,
            )
        model, dimensions = self._embedder(spec.provider, spec.model, spec.dimensions, "collection.embedder")
        max_chars = spec.chunk_max_characters or s.default_chunk_max_characters
        new_after = spec.chunk_new_after_n_chars or min(s.default_chunk_new_after_n_chars, max_chars)
        overlap = spec.chunk_overlap or min(s.default_chunk_overlap, max_chars // 4)
        if not 50 <= max_chars <= 100_000:
            raise InvalidArgument("chunking.max_characters must be between 50 and 100000", reason=Reason.INVALID_CHUNKING)
        if not 1 <= new_after <= max_chars:
            raise InvalidArgument("chunking.new_after_n_chars must be between 1 and max_characters", reason=Reason.INVALID_CHUNKING)
        if not 0 <= overlap < max_chars:
            raise InvalidArgument("chunking.overlap must be at least 0 and less than max_characters", reason=Reason.INVALID_CHUNKING)
        max_attempts = spec.max_attempts or s.default_max_attempts
        if not 1 <= max_attempts <= 100:
            raise InvalidArgument("max_attempts must be between 1 and 100", reason=Reason.INVALID_MAX_ATTEMPTS)
        if len(spec.description) > 2000:
            raise InvalidArgument("description is longer than 2000 characters", reason=Reason.INVALID_DESCRIPTION)
        return await self.store.create_collection(
            NewCollection(tenant_id, spec.name, spec.description, spec.provider, model, dimensions, max_chars, new_after, overlap, max_attempts,
                          spec.reranker)
        )

    @staticmethod
    def _embedder(provider: str, model: str, dimensions: int, field: str) -> tuple[str, int]:
        """(model, dimensions) with the provider's defaults filled in; INVALID_ARGUMENT for a bad
        embedder, EMBEDDER_MODEL_NOT_INSTALLED for a local model this machine does not have."""
        if provider not in PROVIDERS:
            raise InvalidArgument(f"{field}.provider is required (HASHING, SENTENCE_TRANSFORMERS or OPENAI)",
                                  reason=Reason.INVALID_EMBEDDER)
        default_model, default_dimensions = DEFAULT_MODELS.get(provider, ("", 0))
        model = model or default_model
        if not model:
            raise InvalidArgument(f"{field}.model is required for an OpenAI-compatible embedder",
                                  reason=Reason.INVALID_EMBEDDER)
        if len(model) > 500:
            raise InvalidArgument(f"{field}.model is longer than 500 characters", reason=Reason.INVALID_EMBEDDER)
        if provider == "sentence_transformers":
            try:
                embedders.check_local_model(model)
            except ValueError as exc:
                raise InvalidArgument(str(exc), reason=Reason.EMBEDDER_MODEL_NOT_INSTALLED, model=model) from None
            packaged = embedders.local_model_dimensions(model)  # a named model's size, None for a directory
            if packaged:
                dimensions = dimensions or packaged
                if dimensions != packaged:
                    raise InvalidArgument(f"the local model {model} has {packaged} dimensions", reason=Reason.INVALID_EMBEDDER)
        else:
            dimensions = dimensions or default_dimensions
        if not 1 <= dimensions <= MAX_HNSW_DIMENSIONS:
            raise InvalidArgument(f"{field}.dimensions must be between 1 and {MAX_HNSW_DIMENSIONS}",
                                  reason=Reason.INVALID_EMBEDDER)
        return model, dimensions

    async def reindex_collection(self, tenant_id: int, name: str, provider: str, model: str, dimensions: int,
                                 eval_queries: list[EvalQueryIn] | None = None, min_ratio: float = 0.0):
        if not name:
            raise InvalidArgument("collection name is required", reason=Reason.MISSING_COLLECTION)
        model, dimensions = self._embedder(provider, model, dimensions, "embedder")
        eval_set, ratio = eval_set_of(eval_queries or [], min_ratio)
        row = await self.store.reindex_collection(tenant_id, name, provider, model, dimensions, eval_set, ratio)
        log.info("reindex started", extra={"collection": name, "provider": provider, "model": model,
                                           "eval_queries": len(eval_set or ()), "min_ratio": ratio if eval_set else None})
        return row

    async def cancel_reindex(self, tenant_id: int, name: str):
        if not name:
            raise InvalidArgument("collection name is required", reason=Reason.MISSING_COLLECTION)
        return await self.store.cancel_reindex(tenant_id, name)

    async def sweep_generations(self) -> tuple[int, int]:
        swept = await self.store.sweep_generations(self.settings.retired_generation_grace_seconds)
        await self.store.compact_keyword_stats()
        return swept

    async def get_collection(self, tenant_id: int, name: str) -> dict[str, Any]:
        if not name:
            raise InvalidArgument("collection name is required", reason=Reason.MISSING_COLLECTION)
        return await self.store.get_collection(tenant_id, name)

    async def list_collections(self, tenant_id: int, page_size: int, page_token: str) -> tuple[list[dict[str, Any]], str]:
        limit = page_size_of(page_size)
        token = decode_token(page_token, "collections")
        rows = await self.store.list_collections(tenant_id, token["n"] if token else None, limit + 1)
        next_token = encode_token({"f": "collections", "n": rows[limit - 1].name}) if len(rows) > limit else ""
        return rows[:limit], next_token

    async def delete_collection(self, tenant_id: int, name: str, force: bool) -> int:
        if not name:
            raise InvalidArgument("collection name is required", reason=Reason.MISSING_COLLECTION)
        return await self.store.delete_collection(tenant_id, name, force)

    # ------------------------------------------------------------ documents

    async def upload_document(
        self, tenant_id: int, meta: UploadMeta, data: AsyncIterator[bytes | uploads.Trailer]
    ) -> tuple[dict[str, Any], bool]:
        """Spool and check the stream (uploads.receive); only a confirmed, matching upload is stored."""
        if not meta.collection:
            raise InvalidArgument("the first message must carry metadata with a collection", reason=Reason.MISSING_COLLECTION)
        uploads.check_no_nul(meta.collection, meta.filename, meta.mime_type, meta.request_id, meta.metadata)
        filename = safe_filename(meta.filename)
        if not filename:
            raise InvalidArgument("filename is required and must contain a visible name", reason=Reason.INVALID_FILENAME)
        try:
            document_metadata = typed_metadata.merge_upload(meta.metadata, meta.typed_metadata)
        except typed_metadata.MetadataError as err:
            raise InvalidArgument(str(err), reason=Reason.INVALID_METADATA) from None
        if len(meta.request_id) > 128:
            raise InvalidArgument("request_id is longer than 128 characters", reason=Reason.INVALID_REQUEST_ID)
        await self.store.collection_settings(tenant_id, meta.collection)  # fail fast, before the bytes arrive

        s = self.settings
        content = await uploads.receive(
            data, uploads.Expected(meta.expected_size_bytes, meta.expected_sha256), max_bytes=s.max_upload_bytes,
            spool_memory_bytes=s.upload_spool_memory_bytes, spool_dir=s.upload_spool_dir or None,
        )
        try:
            mime_type = detect_mime_type(filename, meta.mime_type, content.head[:8])
            document, created = await self.store.create_document(
                NewDocument(tenant_id, meta.collection, filename, mime_type, document_metadata, meta.request_id or None,
                            content, content.sha256)
            )
        finally:
            content.close()
        if created:
            metrics.UPLOADS.inc()
            log.info("document uploaded", extra={"document_id": str(document.id), "bytes": content.size})
        return document, created

    async def get_document(self, tenant_id: int, document_id: str):
        return await self.store.get_document_with_history(tenant_id, parse_id(document_id))

    async def list_documents(self, tenant_id: int, collection: str, status: D | None, page_size: int, page_token: str):
        limit = page_size_of(page_size)
        filters = f"{collection}|{status or ''}"
        token = decode_token(page_token, filters)
        after = None
        if token:
            try:
                after = (dt.datetime.fromisoformat(token["t"]), uuid.UUID(token["i"]))
            except (KeyError, ValueError, TypeError):
                raise InvalidArgument("page_token is not valid", reason=Reason.INVALID_PAGE_TOKEN) from None
        rows = await self.store.list_documents(tenant_id, collection or None, str(status) if status else None, after, limit + 1)
        next_token = ""
        if len(rows) > limit:
            last = rows[limit - 1]
            next_token = encode_token({"f": filters, "t": last.created_at.isoformat(), "i": str(last.id)})
        return rows[:limit], next_token

    async def delete_document(self, tenant_id: int, document_id: str) -> bool:
        doc_id = parse_id(document_id)
        cancelled = await self.store.delete_document(tenant_id, doc_id)
        log.info("document deleted", extra={"document_id": str(doc_id), "cancelled_running_job": cancelled})
        return cancelled

    async def retry_document(self, tenant_id: int, document_id: str):
        return await self.store.restart_document(tenant_id, parse_id(document_id), D.FAILED)

    async def reprocess_document(self, tenant_id: int, document_id: str):
        return await self.store.restart_document(tenant_id, parse_id(document_id), D.READY)

    async def watch_document(self, tenant_id: int, document_id: str) -> AsyncIterator[dict[str, Any]]:
        """The document now, then its state after each committed change, until READY or FAILED."""
        doc_id = parse_id(document_id)
        async with self.hub.watch_document(str(doc_id)) as signal:
            changed = signal.current()
            last_event = await self.store.latest_event_id(doc_id)
            document = await self.store.get_document(tenant_id, doc_id)
            yield document
            status = document.status
            # The first re-check comes soon: a transaction that was committing while this watch
            # registered may not have notified it (notify.py). Later ones are a safety net only.
            recheck = FIRST_RECHECK_SECONDS
            while status not in TERMINAL:
                try:
                    await asyncio.wait_for(changed.wait(), timeout=recheck)
                except TimeoutError:
                    pass
                recheck = RECHECK_SECONDS
                changed = signal.current()
                events = await self.store.document_events_after(doc_id, last_event)
                if not events:
                    await self.store.get_document(tenant_id, doc_id)  # raises NOT_FOUND once deleted
                    continue
                base = await self.store.get_document(tenant_id, doc_id)
                for event in events:
                    last_event = event.id
                    merged = event.applied_to(base)
                    yield merged
                    status = merged.status
                    if status in TERMINAL:
                        break

    async def watch_collection(
        self, tenant_id: int, collection: str, after_cursor: str, start_from_oldest: bool,
        statuses: list[D], terminal_only: bool,
    ) -> AsyncIterator[CollectionEventRow | Heartbeat]:
        """Every event of the collection after the cursor, in log order, for as long as the caller
        listens; a Heartbeat when the first read or a quiet spell has nothing to send.

        The cursor moves past every row read, sent or filtered out, and Heartbeats carry it, so a
        narrow filter never reads the same rows twice in one stream. Exactly once across
        reconnects holds because the log is read only below every running writer (store/events.py)
        and a cursor older than what retention pruned is refused rather than silently short."""
        if not collection:
            raise InvalidArgument("collection is required", reason=Reason.MISSING_COLLECTION)
        if after_cursor and start_from_oldest:
            raise InvalidArgument("give after_cursor or start_from_oldest, not both", reason=Reason.INVALID_WATCH_START)
        start = EventCursor.parse(after_cursor) if after_cursor else None
        status_names = sorted({str(status) for status in statuses}) or None
        collection_id = await self.store.collection_id(tenant_id, collection)
        head = await self.store.events_head()
        if start is not None and start > head:
            # Every cursor handed out is at or below the head: this one was made up (or belongs to
            # another database), and following it would skip every event until the log reached it.
            raise InvalidArgument(f"cursor {after_cursor!r} is ahead of the events log: not a cursor this server returned",
                                  reason=Reason.INVALID_CURSOR)
        cursor = start or (EventCursor(0, 0) if start_from_oldest else head)
        # A replay starts below the horizon on purpose (it asks for what is retained); it is cut
        # short only if pruning moves on while it reads.
        replay_floor: EventCursor | None = None
        loop = asyncio.get_running_loop()
        s = self.settings
        first = True
        async with self.hub.watch_collection(collection_id) as signal:
            with metrics.COLLECTION_WATCHERS.track_inprogress():
                last_sent = loop.time()
                while True:
                    if self.hub.stopping.is_set():
                        raise Unavailable("the server is shutting down; reconnect with the last cursor",
                                          reason=Reason.SERVER_SHUTTING_DOWN, cursor=cursor.encode())
                    woken = signal.current()
                    page = await self.store.watch_page(tenant_id, collection_id, cursor, WATCH_WINDOW, status_names, terminal_only)
                    if not page.exists:
                        raise NotFound(f"collection {collection!r} was deleted", reason=Reason.COLLECTION_NOT_FOUND,
                                       collection=collection)
                    if page.horizon is not None and cursor < page.horizon:
                        if start_from_oldest and replay_floor in (None, page.horizon):
                            replay_floor = page.horizon
                        else:
                            oldest = page.horizon.encode()
                            raise OutOfRange(
                                f"cursor {cursor.encode()} is older than the retained events of collection {collection!r};"
                                f" the oldest cursor to resume from is {oldest} (or start from now)",
                                reason=Reason.EVENTS_CURSOR_EXPIRED, oldest_cursor=oldest, collection=collection,
                            )
                    for row in page.events:
                        yield row
                    metrics.COLLECTION_EVENTS_SENT.inc(len(page.events))
                    if page.read_to is not None:
                        cursor = page.read_to
                    if page.events:
                        last_sent = loop.time()
                    elif first:
                        yield Heartbeat(cursor)  # the stream is open: here is where it starts
                        last_sent = loop.time()
                    first = False
                    if page.full:
                        continue
                    quiet_until = last_sent + s.watch_heartbeat_seconds
                    timeout = max(quiet_until - loop.time(), 0.0)
                    if page.waiting:
                        timeout = min(timeout, s.watch_recheck_seconds)
                    stop = asyncio.ensure_future(self.hub.stopping.wait())
                    wake = asyncio.ensure_future(woken.wait())
                    try:
                        await asyncio.wait((stop, wake), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        stop.cancel()
                        wake.cancel()
                    if loop.time() >= quiet_until:
                        yield Heartbeat(cursor)
                        last_sent = loop.time()

    # ------------------------------------------------------------ jobs

    async def claim_job(self, worker_id: str, wait_seconds: float) -> dict[str, Any] | None:
        if not worker_id or len(worker_id) > 200:
            raise InvalidArgument("worker_id is required (at most 200 characters)", reason=Reason.INVALID_WORKER_ID)
        if not 0 <= wait_seconds <= self.settings.max_claim_wait_seconds:
            raise InvalidArgument(f"wait_seconds must be between 0 and {self.settings.max_claim_wait_seconds}",
                                  reason=Reason.INVALID_WAIT)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            woken = self.hub.jobs_available.current()
            job = await self.store.claim_job(worker_id)
            if job is not None:
                metrics.CLAIMS.inc()
                log.info("job claimed", extra={"job_id": str(job.job_id), "document_id": str(job.document_id),
                                                "attempt": job.attempts, "worker_id": worker_id})
                return job
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            until_due = await self.store.next_wakeup()
            timeout = remaining
            if until_due is not None:
                timeout = min(timeout, max(until_due.total_seconds(), 0.0) + 0.01)
            try:
                await asyncio.wait_for(woken.wait(), timeout=timeout)
            except TimeoutError:
                pass

    async def renew_lease(self, job_id: str, lease_token: str):
        return await self.store.renew_lease(parse_id(job_id, "job"), parse_id(lease_token, "lease token"))

    async def report_stage(self, job_id: str, lease_token: str, stage: D, done: int, total: int, unit: str):
        if stage not in IN_PROGRESS:
            raise InvalidArgument("stage must be PARSING, CHUNKING, EMBEDDING or INDEXING", reason=Reason.INVALID_STAGE)
        if done < 0 or total < 0 or (total and done > total):
            raise InvalidArgument("progress must satisfy 0 <= done <= total (total 0 when unknown)", reason=Reason.INVALID_PROGRESS)
        return await self.store.report_stage(parse_id(job_id, "job"), parse_id(lease_token, "lease token"), stage,
                                             done, total, unit[:32])

    async def read_content(self, job_id: str, lease_token: str) -> AsyncIterator[bytes]:
        document_id, length = await self.store.content_length(parse_id(job_id, "job"), parse_id(lease_token, "lease token"))
        for offset in range(0, length, CONTENT_SLICE):
            yield await self.store.content_slice(document_id, offset, CONTENT_SLICE)

    async def save_snapshot(self, job_id: str, lease_token: str, pipeline_version: str, chunks: list[IncomingChunk]):
        if not pipeline_version or len(pipeline_version) > 200:
            raise InvalidArgument("pipeline_version is required (at most 200 characters)", reason=Reason.INVALID_PIPELINE_VERSION)
        self._check_indexes(chunks)
        await self.store.save_snapshot(
            parse_id(job_id, "job"), parse_id(lease_token, "lease token"), pipeline_version,
            [{k: v for k, v in c.__dict__.items() if k != "embedding"} for c in chunks],
        )

    async def read_snapshot(self, job_id: str, lease_token: str, pipeline_version: str) -> list[IncomingChunk]:
        if not pipeline_version:
            raise InvalidArgument("pipeline_version is required", reason=Reason.INVALID_PIPELINE_VERSION)
        rows = await self.store.read_snapshot(parse_id(job_id, "job"), parse_id(lease_token, "lease token"), pipeline_version)
        return [IncomingChunk(**row) for row in rows]

    async def complete_job(self, job_id: str, lease_token: str, expected: int, chunks: list[IncomingChunk]):
        job_uuid, token = parse_id(job_id, "job"), parse_id(lease_token, "lease token")
        if expected != len(chunks):
            raise InvalidArgument(f"the header announced {expected} chunks but {len(chunks)} arrived",
                                  reason=Reason.CHUNK_COUNT_MISMATCH)
        self._check_indexes(chunks)
        dimensions = await self.store.collection_dimensions(job_uuid)
        rows = await asyncio.to_thread(self._prepare_chunks, chunks, dimensions)
        document = await self.store.complete_job(job_uuid, token, rows)
        metrics.COMPLETIONS.inc()
        log.info("document ready", extra={"document_id": str(document.id), "job_id": job_id, "chunks": len(rows)})
        return document

    @staticmethod
    def _check_indexes(chunks: list[IncomingChunk]) -> None:
        if sorted(c.index for c in chunks) != list(range(len(chunks))):
            raise InvalidArgument("chunk indexes must be 0..n-1, each once", reason=Reason.INVALID_CHUNK_INDEX)
        for chunk in chunks:
            if not chunk.text.strip():
                raise InvalidArgument(f"chunk {chunk.index} has no text", reason=Reason.EMPTY_CHUNK)
            if chunk.page_number < 0:
                raise InvalidArgument(f"chunk {chunk.index} has a negative page number", reason=Reason.INVALID_CHUNK)

    @staticmethod
    def _prepare_chunks(chunks: list[IncomingChunk], dimensions: int) -> list[ChunkRow]:
        from sluice_common.textsearch import search_terms

        rows = []
        for chunk in sorted(chunks, key=lambda c: c.index):
            vector = np.asarray(chunk.embedding, dtype=np.float32)
            if vector.shape != (dimensions,):
                raise InvalidArgument(
                    f"chunk {chunk.index} has a vector of {vector.size} dimensions; the collection uses {dimensions}",
                    reason=Reason.DIMENSION_MISMATCH,
                )
            if not np.isfinite(vector).all():
                raise InvalidArgument(f"chunk {chunk.index} has a vector with NaN or infinity", reason=Reason.INVALID_VECTOR)
            rows.append(ChunkRow(chunk.index, chunk.text.replace("\x00", ""), chunk.page_number, chunk.element_type,
                                 chunk.section_title, chunk.text_as_html, vector, search_terms(chunk.text),
                                 chunk.text_source, chunk.ocr_confidence, chunk.boxes))
        return rows

    async def fail_job(self, job_id: str, lease_token: str, retryable: bool, error_code: str, error_message: str):
        code = error_code or WorkerErrorCode.WORKER_INTERNAL_ERROR
        if not ERROR_CODE.match(code):
            raise InvalidArgument("error_code must be UPPER_SNAKE_CASE, at most 64 characters", reason=Reason.INVALID_ERROR_CODE)
        if not is_registered(code):
            # Its owner reads this code as the cause: only the registry's codes are believable.
            raise InvalidArgument(f"error_code {code} is not a registered worker error code", reason=Reason.UNKNOWN_ERROR_CODE)
        document, will_retry = await self.store.fail_job(
            parse_id(job_id, "job"), parse_id(lease_token, "lease token"), retryable, code, safe_error_message(error_message)
        )
        (metrics.RETRIES if will_retry else metrics.FAILURES).inc()
        log.info("job failed", extra={"job_id": job_id, "document_id": str(document.id), "retryable": retryable,
                                      "will_retry": will_retry, "error_code": code})
        return document, will_retry

    async def release_job(self, job_id: str, lease_token: str):
        return await self.store.release_job(parse_id(job_id, "job"), parse_id(lease_token, "lease token"))


__all__ = ["CollectionSpec", "Heartbeat", "IncomingChunk", "IngestService", "UploadMeta"]
