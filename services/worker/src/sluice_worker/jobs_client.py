"""The gRPC adapter for ingest-api's JobService: the worker's only way to the data.

Every call is translated into the worker's terms: a refused lease (FAILED_PRECONDITION with
reason LEASE_NOT_HELD) or a vanished job (NOT_FOUND) becomes `JobLeaseLost`; ingest-api being
briefly unreachable is retried a few times and then becomes `IngestUnavailable`.

Any other answer to a call about the job's data (ReportStage, ReadDocumentContent,
ReadSnapshot, SaveSnapshot, CompleteJob) ends the attempt through FailJob, never by letting
the lease run out: INVALID_ARGUMENT and the like become `DataRefused` (permanent), an
internal error of ingest-api a `TransientFailure` (retried, bounded by max_attempts).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TypeVar

import grpc
from sluice.v1 import document_pb2, job_service_pb2, job_service_pb2_grpc
from sluice_common.channels import keyed_aio_channel
from sluice_common.errors import reason_of
from sluice_common.reasons import Reason
from sluice_common.tls import ClientTLS

from sluice_worker.domain import (
    INGEST_ERROR,
    INGEST_REJECTED,
    ChunkRecord,
    DataRefused,
    IngestUnavailable,
    JobFailure,
    JobLeaseLost,
    Stage,
    TransientFailure,
)

log = logging.getLogger("sluice.worker.jobs_client")

T = TypeVar("T")
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# Keep each streamed message well under the limit above.
_BATCH_BYTES = 4 * 1024 * 1024
_RETRYABLE_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
# NOT_FOUND reasons that mean the job itself is gone (its document deleted): fencing, not a
# problem with the data. Any other NOT_FOUND (CONTENT_NOT_FOUND) is the job's data missing.
_JOB_GONE_REASONS = {"", Reason.JOB_NOT_FOUND, Reason.DOCUMENT_NOT_FOUND}
# Answers that the same data would get again on every attempt: the job fails permanently.
_REFUSED_CODES = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.NOT_FOUND,
}
# What the job's data was, for the message its owner reads.
_WHAT = {
    "ReportStage": "the progress report",
    "ReadDocumentContent": "the request for the document's content",
    "ReadSnapshot": "the request for the chunk snapshot",
    "SaveSnapshot": "the document's chunks (snapshot)",
    "CompleteJob": "the document's chunks",
}


def chunk_to_proto(chunk: ChunkRecord) -> job_service_pb2.Chunk:
    return job_service_pb2.Chunk(
        index=chunk.index,
        text=chunk.text,
        page_number=chunk.page_number,
        element_type=chunk.element_type,
        element_types=chunk.element_types,
        section_title=chunk.section_title,
        embedding=chunk.embedding,
        text_as_html=chunk.text_as_html,
        text_source=chunk.text_source,
        ocr_confidence=chunk.ocr_confidence or 0.0,
        boxes=[
            document_pb2.BoundingBox(page_number=b["page"], left=b["left"], top=b["top"], right=b["right"], bottom=b["bottom"])
            for b in chunk.boxes
        ],
    )


def chunk_from_proto(chunk: job_service_pb2.Chunk) -> ChunkRecord:
    return ChunkRecord(
        index=chunk.index,
        text=chunk.text,
        page_number=chunk.page_number,
        element_type=chunk.element_type,
        element_types=list(chunk.element_types),
        section_title=chunk.section_title,
        text_as_html=chunk.text_as_html,
        text_source=chunk.text_source,
        ocr_confidence=chunk.ocr_confidence or None,
        boxes=[
            {
                "page": b.page_number,
                "left": round(b.left, 4),
                "top": round(b.top, 4),
                "right": round(b.right, 4),
                "bottom": round(b.bottom, 4),
            }
            for b in chunk.boxes
        ],
    )


def batches(chunks: Iterable[ChunkRecord], max_count: int) -> Iterable[list[job_service_pb2.Chunk]]:
    """Chunk protos in groups bounded by count and by size."""
    batch: list[job_service_pb2.Chunk] = []
    size = 0
    for chunk in chunks:
        message = chunk_to_proto(chunk)
        message_size = message.ByteSize()
        if batch and (len(batch) >= max_count or size + message_size > _BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(message)
        size += message_size
    if batch:
        yield batch


def job_failure_of(name: str, code: grpc.StatusCode, reason: str, details: str) -> JobFailure:
    """ingest-api's answer to a call about the job's data, as the failure FailJob reports.

    Refusals of the data are permanent. Everything else ingest-api answered (INTERNAL,
    UNKNOWN, DATA_LOSS, ABORTED, RESOURCE_EXHAUSTED after the quick retries, and the worker's
    own setup: PERMISSION_DENIED, UNAUTHENTICATED, UNIMPLEMENTED) is retried with backoff.
    """
    what = _WHAT.get(name, f"the {name} call")
    because = f"{details} ({reason or code.name})" if details else (reason or code.name)
    if code in _REFUSED_CODES:
        return DataRefused(INGEST_REJECTED, f"ingest-api refused {what}: {because}")
    return TransientFailure(INGEST_ERROR, f"ingest-api failed on {what}: {because}")


class JobClient:
    def __init__(
        self,
        address: str,
        *,
        api_key: str = "",
        tls: ClientTLS | None = None,
        rpc_timeout: float = 30.0,
        stream_timeout: float = 600.0,
        retries: int = 3,
    ) -> None:
        self.address = address
        self.rpc_timeout = rpc_timeout
        self.stream_timeout = stream_timeout
        self.retries = retries
        # The worker key is JobService's only credential (docs/architecture.md#tenancy-and-access).
        self._channel = keyed_aio_channel(
            address,
            api_key,
            tls=tls,
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.keepalive_time_ms", 30_000),
            ],
        )
        self._stub = job_service_pb2_grpc.JobServiceStub(self._channel)

    async def close(self) -> None:
        await self._channel.close()

    async def _call(
        self, name: str, attempt: Callable[[], Awaitable[T]], *, retry: bool = True, about_job_data: bool = True
    ) -> T:
        """`about_job_data`: the call carries or fetches the job's own data, so an answer other
        than "lease gone" or "unreachable" ends the attempt through FailJob (see module doc).
        RenewLease, FailJob and ReleaseJob pass False: they cannot end the attempt that way."""
        delay = 0.2
        for number in range(self.retries + 1):
            try:
                return await attempt()
            except grpc.aio.AioRpcError as err:
                code = err.code()
                reason = reason_of(err)
                if code == grpc.StatusCode.FAILED_PRECONDITION and reason == Reason.LEASE_NOT_HELD:
                    raise JobLeaseLost(f"{name}: lease not held") from err
                if code == grpc.StatusCode.NOT_FOUND and (reason in _JOB_GONE_REASONS or not about_job_data):
                    raise JobLeaseLost(f"{name}: job not found") from err
                if code == grpc.StatusCode.CANCELLED:
                    raise IngestUnavailable(f"{name}: call cancelled") from err
                if retry and code in _RETRYABLE_CODES and number < self.retries:
                    log.warning("JobService call failed, retrying", extra={"rpc": name, "code": code.name, "try": number + 1})
                    await asyncio.sleep(delay * (0.5 + random.random()))
                    delay *= 2
                    continue
                if about_job_data and code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise job_failure_of(name, code, reason, err.details() or "") from err
                raise IngestUnavailable(f"{name} failed: {code.name}: {err.details()}") from err
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ calls

    async def claim_job(self, worker_id: str, wait_seconds: float) -> job_service_pb2.Job | None:
        request = job_service_pb2.ClaimJobRequest(worker_id=worker_id, wait_seconds=wait_seconds)
        try:
            response = await self._stub.ClaimJob(request, timeout=wait_seconds + self.rpc_timeout)
        except grpc.aio.AioRpcError as err:
            raise IngestUnavailable(f"ClaimJob failed: {err.code().name}: {err.details()}") from err
        return response.job if response.HasField("job") else None

    async def renew_lease(self, lease: job_service_pb2.LeaseRef) -> bool:
        """Renew the lease; True when the job was cancelled."""
        request = job_service_pb2.RenewLeaseRequest(lease=lease)
        response = await self._call(
            "RenewLease", lambda: self._stub.RenewLease(request, timeout=self.rpc_timeout), retry=False, about_job_data=False
        )
        return bool(response.cancelled)

    async def report_stage(
        self, lease: job_service_pb2.LeaseRef, stage: Stage, done: int = 0, total: int = 0, unit: str = ""
    ) -> None:
        request = job_service_pb2.ReportStageRequest(
            lease=lease, stage=document_pb2.DocumentStatus.ValueType(stage), done=done, total=total, unit=unit
        )
        await self._call("ReportStage", lambda: self._stub.ReportStage(request, timeout=self.rpc_timeout))

    async def read_document_content(self, lease: job_service_pb2.LeaseRef) -> bytes:
        request = job_service_pb2.ReadDocumentContentRequest(lease=lease)

        async def read() -> bytes:
            parts = [part.data async for part in self._stub.ReadDocumentContent(request, timeout=self.stream_timeout)]
            return b"".join(parts)

        return await self._call("ReadDocumentContent", read)

    async def read_snapshot(self, lease: job_service_pb2.LeaseRef, pipeline_version: str) -> list[ChunkRecord] | None:
        """The saved chunk list, or None when there is none for this content and version."""
        request = job_service_pb2.ReadSnapshotRequest(lease=lease, pipeline_version=pipeline_version)

        async def read() -> list[ChunkRecord] | None:
            chunks: list[ChunkRecord] = []
            try:
                async for response in self._stub.ReadSnapshot(request, timeout=self.stream_timeout):
                    chunks.extend(chunk_from_proto(chunk) for chunk in response.chunks)
            except grpc.aio.AioRpcError as err:
                # NOT_FOUND here means "no snapshot"; a job that is really gone shows at the
                # next call, which fails with NOT_FOUND too.
                if err.code() == grpc.StatusCode.NOT_FOUND:
                    return None
                raise
            return chunks

        return await self._call("ReadSnapshot", read)

    async def save_snapshot(
        self, lease: job_service_pb2.LeaseRef, pipeline_version: str, chunks: list[ChunkRecord], batch_size: int
    ) -> int:
        async def requests() -> AsyncIterator[job_service_pb2.SaveSnapshotRequest]:
            header = job_service_pb2.SnapshotHeader(lease=lease, pipeline_version=pipeline_version, chunk_count=len(chunks))
            yield job_service_pb2.SaveSnapshotRequest(header=header)
            for batch in batches(chunks, batch_size):
                yield job_service_pb2.SaveSnapshotRequest(chunks=job_service_pb2.ChunkBatch(chunks=batch))

        response = await self._call("SaveSnapshot", lambda: self._stub.SaveSnapshot(requests(), timeout=self.stream_timeout))
        return int(response.chunk_count)

    async def complete_job(
        self, lease: job_service_pb2.LeaseRef, chunks: list[ChunkRecord], batch_size: int
    ) -> document_pb2.Document:
        async def requests() -> AsyncIterator[job_service_pb2.CompleteJobRequest]:
            yield job_service_pb2.CompleteJobRequest(
                header=job_service_pb2.CompleteJobHeader(lease=lease, chunk_count=len(chunks))
            )
            for batch in batches(chunks, batch_size):
                yield job_service_pb2.CompleteJobRequest(chunks=job_service_pb2.ChunkBatch(chunks=batch))

        # No retry on a failed commit: if it did commit, a second try would only meet
        # LEASE_NOT_HELD; if it did not, the job's own retry handles it.
        response: job_service_pb2.CompleteJobResponse = await self._call(
            "CompleteJob", lambda: self._stub.CompleteJob(requests(), timeout=self.stream_timeout), retry=False
        )
        return response.document

    async def fail_job(self, lease: job_service_pb2.LeaseRef, *, retryable: bool, error_code: str, error_message: str) -> bool:
        request = job_service_pb2.FailJobRequest(
            lease=lease, retryable=retryable, error_code=error_code, error_message=error_message
        )
        response = await self._call(
            "FailJob", lambda: self._stub.FailJob(request, timeout=self.rpc_timeout), about_job_data=False
        )
        return bool(response.will_retry)

    async def release_job(self, lease: job_service_pb2.LeaseRef) -> None:
        request = job_service_pb2.ReleaseJobRequest(lease=lease)
        await self._call("ReleaseJob", lambda: self._stub.ReleaseJob(request, timeout=self.rpc_timeout), about_job_data=False)
