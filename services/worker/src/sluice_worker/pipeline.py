"""One job, start to end: parse → chunk (→ snapshot) → embed → index, status before action.

The service layer of the worker. It talks to ingest-api only through the `JobPort` protocol
(implemented over gRPC by `jobs_client.JobClient`, by a fake in unit tests), parses through
the `ParserPort` (the sandbox pool) and embeds through `sluice_common.embedders`.

Outcomes:
* success: CompleteJob committed the chunks and the document is READY;

An EMBED job (a reindex, docs/architecture.md#index-generations) runs the very same steps with the job's embedder (the new
generation's): its snapshot is read (or the document parsed again when there is none), embedded
and completed; ingest-api records its stage reports on the job and keeps the document READY.
* `JobFailure` (`DocumentInvalid` permanent, `TransientFailure` retryable) or an
  `EmbeddingError`: reported once through FailJob;
* `JobLeaseLost` or cancellation: nothing more is written (docs/architecture.md#fencing).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from importlib.metadata import version
from typing import Protocol, TypeAlias

from opentelemetry import trace
from opentelemetry.util.types import AttributeValue
from sluice.v1 import collection_pb2, job_service_pb2
from sluice_common import tracing
from sluice_common.embedders import Embedder, EmbeddingError, get_embedder, provider_name
from sluice_common.worker_errors import client_message

from sluice_worker import metrics
from sluice_worker.domain import (
    DOCUMENT_TOO_LARGE,
    INTERNAL,
    ChunkingSettings,
    ChunkRecord,
    ConfigurationInvalid,
    DocumentInvalid,
    IngestUnavailable,
    JobFailure,
    JobLeaseLost,
    ParseSummary,
    Stage,
    TransientFailure,
    pipeline_version,
    storable_chunks,
)
from sluice_worker.settings import WorkerSettings

log = logging.getLogger("sluice.worker.pipeline")

UNSTRUCTURED_VERSION = version("unstructured")


Lease: TypeAlias = job_service_pb2.LeaseRef
Job: TypeAlias = job_service_pb2.Job
# The parser's progress: (done, total, unit), e.g. (3, 12, "pages").
ProgressCallback = Callable[[int, int, str], Awaitable[None]]


class JobPort(Protocol):
    async def report_stage(self, lease: Lease, stage: Stage, done: int = 0, total: int = 0, unit: str = "") -> None: ...
    async def read_document_content(self, lease: Lease) -> bytes: ...
    async def read_snapshot(self, lease: Lease, pipeline_version: str) -> list[ChunkRecord] | None: ...
    async def save_snapshot(self, lease: Lease, pipeline_version: str, chunks: list[ChunkRecord], batch_size: int) -> int: ...
    async def complete_job(self, lease: Lease, chunks: list[ChunkRecord], batch_size: int) -> object: ...
    async def fail_job(self, lease: Lease, *, retryable: bool, error_code: str, error_message: str) -> bool: ...


class ParseSession(Protocol):
    async def parse(
        self, data: bytes, filename: str, mime_type: str, limits: dict[str, int], *, timeout: float, progress: ProgressCallback
    ) -> ParseSummary: ...
    async def chunk(self, settings: ChunkingSettings, max_chunks: int, *, timeout: float) -> list[ChunkRecord]: ...


class ParserPort(Protocol):
    def session(self) -> AbstractAsyncContextManager[ParseSession]: ...


@dataclass
class JobResult:
    outcome: str  # "running" until it is "succeeded", "failed", "abandoned" (or "released")
    chunk_count: int = 0
    snapshot_reused: bool = False
    error_code: str = ""


class ProgressReporter:
    """ReportStage with progress, at most every `interval` seconds. No report is forced at the
    end: the next stage's report follows at once and says the stage is over (a small document
    makes two ReportStage calls fewer)."""

    def __init__(self, port: JobPort, lease: Lease, stage: Stage, total: int, unit: str, interval: float) -> None:
        self.port, self.lease, self.stage, self.total, self.unit, self.interval = port, lease, stage, total, unit, interval
        self._last = time.monotonic()

    async def start(self) -> None:
        # Status before action (rule 2, docs/architecture.md#the-rules): written before the stage's work begins.
        await self.port.report_stage(self.lease, self.stage, 0, self.total, self.unit)
        self._last = time.monotonic()

    async def update(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self.total = total
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            await self.port.report_stage(self.lease, self.stage, done, self.total, self.unit)


class JobPipeline:
    def __init__(
        self,
        port: JobPort,
        parser: ParserPort,
        settings: WorkerSettings,
        embedder_for: Callable[[collection_pb2.EmbedderConfig], Embedder] | None = None,
    ) -> None:
        self.port = port
        self.parser = parser
        self.settings = settings
        self.embedder_for = embedder_for or self._default_embedder

    def _default_embedder(self, config: collection_pb2.EmbedderConfig) -> Embedder:
        return get_embedder(provider_name(config.provider), config.model, config.dimensions, self.settings)

    def chunking_of(self, job: Job) -> ChunkingSettings:
        return ChunkingSettings.effective(
            job.chunking.max_characters,
            job.chunking.new_after_n_chars,
            job.chunking.overlap,
            default_max=self.settings.default_chunk_max_characters,
            default_new_after=self.settings.default_chunk_new_after_n_chars,
        )

    async def run(self, job: Job) -> JobResult:
        """Process a claimed job. Never raises except CancelledError (the caller's decision).

        Traced as one span under the upload's trace (the context the job carries)."""
        attributes: dict[str, AttributeValue] = {
            "sluice.job_id": job.lease.job_id,
            "sluice.document_id": job.document_id,
            "sluice.attempt": job.attempt,
            # INGEST (1) or EMBED (2, a reindex): the same steps, ingest-api tells them apart.
            "sluice.job_kind": int(getattr(job, "kind", 0)),
            "sluice.generation": int(getattr(job, "generation", 0)),
        }
        with tracing.job_span("sluice.worker.job", dict(getattr(job, "trace_context", {}) or {}), attributes) as span:
            result = await self._run_job(job)
            span.set_attribute("sluice.outcome", result.outcome)
            return result

    async def _run_job(self, job: Job) -> JobResult:
        lease = job.lease
        state = JobResult("running")
        try:
            return await self._run(job, state)
        except JobLeaseLost as exc:
            log.info("lease lost, abandoning the job", extra={"detail": str(exc)})
            metrics.JOBS_ABANDONED.labels(reason="lease_lost").inc()
            state.outcome = "abandoned"
            return state
        except (JobFailure, EmbeddingError) as exc:
            return await self._fail(lease, exc.retryable, exc.code, exc.message, state)
        except Exception as exc:  # one job's bug must not stop the worker
            if isinstance(exc, IngestUnavailable):
                log.warning("ingest-api unreachable; the lease will expire and the job be retried", extra={"detail": str(exc)})
                metrics.JOBS_ABANDONED.labels(reason="ingest_unavailable").inc()
                state.outcome = "abandoned"
                return state
            ref = uuid.uuid4().hex[:12]
            log.exception("job failed with an unexpected error", extra={"error_ref": ref})
            return await self._fail(lease, True, INTERNAL, f"internal error in the worker (reference {ref})", state)

    async def _fail(self, lease: Lease, retryable: bool, code: str, message: str, state: JobResult) -> JobResult:
        metrics.JOBS_FAILED.labels(error_code=code, retryable=str(retryable).lower()).inc()
        # The log keeps the whole message for the operator; the document's owner gets it without
        # server internals (paths, tracebacks, object addresses, SQL, secrets): every failure
        # passes here, so this is the one place that cleans it.
        log.info("job failed", extra={"error_code": code, "retryable": retryable, "error_message": message})
        state.error_code = code
        try:
            await self.port.fail_job(lease, retryable=retryable, error_code=code, error_message=client_message(message))
            state.outcome = "failed"
        except JobLeaseLost:
            state.outcome = "abandoned"
        except Exception:  # the lease will expire and the job be retried
            log.warning("could not report the failure", exc_info=True)
            state.outcome = "abandoned"
        return state

    async def _run(self, job: Job, state: JobResult) -> JobResult:
        lease = job.lease
        chunking = self.chunking_of(job)
        version = pipeline_version(chunking, UNSTRUCTURED_VERSION)

        # The claim lists the snapshots saved for this content: most first attempts have none.
        snapshot = await self.port.read_snapshot(lease, version) if version in job.snapshot_versions else None
        reused = state.snapshot_reused = snapshot is not None
        if snapshot is not None:
            # A retry after EMBEDDING or INDEXING failed: no second parse (docs/architecture.md#the-pipeline-inside-a-worker).
            metrics.SNAPSHOTS_REUSED.inc()
            log.info("resuming from the chunk snapshot", extra={"chunks": len(snapshot), "pipeline_version": version})
            chunks = snapshot
        else:
            chunks = await self._parse_and_chunk(job, chunking, version)

        with tracing.span("sluice.stage.embedding", chunks=len(chunks)):
            vectors = await self._embed(job, chunks)
        for chunk, vector in zip(chunks, vectors, strict=True):
            chunk.embedding = vector

        started = time.monotonic()
        with tracing.span("sluice.stage.indexing", chunks=len(chunks)):
            await self.port.report_stage(lease, Stage.INDEXING, 0, len(chunks), "chunks")
            await self.port.complete_job(lease, chunks, self.settings.chunk_batch_size)
        metrics.STAGE_SECONDS.labels(stage=Stage.INDEXING.name).observe(time.monotonic() - started)
        metrics.JOBS_SUCCEEDED.inc()
        metrics.CHUNKS_PER_DOCUMENT.observe(len(chunks))
        log.info("document ready", extra={"chunks": len(chunks), "snapshot_reused": reused})
        state.outcome, state.chunk_count = "succeeded", len(chunks)
        return state

    async def _parse_and_chunk(self, job: Job, chunking: ChunkingSettings, version: str) -> list[ChunkRecord]:
        # Two stage spans around one parser session: each is current while its stage runs, so
        # the calls back to ingest-api (ReportStage, ReadDocumentContent, SaveSnapshot) nest in it.
        parse_span = tracing.tracer().start_span("sluice.stage.parsing", attributes={"size_bytes": job.size_bytes})
        chunk_span = None
        try:
            with trace.use_span(parse_span):
                data, parsing, started = await self._read_for_parsing(job)
            async with self.parser.session() as session:
                with trace.use_span(parse_span, end_on_exit=True):
                    summary = await self._parse(job, session, data, parsing, started)
                del data
                chunk_span = tracing.tracer().start_span("sluice.stage.chunking", attributes={"elements": summary.elements})
                with trace.use_span(chunk_span):
                    started = time.monotonic()
                    await self.port.report_stage(job.lease, Stage.CHUNKING, 0, summary.elements, "elements")
                    chunks = await session.chunk(chunking, self.settings.max_chunks, timeout=self.settings.parse_timeout_seconds)
            with trace.use_span(chunk_span, end_on_exit=True):
                # PostgreSQL cannot store NUL or lone surrogates: cleaned here, or every attempt would
                # fail at SaveSnapshot for the same reason.
                chunks = storable_chunks(chunks)
                if not chunks:
                    raise DocumentInvalid("DOCUMENT_EMPTY", "the document contains no text")
                # The snapshot is part of CHUNKING: it is saved before the stage is left.
                await self.port.save_snapshot(job.lease, version, chunks, self.settings.chunk_batch_size)
                chunk_span.set_attribute("chunks", len(chunks))
        finally:
            for stage_span in (parse_span, chunk_span):
                if stage_span is not None and stage_span.is_recording():
                    stage_span.end()
        metrics.STAGE_SECONDS.labels(stage=Stage.CHUNKING.name).observe(time.monotonic() - started)
        return chunks

    async def _read_for_parsing(self, job: Job) -> tuple[bytes, ProgressReporter, float]:
        settings = self.settings
        parsing = ProgressReporter(self.port, job.lease, Stage.PARSING, 0, "pages", settings.progress_interval_seconds)
        await parsing.start()
        started = time.monotonic()
        if job.size_bytes > settings.max_document_bytes:
            raise DocumentInvalid(
                DOCUMENT_TOO_LARGE,
                f"the file is {job.size_bytes // (1024 * 1024)} MB, "
                f"more than the {settings.max_document_bytes // (1024 * 1024)} MB allowed",
            )
        # A small document came whole with its claim.
        data = job.content if len(job.content) == job.size_bytes else await self.port.read_document_content(job.lease)
        if not data:
            raise DocumentInvalid("DOCUMENT_EMPTY", "the file is empty")
        return data, parsing, started

    async def _parse(
        self, job: Job, session: ParseSession, data: bytes, parsing: ProgressReporter, started: float
    ) -> ParseSummary:
        settings = self.settings
        limits = {
            "max_pages": settings.max_pages,
            "max_unzipped_bytes": settings.max_unzipped_bytes,
            "max_page_pixels": settings.max_page_pixels,
        }

        async def on_progress(done: int, total: int, unit: str) -> None:
            parsing.unit = unit
            await parsing.update(done, total)

        summary = await session.parse(
            data, job.filename, job.mime_type, limits, timeout=settings.parse_timeout_seconds, progress=on_progress
        )
        metrics.STAGE_SECONDS.labels(stage=Stage.PARSING.name).observe(time.monotonic() - started)
        peak = getattr(session, "peak_resident_bytes", 0)
        log.info(
            "parsed",
            extra={
                "elements": summary.elements,
                "pages": summary.pages,
                "characters": summary.characters,
                "peak_resident_mb": peak // 2**20,
            },
        )
        return summary

    async def _embed(self, job: Job, chunks: list[ChunkRecord]) -> list[list[float]]:
        total = len(chunks)
        reporter = ProgressReporter(
            self.port, job.lease, Stage.EMBEDDING, total, "chunks", self.settings.progress_interval_seconds
        )
        await reporter.start()
        try:
            embedder = self.embedder_for(job.embedder)
        except ValueError as exc:
            raise ConfigurationInvalid("EMBEDDER_UNSUPPORTED", f"the collection's embedder cannot be used: {exc}") from exc
        started = time.monotonic()
        step = max(1, self.settings.embed_batch_size)

        async def call(texts: list[str]) -> list[list[float]]:
            call_started = time.monotonic()
            with tracing.span("sluice.embed_batch", texts=len(texts), provider=embedder.provider):
                batch = await embedder.embed_documents(texts)
            metrics.EMBED_BATCH_SECONDS.labels(provider=embedder.provider).observe(time.monotonic() - call_started)
            metrics.EMBED_BATCH_SIZE.labels(provider=embedder.provider).observe(len(texts))
            if len(batch) != len(texts):
                raise TransientFailure(
                    "EMBEDDING_BAD_RESPONSE", f"the embedder returned {len(batch)} vectors for {len(texts)} texts"
                )
            return batch

        # A remote embedder takes several calls at once (its provider's shared limit bounds the
        # requests): enough calls to fill that limit, results taken in order. Local ones: one.
        window, concurrency = 1, getattr(embedder, "max_concurrency", 1)
        if concurrency > 1:
            requests_per_call = -(-step // max(1, embedder.batch_size))
            window = max(1, -(-concurrency // requests_per_call))
        vectors: list[list[float]] = []
        pending: deque[asyncio.Future[list[list[float]]]] = deque()
        try:
            for offset in range(0, total, step):
                pending.append(asyncio.ensure_future(call([chunk.text for chunk in chunks[offset : offset + step]])))
                while pending and (len(pending) >= window or offset + step >= total):
                    vectors.extend(await pending.popleft())
                    await reporter.update(len(vectors))
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        metrics.STAGE_SECONDS.labels(stage=Stage.EMBEDDING.name).observe(time.monotonic() - started)
        return vectors
