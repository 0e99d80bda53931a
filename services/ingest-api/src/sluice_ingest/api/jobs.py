"""JobService, the workers' calls: convert, call one use case (service/jobs.py), convert back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal, Protocol, TypeVar

import grpc
from sluice.v1 import job_service_pb2, job_service_pb2_grpc
from sluice_common.errors import InvalidArgument, grpc_errors
from sluice_common.reasons import Reason

from ..service import IncomingChunk, JobUseCases
from .converters import (
    chunk_from_proto,
    chunk_to_proto,
    document_status_from_proto,
    document_to_proto,
    job_to_proto,
    timestamp,
)


class LeaseHolder(Protocol):
    """A JobService message that carries the job's lease."""

    @property
    def lease(self) -> job_service_pb2.LeaseRef: ...

    def HasField(self, field_name: Literal["lease"]) -> bool: ...


Header = TypeVar("Header", covariant=True)


class ChunkStreamMessage(Protocol[Header]):
    """A message of SaveSnapshot's or CompleteJob's stream: a header first, then chunk batches."""

    @property
    def header(self) -> Header: ...

    @property
    def chunks(self) -> job_service_pb2.ChunkBatch: ...

    def WhichOneof(self, oneof_group: Literal["payload"]) -> str | None: ...


def lease_of(message: LeaseHolder) -> tuple[str, str]:
    if not message.HasField("lease") or not message.lease.job_id or not message.lease.lease_token:
        raise InvalidArgument("lease.job_id and lease.lease_token are required", reason=Reason.MISSING_LEASE)
    return message.lease.job_id, message.lease.lease_token


class JobServicer(job_service_pb2_grpc.JobServiceServicer):
    def __init__(self, jobs: JobUseCases, lease_seconds: float) -> None:
        self.jobs = jobs
        self.lease_seconds = lease_seconds

    @grpc_errors
    async def ClaimJob(
        self, request: job_service_pb2.ClaimJobRequest, context: grpc.aio.ServicerContext
    ) -> job_service_pb2.ClaimJobResponse:
        job = await self.jobs.claim_job(request.worker_id, request.wait_seconds)
        if job is None:
            return job_service_pb2.ClaimJobResponse()
        return job_service_pb2.ClaimJobResponse(job=job_to_proto(job, self.lease_seconds))

    @grpc_errors
    async def RenewLease(
        self, request: job_service_pb2.RenewLeaseRequest, context: grpc.aio.ServicerContext
    ) -> job_service_pb2.RenewLeaseResponse:
        expires = await self.jobs.renew_lease(*lease_of(request))
        if expires is None:
            return job_service_pb2.RenewLeaseResponse(cancelled=True)
        return job_service_pb2.RenewLeaseResponse(lease_expire_time=timestamp(expires))

    @grpc_errors
    async def ReportStage(
        self, request: job_service_pb2.ReportStageRequest, context: grpc.aio.ServicerContext
    ) -> job_service_pb2.ReportStageResponse:
        stage = document_status_from_proto(request.stage)
        if stage is None:
            raise InvalidArgument("stage is required", reason=Reason.INVALID_STAGE)
        expires = await self.jobs.report_stage(*lease_of(request), stage, request.done, request.total, request.unit)
        return job_service_pb2.ReportStageResponse(lease_expire_time=timestamp(expires))

    @grpc_errors
    async def ReadDocumentContent(
        self, request: job_service_pb2.ReadDocumentContentRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[job_service_pb2.ReadDocumentContentResponse]:
        async for data in self.jobs.read_content(*lease_of(request)):
            yield job_service_pb2.ReadDocumentContentResponse(data=data)

    @grpc_errors
    async def SaveSnapshot(
        self, request_iterator: AsyncIterator[job_service_pb2.SaveSnapshotRequest], context: grpc.aio.ServicerContext
    ) -> job_service_pb2.SaveSnapshotResponse:
        header, chunks = await self._header_and_chunks(request_iterator)
        if header.chunk_count != len(chunks):
            raise InvalidArgument(
                f"the header announced {header.chunk_count} chunks but {len(chunks)} arrived", reason=Reason.CHUNK_COUNT_MISMATCH
            )
        await self.jobs.save_snapshot(*lease_of(header), header.pipeline_version, chunks)
        return job_service_pb2.SaveSnapshotResponse(chunk_count=len(chunks))

    @grpc_errors
    async def ReadSnapshot(
        self, request: job_service_pb2.ReadSnapshotRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[job_service_pb2.ReadSnapshotResponse]:
        chunks = await self.jobs.read_snapshot(*lease_of(request), request.pipeline_version)
        for start in range(0, len(chunks), 256):
            yield job_service_pb2.ReadSnapshotResponse(chunks=[chunk_to_proto(c) for c in chunks[start : start + 256]])

    @grpc_errors
    async def CompleteJob(
        self, request_iterator: AsyncIterator[job_service_pb2.CompleteJobRequest], context: grpc.aio.ServicerContext
    ) -> job_service_pb2.CompleteJobResponse:
        header, chunks = await self._header_and_chunks(request_iterator)
        document = await self.jobs.complete_job(*lease_of(header), header.chunk_count, chunks)
        return job_service_pb2.CompleteJobResponse(document=document_to_proto(document))

    @staticmethod
    async def _header_and_chunks(
        request_iterator: AsyncIterator[ChunkStreamMessage[Header]],
    ) -> tuple[Header, list[IncomingChunk]]:
        first = await anext(aiter(request_iterator), None)
        if first is None or first.WhichOneof("payload") != "header":
            raise InvalidArgument("the first message of the stream must be the header", reason=Reason.MISSING_HEADER)
        chunks: list[IncomingChunk] = []
        async for message in request_iterator:
            if message.WhichOneof("payload") != "chunks":
                raise InvalidArgument("only the first message may be a header", reason=Reason.DUPLICATE_HEADER)
            chunks.extend(chunk_from_proto(c) for c in message.chunks.chunks)
            if len(chunks) > 1_000_000:
                raise InvalidArgument("too many chunks in one document", reason=Reason.TOO_MANY_CHUNKS)
        return first.header, chunks

    @grpc_errors
    async def FailJob(
        self, request: job_service_pb2.FailJobRequest, context: grpc.aio.ServicerContext
    ) -> job_service_pb2.FailJobResponse:
        document, will_retry = await self.jobs.fail_job(
            *lease_of(request), request.retryable, request.error_code, request.error_message
        )
        return job_service_pb2.FailJobResponse(document=document_to_proto(document), will_retry=will_retry)

    @grpc_errors
    async def ReleaseJob(
        self, request: job_service_pb2.ReleaseJobRequest, context: grpc.aio.ServicerContext
    ) -> job_service_pb2.ReleaseJobResponse:
        document = await self.jobs.release_job(*lease_of(request))
        return job_service_pb2.ReleaseJobResponse(document=document_to_proto(document))


__all__ = ["JobServicer"]
