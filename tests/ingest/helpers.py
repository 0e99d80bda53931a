"""Small clients for ingest-api tests: real gRPC, real database, no fakes."""

from __future__ import annotations

import hashlib
import uuid

import auth_keys
import psycopg
from sluice.v1 import collection_pb2, document_pb2, document_service_pb2_grpc, job_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js

D = document_pb2


class Clients:
    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = auth_keys.channel(address)
        self.docs = document_service_pb2_grpc.DocumentServiceStub(self.channel)
        self.jobs = job_service_pb2_grpc.JobServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def create_collection(self, name: str = "docs", dimensions: int = 8, **kwargs) -> collection_pb2.Collection:
        return self.docs.CreateCollection(
            ds.CreateCollectionRequest(
                collection=collection_pb2.Collection(
                    name=name,
                    embedder=collection_pb2.EmbedderConfig(
                        provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=dimensions
                    ),
                    **kwargs,
                )
            )
        )

    def upload(
        self,
        collection: str = "docs",
        content: bytes | None = None,
        filename: str = "a.txt",
        request_id: str = "",
        metadata: dict | None = None,
        piece: int = 64 * 1024,
        **trailer,
    ) -> D.Document:
        """Upload `content` ending with the trailer; `trailer=False`, `size=` or `sha256=` break it on purpose."""
        content = content if content is not None else f"hello {uuid.uuid4()}".encode()
        return self.docs.UploadDocument(upload_messages(collection, content, filename, request_id, metadata, piece, **trailer))

    def claim(self, worker: str = "w1", wait: float = 0.0) -> js.Job | None:
        response = self.jobs.ClaimJob(js.ClaimJobRequest(worker_id=worker, wait_seconds=wait))
        return response.job if response.HasField("job") else None

    def stage(self, job: js.Job, stage: int, done: int = 0, total: int = 0):
        return self.jobs.ReportStage(js.ReportStageRequest(lease=job.lease, stage=stage, done=done, total=total))

    def complete(self, job: js.Job, texts: list[str] | None = None, dimensions: int = 8) -> D.Document:
        texts = texts if texts is not None else ["first chunk", "second chunk"]

        def messages():
            yield js.CompleteJobRequest(header=js.CompleteJobHeader(lease=job.lease, chunk_count=len(texts)))
            chunks = [
                js.Chunk(index=i, text=t, page_number=1, element_type="NarrativeText", embedding=vector_for(t, dimensions))
                for i, t in enumerate(texts)
            ]
            yield js.CompleteJobRequest(chunks=js.ChunkBatch(chunks=chunks))

        return self.jobs.CompleteJob(messages()).document

    def run_to_indexing(self, job: js.Job) -> None:
        for stage in (
            D.DOCUMENT_STATUS_PARSING,
            D.DOCUMENT_STATUS_CHUNKING,
            D.DOCUMENT_STATUS_EMBEDDING,
            D.DOCUMENT_STATUS_INDEXING,
        ):
            self.stage(job, stage)

    def fail(self, job: js.Job, retryable: bool, code: str = "EMBEDDING_UNAVAILABLE", message: str = "provider down"):
        return self.jobs.FailJob(js.FailJobRequest(lease=job.lease, retryable=retryable, error_code=code, error_message=message))

    def get(self, document_id: str) -> D.Document:
        return self.docs.GetDocument(ds.GetDocumentRequest(id=document_id))


def upload_messages(
    collection: str,
    content: bytes,
    filename: str = "a.txt",
    request_id: str = "",
    metadata: dict | None = None,
    piece: int = 64 * 1024,
    *,
    trailer: bool = True,
    size: int | None = None,
    sha256: str | None = None,
):
    """An upload stream: metadata, the bytes in pieces, and the trailer with the true size and SHA-256
    (unless overridden by `size`/`sha256`, or left out with `trailer=False`)."""
    yield ds.UploadDocumentRequest(
        metadata=ds.UploadDocumentMetadata(
            collection=collection, filename=filename, request_id=request_id, metadata=metadata or {}
        )
    )
    for start in range(0, len(content), piece):
        yield ds.UploadDocumentRequest(data=content[start : start + piece])
    if trailer:
        yield ds.UploadDocumentRequest(
            trailer=ds.UploadDocumentTrailer(
                size_bytes=len(content) if size is None else size,
                sha256=hashlib.sha256(content).hexdigest() if sha256 is None else sha256,
            )
        )


def vector_for(text: str, dimensions: int = 8) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    values = [b / 255.0 + 0.01 for b in digest[:dimensions]]
    norm = sum(v * v for v in values) ** 0.5
    return [v / norm for v in values]


def chunk_generations(url: str, document_id: str) -> dict[int, int]:
    """The document's chunks per generation number."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT g.number, count(*) FROM chunks c JOIN collection_generations g ON g.id = c.generation_id"
            " WHERE c.document_id = %s GROUP BY g.number",
            (document_id,),
        ).fetchall()
    return dict(rows)
