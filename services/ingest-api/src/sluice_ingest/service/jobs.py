"""Use cases of JobService (the workers' calls): the claim's long-poll, stage reports, content
and snapshots, the commit and the failure, each checked and then one store call under the lease."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sluice_common.errors import InvalidArgument
from sluice_common.reasons import Reason
from sluice_common.worker_errors import WorkerErrorCode, client_message, is_registered

from .. import metrics
from ..arguments import parse_id
from ..domain import IN_PROGRESS, DocumentStatus, safe_error_message
from ..notify import NotificationHub
from ..ports import QueuePort
from ..settings import IngestSettings
from ..store import ChunkRow, ClaimedJob, DocumentRow

log = logging.getLogger("sluice.ingest")

ERROR_CODE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
CONTENT_SLICE = 1024 * 1024


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
    # The types of the chunk's elements, in order of first appearance (Chunk.element_types).
    element_types: list[str] = field(default_factory=list)


class JobUseCases:
    def __init__(self, queue: QueuePort, hub: NotificationHub, settings: IngestSettings) -> None:
        self.queue = queue
        self.hub = hub
        self.settings = settings

    async def claim_job(self, worker_id: str, wait_seconds: float) -> ClaimedJob | None:
        if not worker_id or len(worker_id) > 200:
            raise InvalidArgument("worker_id is required (at most 200 characters)", reason=Reason.INVALID_WORKER_ID)
        if not 0 <= wait_seconds <= self.settings.max_claim_wait_seconds:
            raise InvalidArgument(
                f"wait_seconds must be between 0 and {self.settings.max_claim_wait_seconds}", reason=Reason.INVALID_WAIT
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            woken = self.hub.jobs_available.current()
            job = await self.queue.claim_job(worker_id)
            if job is not None:
                metrics.CLAIMS.inc()
                log.info(
                    "job claimed",
                    extra={
                        "job_id": str(job.job_id),
                        "document_id": str(job.document_id),
                        "attempt": job.attempts,
                        "worker_id": worker_id,
                    },
                )
                return job
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            until_due = await self.queue.next_wakeup()
            timeout = remaining
            if until_due is not None:
                timeout = min(timeout, max(until_due.total_seconds(), 0.0) + 0.01)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), timeout=timeout)

    async def renew_lease(self, job_id: str, lease_token: str) -> dt.datetime | None:
        return await self.queue.renew_lease(parse_id(job_id, "job"), parse_id(lease_token, "lease token"))

    async def report_stage(
        self, job_id: str, lease_token: str, stage: DocumentStatus, done: int, total: int, unit: str
    ) -> dt.datetime:
        if stage not in IN_PROGRESS:
            raise InvalidArgument("stage must be PARSING, CHUNKING, EMBEDDING or INDEXING", reason=Reason.INVALID_STAGE)
        if done < 0 or total < 0 or (total and done > total):
            raise InvalidArgument(
                "progress must satisfy 0 <= done <= total (total 0 when unknown)", reason=Reason.INVALID_PROGRESS
            )
        return await self.queue.report_stage(
            parse_id(job_id, "job"), parse_id(lease_token, "lease token"), stage, done, total, unit[:32]
        )

    async def read_content(self, job_id: str, lease_token: str) -> AsyncIterator[bytes]:
        document_id, length = await self.queue.content_length(parse_id(job_id, "job"), parse_id(lease_token, "lease token"))
        for offset in range(0, length, CONTENT_SLICE):
            yield await self.queue.content_slice(document_id, offset, CONTENT_SLICE)

    async def save_snapshot(self, job_id: str, lease_token: str, pipeline_version: str, chunks: list[IncomingChunk]) -> None:
        if not pipeline_version or len(pipeline_version) > 200:
            raise InvalidArgument("pipeline_version is required (at most 200 characters)", reason=Reason.INVALID_PIPELINE_VERSION)
        self._check_indexes(chunks)
        await self.queue.save_snapshot(
            parse_id(job_id, "job"),
            parse_id(lease_token, "lease token"),
            pipeline_version,
            [{k: v for k, v in c.__dict__.items() if k != "embedding"} for c in chunks],
        )

    async def read_snapshot(self, job_id: str, lease_token: str, pipeline_version: str) -> list[IncomingChunk]:
        if not pipeline_version:
            raise InvalidArgument("pipeline_version is required", reason=Reason.INVALID_PIPELINE_VERSION)
        rows = await self.queue.read_snapshot(parse_id(job_id, "job"), parse_id(lease_token, "lease token"), pipeline_version)
        return [IncomingChunk(**row) for row in rows]

    async def complete_job(self, job_id: str, lease_token: str, expected: int, chunks: list[IncomingChunk]) -> DocumentRow:
        job_uuid, token = parse_id(job_id, "job"), parse_id(lease_token, "lease token")
        if expected != len(chunks):
            raise InvalidArgument(
                f"the header announced {expected} chunks but {len(chunks)} arrived", reason=Reason.CHUNK_COUNT_MISMATCH
            )
        self._check_indexes(chunks)
        dimensions = await self.queue.collection_dimensions(job_uuid)
        rows = await asyncio.to_thread(self._prepare_chunks, chunks, dimensions)
        document = await self.queue.complete_job(job_uuid, token, rows)
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
            rows.append(
                ChunkRow(
                    chunk.index,
                    chunk.text.replace("\x00", ""),
                    chunk.page_number,
                    chunk.element_type,
                    chunk.section_title,
                    chunk.text_as_html,
                    vector,
                    search_terms(chunk.text),
                    chunk.text_source,
                    chunk.ocr_confidence,
                    chunk.boxes,
                    chunk.element_types,
                )
            )
        return rows

    async def fail_job(
        self, job_id: str, lease_token: str, retryable: bool, error_code: str, error_message: str
    ) -> tuple[DocumentRow, bool]:
        code = error_code or WorkerErrorCode.WORKER_INTERNAL_ERROR
        if not ERROR_CODE.match(code):
            raise InvalidArgument("error_code must be UPPER_SNAKE_CASE, at most 64 characters", reason=Reason.INVALID_ERROR_CODE)
        if not is_registered(code):
            # Its owner reads this code as the cause: only the registry's codes are believable.
            raise InvalidArgument(f"error_code {code} is not a registered worker error code", reason=Reason.UNKNOWN_ERROR_CODE)
        # The owner reads this message: cleaned here too, whatever the worker did (no path, traceback,
        # object address, SQL or secret; docs/operations.md, "What a client is told").
        message = safe_error_message(client_message(error_message))
        document, will_retry = await self.queue.fail_job(
            parse_id(job_id, "job"), parse_id(lease_token, "lease token"), retryable, code, message
        )
        (metrics.RETRIES if will_retry else metrics.FAILURES).inc()
        log.info(
            "job failed",
            extra={
                "job_id": job_id,
                "document_id": str(document.id),
                "retryable": retryable,
                "will_retry": will_retry,
                "error_code": code,
            },
        )
        return document, will_retry

    async def release_job(self, job_id: str, lease_token: str) -> DocumentRow:
        return await self.queue.release_job(parse_id(job_id, "job"), parse_id(lease_token, "lease token"))


__all__ = ["IncomingChunk", "JobUseCases"]
