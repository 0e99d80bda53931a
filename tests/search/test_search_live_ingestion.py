"""READY visibility while real ingestion runs (rule 3 of docs/architecture.md#the-rules), through the real APIs.

ingest-api runs in-process (the `ingest_api` fixture); this test is its worker, driving
JobService (ClaimJob → ReportStage x4 → CompleteJob) with real gRPC calls, while searchers
query SearchService without pause. Every hit must belong to a document whose CompleteJob had
already been sent; a document is visible to the first search after CompleteJob returns,
with all its chunks at once; and it is gone from the first search after ReprocessDocument
(which deletes its chunks with the move out of READY) or DeleteDocument returns. A document
not READY that still holds chunks is test_search_api's and test_replica's case.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter

import auth_keys
import pytest
from sluice.v1 import (
    collection_pb2,
    document_pb2,
    document_service_pb2,
    document_service_pb2_grpc,
    job_service_pb2,
    job_service_pb2_grpc,
)
from sluice.v1 import search_service_pb2 as pb
from sluice_common.embedders import get_embedder

DIM = 64
DOCUMENTS = 12
CHUNKS = 3
STAGES = [
    document_pb2.DOCUMENT_STATUS_PARSING,
    document_pb2.DOCUMENT_STATUS_CHUNKING,
    document_pb2.DOCUMENT_STATUS_EMBEDDING,
    document_pb2.DOCUMENT_STATUS_INDEXING,
]


def chunk_texts(n: int) -> list[str]:
    return [f"sluicetest document{n} part{i} 水闸测试 paragraph about rivers and locks" for i in range(CHUNKS)]


async def upload(documents, n: int) -> str:
    async def requests():
        yield document_service_pb2.UploadDocumentRequest(
            metadata=document_service_pb2.UploadDocumentMetadata(
                collection="live", filename=f"doc{n}.txt", mime_type="text/plain", metadata={"n": str(n)}
            )
        )
        content = "\n\n".join(chunk_texts(n)).encode()
        yield document_service_pb2.UploadDocumentRequest(data=content)
        yield document_service_pb2.UploadDocumentRequest(
            trailer=document_service_pb2.UploadDocumentTrailer(
                size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest()
            )
        )

    return (await documents.UploadDocument(requests())).id


@pytest.fixture
async def ingest_channel(ingest_api):
    channel = auth_keys.aio_channel(ingest_api.address)
    yield channel
    await channel.close()


async def test_documents_appear_only_when_ready_and_leave_at_once(search_stub, ingest_channel):  # noqa: C901 - its tasks are closures over the test's state
    documents = document_service_pb2_grpc.DocumentServiceStub(ingest_channel)
    jobs = job_service_pb2_grpc.JobServiceStub(ingest_channel)
    await documents.CreateCollection(
        document_service_pb2.CreateCollectionRequest(
            collection=collection_pb2.Collection(
                name="live",
                embedder=collection_pb2.EmbedderConfig(
                    provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=DIM
                ),
            )
        )
    )
    embedder = get_embedder("hashing", "hashing-v1", DIM)

    completing: set[str] = set()  # CompleteJob sent (may be committed at any moment)
    committed: set[str] = set()  # CompleteJob returned (must be visible)
    leaving: set[str] = set()  # reprocess/delete sent (may vanish at any moment)
    hidden: set[str] = set()  # reprocess/delete returned (must be invisible)
    violations: list[str] = []
    searches = 0
    done = asyncio.Event()

    async def search_once() -> dict[str, int]:
        nonlocal searches
        # Snapshots taken before each call: what had returned before it was sent. `completing`
        # is read live, after the response: CompleteJob must have been sent by then.
        must_see = committed - hidden
        must_not_see = set(hidden)
        seen: Counter[str] = Counter()
        for mode, query in (
            (pb.SEARCH_MODE_KEYWORD, "sluicetest"),
            (pb.SEARCH_MODE_VECTOR, "sluicetest rivers"),
            (pb.SEARCH_MODE_HYBRID, "水闸测试 rivers"),
        ):
            response = await search_stub.Search(pb.SearchRequest(collection="live", query=query, mode=mode, top_k=100))
            per_doc = Counter(h.document_id for h in response.hits)
            for doc, count in per_doc.items():
                if doc not in completing:
                    violations.append(f"{doc} visible before CompleteJob")
                if doc in must_not_see:
                    violations.append(f"{doc} visible after reprocess/delete")
                if count != CHUNKS:
                    violations.append(f"{doc} visible with {count} of {CHUNKS} chunks")
            if mode == pb.SEARCH_MODE_KEYWORD:
                # `leaving` is read live: a searcher may snapshot must_see, then the
                # reprocess commits before its query runs, yet returns after it.
                for doc in must_see - set(per_doc) - leaving:
                    violations.append(f"{doc} invisible after CompleteJob returned")
            seen.update(per_doc)
        searches += 1
        return seen

    async def searcher():
        while not done.is_set():
            await search_once()

    async def worker():
        processed = 0
        while processed < DOCUMENTS:
            job = (await jobs.ClaimJob(job_service_pb2.ClaimJobRequest(worker_id="search-test", wait_seconds=2))).job
            if not job.document_id:
                continue
            for stage in STAGES:  # status before action; searches run between stages
                await jobs.ReportStage(job_service_pb2.ReportStageRequest(lease=job.lease, stage=stage))
                await asyncio.sleep(0.02)
            n = int(job.filename.removeprefix("doc").removesuffix(".txt"))
            texts = chunk_texts(n)
            vectors = await embedder.embed_documents(texts)

            async def stream(job=job, texts=texts, vectors=vectors):
                yield job_service_pb2.CompleteJobRequest(
                    header=job_service_pb2.CompleteJobHeader(lease=job.lease, chunk_count=CHUNKS)
                )
                yield job_service_pb2.CompleteJobRequest(
                    chunks=job_service_pb2.ChunkBatch(
                        chunks=[
                            job_service_pb2.Chunk(index=i, text=t, page_number=0, element_type="NarrativeText", embedding=v)
                            for i, (t, v) in enumerate(zip(texts, vectors))
                        ]
                    )
                )

            completing.add(job.document_id)
            result = await jobs.CompleteJob(stream())
            assert result.document.status == document_pb2.DOCUMENT_STATUS_READY
            committed.add(job.document_id)
            processed += 1

    ids = [await upload(documents, n) for n in range(DOCUMENTS)]
    searchers = [asyncio.create_task(searcher()) for _ in range(2)]
    await asyncio.wait_for(worker(), timeout=120)

    # Reprocess one READY document and delete another while the searchers keep going.
    reprocessed, deleted = ids[0], ids[1]
    leaving.add(reprocessed)
    await documents.ReprocessDocument(document_service_pb2.ReprocessDocumentRequest(id=reprocessed))
    hidden.add(reprocessed)
    assert reprocessed not in await search_once()
    leaving.add(deleted)
    await documents.DeleteDocument(document_service_pb2.DeleteDocumentRequest(id=deleted))
    hidden.add(deleted)
    assert deleted not in await search_once()
    await asyncio.sleep(0.2)
    done.set()
    await asyncio.gather(*searchers)

    final = await search_once()
    assert set(final) == set(ids) - {reprocessed, deleted}
    assert not violations, violations[:10]
    assert searches > 20
