"""DocumentService end to end: uploads, idempotency, dedup, broken streams, watch, lists, errors."""

from __future__ import annotations

import threading
import time

import grpc
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers import expect_error, wait_for
from sluice.v1 import collection_pb2
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js

from .helpers import Clients


def rows(url, table):
    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


# ---------------------------------------------------------------- upload


def test_upload_streams_content_and_reads_it_back(c):
    content = bytes(range(256)) * 10_000  # 2.5 MB, several messages each way
    doc = c.upload(content=content, filename="../../secret/report.pdf", metadata={"team": "search"})
    assert doc.filename == "report.pdf" and doc.size_bytes == len(content)
    assert doc.mime_type == "application/pdf" and doc.metadata["team"] == "search"
    assert doc.name == f"collections/docs/documents/{doc.id}"
    job = c.claim()
    assert job.content_sha256 == doc.content_sha256 and job.embedder.dimensions == 8
    assert job.content == b""  # more than 1 MiB: read with ReadDocumentContent
    data = b"".join(r.data for r in c.jobs.ReadDocumentContent(js.ReadDocumentContentRequest(lease=job.lease)))
    assert data == content


def test_a_small_document_comes_with_its_claim_and_the_claim_lists_its_snapshots(c):
    content = b"small enough to travel with the claim"
    doc = c.upload(content=content)
    job = c.claim()
    assert job.content == content and job.size_bytes == len(content)
    assert list(job.snapshot_versions) == []  # nothing saved yet: the worker skips ReadSnapshot

    def snapshot():
        yield js.SaveSnapshotRequest(header=js.SnapshotHeader(lease=job.lease, pipeline_version="v7", chunk_count=1))
        yield js.SaveSnapshotRequest(chunks=js.ChunkBatch(chunks=[js.Chunk(index=0, text="a")]))

    c.jobs.SaveSnapshot(snapshot())
    c.fail(job, retryable=True)
    retry = wait_for(c.claim, 10, interval=0.01, what="the retry to be due")
    assert retry.document_id == doc.id and retry.attempt == 2
    assert list(retry.snapshot_versions) == ["v7"]


def test_same_request_id_returns_the_same_document(c, database_url):
    first = c.upload(content=b"one", request_id="req-1")
    again = c.upload(content=b"one", request_id="req-1")
    assert again.id == first.id
    expect_error(lambda: c.upload(content=b"two", request_id="req-1"), grpc.StatusCode.ALREADY_EXISTS, "REQUEST_ID_REUSED")
    assert rows(database_url, "documents") == 1 and rows(database_url, "ingestion_jobs") == 1


def test_same_content_in_same_collection_is_deduplicated(c, database_url):
    first = c.upload(content=b"same bytes", filename="a.txt")
    second = c.upload(content=b"same bytes", filename="b.txt")
    assert second.id == first.id
    c.create_collection("other")
    third = c.upload(collection="other", content=b"same bytes")
    assert third.id != first.id
    assert rows(database_url, "documents") == 2


def test_dedup_rule_is_documented_where_clients_read_it_and_holds(c):
    """The UploadDocument comment states what the server does with identical bytes; check both."""
    from pathlib import Path

    proto = (Path(__file__).resolve().parents[2] / "protos/sluice/v1/document_service.proto").read_text()
    upload_comment = proto.split("  rpc UploadDocument(")[0].rsplit(");\n", 1)[-1]  # the comment block above it
    for promise in (
        "same SHA-256",
        "returns that existing document",
        "new ones are ignored",
        "another collection",
        "REQUEST_ID_REUSED",
        "ReprocessDocument",
    ):
        assert promise in upload_comment, promise
    first = c.upload(content=b"dedup rule bytes", filename="first.txt", metadata={"k": "1"})
    second = c.upload(content=b"dedup rule bytes", filename="second.txt", metadata={"k": "2"})
    assert second.id == first.id
    assert second.filename == "first.txt" and dict(second.metadata) == {"k": "1"}


def test_concurrent_identical_uploads_make_one_document(c, ingest_api, database_url):
    ids = []

    def upload():
        client = Clients(ingest_api.address)
        ids.append(client.upload(content=b"raced content").id)
        client.close()

    threads = [threading.Thread(target=upload) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and len(ids) == 8
    assert rows(database_url, "documents") == 1


def test_broken_upload_stream_leaves_nothing(c, database_url):
    def messages():
        yield ds.UploadDocumentRequest(metadata=ds.UploadDocumentMetadata(collection="docs", filename="big.bin"))
        yield ds.UploadDocumentRequest(data=b"x" * 1000)
        raise ConnectionError("client vanished mid-upload")

    with pytest.raises(grpc.RpcError):
        c.docs.UploadDocument(messages())
    for table in ("documents", "document_contents", "ingestion_jobs"):
        assert rows(database_url, table) == 0


def test_upload_limits_and_bad_metadata(ingest_api_factory, database_url):
    api = ingest_api_factory(max_upload_bytes=1000)
    c = Clients(api.address)
    c.create_collection()
    err = expect_error(lambda: c.upload(content=b"x" * 1001, piece=100), grpc.StatusCode.RESOURCE_EXHAUSTED, "UPLOAD_TOO_LARGE")
    assert "1000 bytes" in err.details()
    expect_error(lambda: c.upload(content=b""), grpc.StatusCode.INVALID_ARGUMENT, "EMPTY_UPLOAD")
    expect_error(lambda: c.upload(collection="nope"), grpc.StatusCode.NOT_FOUND, "COLLECTION_NOT_FOUND")
    expect_error(lambda: c.upload(filename="/"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FILENAME")
    expect_error(lambda: c.upload(metadata={"": "v"}), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_METADATA")
    expect_error(
        lambda: c.docs.UploadDocument(iter([ds.UploadDocumentRequest(data=b"abc")])),
        grpc.StatusCode.INVALID_ARGUMENT,
        "MISSING_METADATA",
    )
    assert c.upload(content=b"x" * 1000).size_bytes == 1000
    assert rows(database_url, "documents") == 1
    c.close()


# ---------------------------------------------------------------- watch


def test_watch_delivers_every_status_in_order(c):
    doc = c.upload()
    events: list = []
    started = threading.Event()

    def watch():
        stream = c.docs.WatchDocument(ds.WatchDocumentRequest(id=doc.id))
        for event in stream:
            events.append(event)
            started.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    assert started.wait(10)
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    c.stage(job, D.DOCUMENT_STATUS_CHUNKING)
    c.stage(job, D.DOCUMENT_STATUS_EMBEDDING, 0, 2)
    c.stage(job, D.DOCUMENT_STATUS_EMBEDDING, 1, 2)
    c.stage(job, D.DOCUMENT_STATUS_EMBEDDING, 2, 2)
    c.stage(job, D.DOCUMENT_STATUS_INDEXING)
    c.complete(job)
    watcher.join(20)
    assert not watcher.is_alive(), "the stream did not end after READY"
    statuses = [e.document.status for e in events]
    distinct = [s for i, s in enumerate(statuses) if i == 0 or s != statuses[i - 1]]
    assert distinct == [
        D.DOCUMENT_STATUS_PENDING,
        D.DOCUMENT_STATUS_PARSING,
        D.DOCUMENT_STATUS_CHUNKING,
        D.DOCUMENT_STATUS_EMBEDDING,
        D.DOCUMENT_STATUS_INDEXING,
        D.DOCUMENT_STATUS_READY,
    ]
    progress = [e.document.progress.done for e in events if e.document.status == D.DOCUMENT_STATUS_EMBEDDING]
    assert progress == [0, 1, 2]
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert events[-1].document.chunk_count == 2
    # Every event shows document and job in agreement (rule 5).
    for e in events:
        if e.document.status in (D.DOCUMENT_STATUS_PARSING, D.DOCUMENT_STATUS_INDEXING):
            assert e.document.job_status == D.INGESTION_JOB_STATUS_RUNNING
    assert events[-1].document.job_status == D.INGESTION_JOB_STATUS_SUCCEEDED


def test_watch_of_a_finished_document_ends_at_once_and_deleted_one_ends_not_found(c):
    doc = c.upload()
    job = c.claim()
    c.fail(job, retryable=False, code="DOCUMENT_EMPTY", message="the file has no text")
    events = list(c.docs.WatchDocument(ds.WatchDocumentRequest(id=doc.id)))
    assert len(events) == 1 and events[0].document.status == D.DOCUMENT_STATUS_FAILED

    other = c.upload()
    stream = c.docs.WatchDocument(ds.WatchDocumentRequest(id=other.id))
    first = next(stream)
    assert first.document.status == D.DOCUMENT_STATUS_PENDING
    c.docs.DeleteDocument(ds.DeleteDocumentRequest(id=other.id))
    with pytest.raises(grpc.RpcError) as err:
        next(stream)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


# ---------------------------------------------------------------- delete, retry, reprocess


def test_delete_cancels_the_running_job_and_removes_chunks(c, database_url):
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    response = c.docs.DeleteDocument(ds.DeleteDocumentRequest(id=doc.id))
    assert response.cancelled_running_job
    assert c.jobs.RenewLease(js.RenewLeaseRequest(lease=job.lease)).cancelled
    expect_error(lambda: c.stage(job, D.DOCUMENT_STATUS_CHUNKING), grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND")
    expect_error(lambda: c.get(doc.id), grpc.StatusCode.NOT_FOUND, "DOCUMENT_NOT_FOUND")
    for table in ("documents", "document_contents", "ingestion_jobs", "job_attempts", "chunks"):
        assert rows(database_url, table) == 0, table
    ready = c.upload()
    job = c.claim()
    c.run_to_indexing(job)
    c.complete(job)
    assert not c.docs.DeleteDocument(ds.DeleteDocumentRequest(id=ready.id)).cancelled_running_job
    assert rows(database_url, "chunks") == 0


def test_retry_and_reprocess(c):
    doc = c.upload()
    expect_error(
        lambda: c.docs.RetryDocument(ds.RetryDocumentRequest(id=doc.id)),
        grpc.StatusCode.FAILED_PRECONDITION,
        "DOCUMENT_NOT_FAILED",
    )
    job = c.claim()
    c.fail(job, retryable=False, code="DOCUMENT_CORRUPT", message="broken")
    retried = c.docs.RetryDocument(ds.RetryDocumentRequest(id=doc.id))
    assert (retried.status, retried.job_status, retried.attempts, retried.error_message) == (
        D.DOCUMENT_STATUS_PENDING,
        D.INGESTION_JOB_STATUS_PENDING,
        0,
        "",
    )
    job = c.claim()
    assert job.attempt == 1
    c.run_to_indexing(job)
    c.complete(job)
    expect_error(
        lambda: c.docs.RetryDocument(ds.RetryDocumentRequest(id=doc.id)),
        grpc.StatusCode.FAILED_PRECONDITION,
        "DOCUMENT_NOT_FAILED",
    )
    again = c.docs.ReprocessDocument(ds.ReprocessDocumentRequest(id=doc.id))
    assert (again.status, again.job_status) == (D.DOCUMENT_STATUS_PENDING, D.INGESTION_JOB_STATUS_PENDING)
    expect_error(
        lambda: c.docs.ReprocessDocument(ds.ReprocessDocumentRequest(id=doc.id)),
        grpc.StatusCode.FAILED_PRECONDITION,
        "DOCUMENT_NOT_READY",
    )


# ---------------------------------------------------------------- lists and collections


def test_list_documents_pages_and_filters(c):
    ids = [c.upload(content=f"doc {i}".encode()).id for i in range(7)]
    job = c.claim()
    c.fail(job, retryable=False, code="DOCUMENT_EMPTY", message="empty")
    seen, token = [], ""
    while True:
        page = c.docs.ListDocuments(ds.ListDocumentsRequest(collection="docs", page_size=3, page_token=token))
        assert len(page.documents) <= 3
        seen += [d.id for d in page.documents]
        token = page.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 7
    assert seen == list(reversed(ids))  # newest first
    failed = c.docs.ListDocuments(ds.ListDocumentsRequest(status=D.DOCUMENT_STATUS_FAILED))
    assert [d.id for d in failed.documents] == [job.document_id]
    expect_error(
        lambda: c.docs.ListDocuments(ds.ListDocumentsRequest(page_token="garbage!")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_PAGE_TOKEN",
    )
    first = c.docs.ListDocuments(ds.ListDocumentsRequest(collection="docs", page_size=3))
    expect_error(
        lambda: c.docs.ListDocuments(ds.ListDocumentsRequest(page_token=first.next_page_token)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_PAGE_TOKEN",
    )
    expect_error(
        lambda: c.docs.ListDocuments(ds.ListDocumentsRequest(collection="nope")),
        grpc.StatusCode.NOT_FOUND,
        "COLLECTION_NOT_FOUND",
    )
    expect_error(
        lambda: c.docs.ListDocuments(ds.ListDocumentsRequest(page_size=5000)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_PAGE_SIZE",
    )


def test_collections_lifecycle_and_validation(c, database_url):
    assert c.create_collection("b-second").embedder.dimensions == 8
    expect_error(lambda: c.create_collection("docs"), grpc.StatusCode.ALREADY_EXISTS, "COLLECTION_EXISTS")
    expect_error(lambda: c.create_collection("Bad Name"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_COLLECTION_NAME")
    expect_error(lambda: c.create_collection("x", dimensions=5000), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_EMBEDDER")
    # A name alone gets the local default embedder, as the CLI and the SDKs create it (issue 37,
    # defect 2: docs/http.md's first example was refused INVALID_EMBEDDER); a model without a
    # provider is still refused.
    named_only = c.docs.CreateCollection(ds.CreateCollectionRequest(collection=collection_pb2.Collection(name="y")))
    assert named_only.embedder.provider == collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS
    assert (named_only.embedder.model, named_only.embedder.dimensions) == ("all-MiniLM-L6-v2", 384)
    c.docs.DeleteCollection(ds.DeleteCollectionRequest(name="y"))
    expect_error(
        lambda: c.docs.CreateCollection(
            ds.CreateCollectionRequest(
                collection=collection_pb2.Collection(
                    name="y2", embedder=collection_pb2.EmbedderConfig(model="text-embedding-3-small")
                )
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_EMBEDDER",
    )
    expect_error(
        lambda: c.create_collection("z", chunking=collection_pb2.ChunkingConfig(max_characters=100, overlap=100)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_CHUNKING",
    )
    local = c.docs.CreateCollection(
        ds.CreateCollectionRequest(
            collection=collection_pb2.Collection(
                name="local",
                embedder=collection_pb2.EmbedderConfig(provider=collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS),
            )
        )
    )
    assert (local.embedder.model, local.embedder.dimensions) == ("all-MiniLM-L6-v2", 384)
    names = []
    token = ""
    while True:
        page = c.docs.ListCollections(ds.ListCollectionsRequest(page_size=2, page_token=token))
        names += [col.name for col in page.collections]
        token = page.next_page_token
        if not token:
            break
    assert names == ["b-second", "docs", "local"]
    c.upload()
    expect_error(
        lambda: c.docs.DeleteCollection(ds.DeleteCollectionRequest(name="docs")),
        grpc.StatusCode.FAILED_PRECONDITION,
        "COLLECTION_NOT_EMPTY",
    )
    assert c.docs.GetCollection(ds.GetCollectionRequest(name="docs")).document_count == 1
    assert c.docs.DeleteCollection(ds.DeleteCollectionRequest(name="docs", force=True)).deleted_documents == 1
    expect_error(lambda: c.docs.GetCollection(ds.GetCollectionRequest(name="docs")), grpc.StatusCode.NOT_FOUND)
    assert rows(database_url, "documents") == 0
    with psycopg.connect(database_url) as conn:
        indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'chunks'")}
    assert sum(1 for name in indexes if name.startswith("chunks_embedding_g")) == 2  # b-second and local


def test_chunk_overlap_unset_takes_the_default_and_zero_means_none(c):
    """ChunkingConfig.overlap has presence: unset takes the default (150, at most a quarter of
    max_characters), an explicit 0 means no overlap, as the contract says (before, 0 took the
    default too and no collection could have none), and the worker's job carries what was stored."""
    assert c.create_collection("o-default", chunking=collection_pb2.ChunkingConfig(max_characters=1000)).chunking.overlap == 150
    assert c.create_collection("o-capped", chunking=collection_pb2.ChunkingConfig(max_characters=400)).chunking.overlap == 100
    assert c.create_collection("o-set", chunking=collection_pb2.ChunkingConfig(overlap=42)).chunking.overlap == 42
    none = c.create_collection("o-none", chunking=collection_pb2.ChunkingConfig(max_characters=1000, overlap=0))
    assert none.chunking.HasField("overlap") and none.chunking.overlap == 0
    assert c.docs.GetCollection(ds.GetCollectionRequest(name="o-none")).chunking.overlap == 0
    c.upload(collection="o-none")
    job = c.claim()
    assert (job.chunking.max_characters, job.chunking.overlap) == (1000, 0)


def test_bad_ids_and_missing_leases(c):
    expect_error(lambda: c.get("not-a-uuid"), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ID")
    expect_error(lambda: c.get(""), grpc.StatusCode.INVALID_ARGUMENT, "MISSING_ID")
    expect_error(lambda: c.get("00000000-0000-0000-0000-000000000000"), grpc.StatusCode.NOT_FOUND)
    expect_error(lambda: c.jobs.RenewLease(js.RenewLeaseRequest()), grpc.StatusCode.INVALID_ARGUMENT, "MISSING_LEASE")
    expect_error(lambda: c.jobs.ClaimJob(js.ClaimJobRequest(worker_id="")), grpc.StatusCode.INVALID_ARGUMENT)
    expect_error(
        lambda: c.jobs.ClaimJob(js.ClaimJobRequest(worker_id="w", wait_seconds=1e6)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_WAIT",
    )
    c.upload()
    job = c.claim()
    expect_error(
        lambda: c.jobs.FailJob(js.FailJobRequest(lease=job.lease, error_code="not snake")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_ERROR_CODE",
    )
    expect_error(
        lambda: c.stage(job, D.DOCUMENT_STATUS_PARSING, done=5, total=2), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PROGRESS"
    )


# ---------------------------------------------------------------- long poll, health


def assert_long_poll_woken_by_upload(c: Clients, worker: str) -> None:
    """A 30 s ClaimJob long-poll gets a job uploaded during it well before its deadline."""
    result = {}

    def wait_for_job():
        result["job"] = c.claim(worker, wait=30)
        result["at"] = time.monotonic()

    waiter = threading.Thread(target=wait_for_job)
    waiter.start()
    time.sleep(0.5)
    uploaded_at = time.monotonic()
    doc = c.upload()
    waiter.join(40)
    assert result["job"].document_id == doc.id
    # Woken by NOTIFY, not by the 30 s deadline.
    assert result["at"] - uploaded_at < 15


def test_claim_long_poll_is_woken_by_an_upload(c):
    assert_long_poll_woken_by_upload(c, "sleeper")


def test_health_and_reflection(ingest_api):
    channel = grpc.insecure_channel(ingest_api.address)
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "sluice.v1.DocumentService", "sluice.v1.JobService"):
        assert health.Check(health_pb2.HealthCheckRequest(service=service)).status == health_pb2.HealthCheckResponse.SERVING
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    names = {s.name for r in responses for s in r.list_services_response.service}
    assert {"sluice.v1.DocumentService", "sluice.v1.JobService", "grpc.health.v1.Health"} <= names
    channel.close()


def test_notifications_survive_a_lost_listen_connection(c, database_url):
    # The database drops ingest-api's LISTEN connection (restart, failover, idle timeout).
    with psycopg.connect(database_url, autocommit=True) as conn:
        killed = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
        ).fetchone()[0]
    assert killed == 1
    time.sleep(1.0)  # the hub notices and reconnects with backoff
    assert_long_poll_woken_by_upload(c, "after-reconnect")
    with psycopg.connect(database_url) as conn:
        listening = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
        ).fetchone()[0]
    assert listening == 1
