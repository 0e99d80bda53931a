"""Tenant isolation through the real APIs: tenant `default` (A) cannot reach tenant `b` (B).

Another tenant's collection or document answers exactly as a missing one (NOT_FOUND, same
message shape), dedup and request_id are per tenant, search never crosses, and row-level
security holds search's role even for a query that forgets the tenant.
"""

from __future__ import annotations

import base64
import json
import uuid

import auth_keys
import grpc
import psycopg
import pytest
from ingest.helpers import Clients, vector_for
from sluice.v1 import document_pb2, document_service_pb2_grpc, job_service_pb2_grpc, search_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js
from sluice.v1 import search_service_pb2 as ss
from sluice_common.channels import keyed_channel
from sluice_common.errors import reason_of

SECRET = b"B's confidential quarterly numbers: 42 sluice gates"


def docs_stub(address, key):
    return document_service_pb2_grpc.DocumentServiceStub(keyed_channel(address, key))


def expect(code, reason, call, *args, **kwargs):
    with pytest.raises(grpc.RpcError) as err:
        result = call(*args, timeout=10, **kwargs)
        if hasattr(result, "__iter__") and not hasattr(result, "ByteSize"):
            list(result)
    assert err.value.code() == code, err.value.details()
    assert reason_of(err.value) == reason
    return err.value


class Worker:
    """A worker's part through the real JobService, with the worker key."""

    def __init__(self, address):
        self.jobs = job_service_pb2_grpc.JobServiceStub(keyed_channel(address, auth_keys.KEYS["worker"]))

    def process(self, texts):
        job = self.jobs.ClaimJob(js.ClaimJobRequest(worker_id="w", wait_seconds=2)).job
        for stage in (
            document_pb2.DOCUMENT_STATUS_PARSING,
            document_pb2.DOCUMENT_STATUS_CHUNKING,
            document_pb2.DOCUMENT_STATUS_EMBEDDING,
            document_pb2.DOCUMENT_STATUS_INDEXING,
        ):
            self.jobs.ReportStage(js.ReportStageRequest(lease=job.lease, stage=stage))

        def messages():
            yield js.CompleteJobRequest(header=js.CompleteJobHeader(lease=job.lease, chunk_count=len(texts)))
            yield js.CompleteJobRequest(
                chunks=js.ChunkBatch(
                    chunks=[js.Chunk(index=i, text=t, page_number=1, embedding=vector_for(t)) for i, t in enumerate(texts)]
                )
            )

        return self.jobs.CompleteJob(messages()).document


@pytest.fixture
def two_tenants(ingest_api, tenant_b):
    """B holds collection `secret` with one READY document; A holds `mine` with one."""
    b = Clients(ingest_api.address)
    b.channel = keyed_channel(ingest_api.address, tenant_b.keys["client"])
    b.docs = document_service_pb2_grpc.DocumentServiceStub(b.channel)
    b.create_collection("secret")
    b.create_collection("shared-name")
    b_doc = b.upload("secret", SECRET, filename="numbers.txt", request_id="req-1")
    Worker(ingest_api.address).process([SECRET.decode()])
    a = Clients(ingest_api.address)
    a.create_collection("mine")
    a.create_collection("shared-name")  # names are unique per tenant, not globally
    a_doc = a.upload("mine", b"A's own notes about locks", filename="a.txt")
    Worker(ingest_api.address).process(["A's own notes about locks"])
    yield a, b, a_doc, b_doc
    a.close()
    b.close()


def test_a_cannot_get_list_watch_retry_reprocess_or_delete_bs_things(two_tenants):
    a, b, a_doc, b_doc = two_tenants
    NF = grpc.StatusCode.NOT_FOUND
    missing = str(uuid.uuid4())
    # B's document answers exactly like a document that does not exist.
    theirs = expect(NF, "DOCUMENT_NOT_FOUND", a.docs.GetDocument, ds.GetDocumentRequest(id=b_doc.id))
    nobody = expect(NF, "DOCUMENT_NOT_FOUND", a.docs.GetDocument, ds.GetDocumentRequest(id=missing))
    assert theirs.details().replace(b_doc.id, "ID") == nobody.details().replace(missing, "ID")
    expect(NF, "DOCUMENT_NOT_FOUND", a.docs.WatchDocument, ds.WatchDocumentRequest(id=b_doc.id))
    expect(NF, "DOCUMENT_NOT_FOUND", a.docs.RetryDocument, ds.RetryDocumentRequest(id=b_doc.id))
    expect(NF, "DOCUMENT_NOT_FOUND", a.docs.ReprocessDocument, ds.ReprocessDocumentRequest(id=b_doc.id))
    expect(NF, "DOCUMENT_NOT_FOUND", a.docs.DeleteDocument, ds.DeleteDocumentRequest(id=b_doc.id))
    expect(NF, "COLLECTION_NOT_FOUND", a.docs.GetCollection, ds.GetCollectionRequest(name="secret"))
    expect(NF, "COLLECTION_NOT_FOUND", a.docs.DeleteCollection, ds.DeleteCollectionRequest(name="secret", force=True))
    expect(NF, "COLLECTION_NOT_FOUND", a.docs.ListDocuments, ds.ListDocumentsRequest(collection="secret"))
    with pytest.raises(grpc.RpcError) as err:
        a.upload("secret", b"planted")
    assert err.value.code() == NF and reason_of(err.value) == "COLLECTION_NOT_FOUND"
    # Listing without a collection shows A's own only.
    listed = a.docs.ListDocuments(ds.ListDocumentsRequest()).documents
    assert [d.id for d in listed] == [a_doc.id]
    names = {c.name for c in a.docs.ListCollections(ds.ListCollectionsRequest()).collections}
    assert names == {"mine", "shared-name"}
    # B's things are intact after all of that.
    after = b.get(b_doc.id)
    assert after.status == document_pb2.DOCUMENT_STATUS_READY and after.chunk_count == 1
    assert b.docs.GetCollection(ds.GetCollectionRequest(name="shared-name")).document_count == 0


def test_a_forged_page_token_does_not_page_into_b(two_tenants):
    a, b, a_doc, _b_doc = two_tenants
    for n in range(3):
        b.upload("secret", f"more of B {n}".encode(), filename=f"b{n}.txt")
    # A token for "every collection" whose cursor points just after B's newest document.
    far_future = {"f": "|", "t": "2999-01-01T00:00:00+00:00", "i": str(uuid.uuid4())}
    token = base64.urlsafe_b64encode(json.dumps(far_future, separators=(",", ":")).encode()).decode()
    page = a.docs.ListDocuments(ds.ListDocumentsRequest(page_size=1000, page_token=token)).documents
    assert {d.id for d in page} == {a_doc.id}
    # A token naming B's collection as its filter is refused like any other token mismatch.
    forged = base64.urlsafe_b64encode(json.dumps({"f": "secret|", "t": far_future["t"], "i": far_future["i"]}).encode()).decode()
    expect(
        grpc.StatusCode.NOT_FOUND,
        "COLLECTION_NOT_FOUND",
        a.docs.ListDocuments,
        ds.ListDocumentsRequest(collection="secret", page_token=forged),
    )


def test_dedup_and_request_id_do_not_reveal_bs_files(two_tenants):
    a, _b, _a_doc, b_doc = two_tenants
    # The same bytes, with B's request_id, in A's collection: a new document of A's own.
    mine = a.upload("mine", SECRET, filename="numbers.txt", request_id="req-1")
    assert mine.id != b_doc.id
    assert mine.status == document_pb2.DOCUMENT_STATUS_PENDING  # not B's READY document
    assert mine.collection == "mine"
    again = a.upload("mine", SECRET, filename="numbers.txt", request_id="req-1")
    assert again.id == mine.id  # A's own idempotency still works


def test_snapshots_are_reused_within_a_tenant_only(two_tenants, database_url):
    a, b, _a_doc, _b_doc = two_tenants
    worker = job_service_pb2_grpc.JobServiceStub(keyed_channel(a.address, auth_keys.KEYS["worker"]))
    # B saves a snapshot for its file; A uploads the same bytes: A's job finds no snapshot.
    b.upload("secret", b"snapshot bytes", filename="s.txt")
    job = worker.ClaimJob(js.ClaimJobRequest(worker_id="w", wait_seconds=2)).job
    worker.ReportStage(js.ReportStageRequest(lease=job.lease, stage=document_pb2.DOCUMENT_STATUS_PARSING))
    worker.ReportStage(js.ReportStageRequest(lease=job.lease, stage=document_pb2.DOCUMENT_STATUS_CHUNKING))

    def snapshot():
        yield js.SaveSnapshotRequest(header=js.SnapshotHeader(lease=job.lease, pipeline_version="v1", chunk_count=1))
        yield js.SaveSnapshotRequest(chunks=js.ChunkBatch(chunks=[js.Chunk(index=0, text="poisoned by B")]))

    worker.SaveSnapshot(snapshot())
    a.upload("mine", b"snapshot bytes", filename="s.txt")
    job_a = worker.ClaimJob(js.ClaimJobRequest(worker_id="w2", wait_seconds=2)).job
    assert job_a.collection == "mine"
    with pytest.raises(grpc.RpcError) as err:
        list(worker.ReadSnapshot(js.ReadSnapshotRequest(lease=job_a.lease, pipeline_version="v1")))
    assert reason_of(err.value) == "SNAPSHOT_NOT_FOUND"


def test_search_never_crosses_tenants(two_tenants, search_server_address, tenant_b):
    _a, _b, _a_doc, b_doc = two_tenants
    search_a = search_service_pb2_grpc.SearchServiceStub(keyed_channel(search_server_address, auth_keys.KEYS["client"]))
    search_b = search_service_pb2_grpc.SearchServiceStub(keyed_channel(search_server_address, tenant_b.keys["reader"]))
    request = ss.SearchRequest(collection="secret", query="confidential quarterly numbers", top_k=5, mode=ss.SEARCH_MODE_KEYWORD)
    assert [h.document_id for h in search_b.Search(request).hits] == [b_doc.id]
    expect(grpc.StatusCode.NOT_FOUND, "COLLECTION_NOT_FOUND", search_a.Search, request)
    # The same collection name exists in both tenants: each sees its own (empty) one.
    shared = ss.SearchRequest(collection="shared-name", query="confidential", top_k=5, mode=ss.SEARCH_MODE_KEYWORD)
    assert list(search_a.Search(shared).hits) == [] and list(search_b.Search(shared).hits) == []
    # An admin naming tenant b sees B's; naming a missing tenant gets NOT_FOUND.
    admin_b = search_service_pb2_grpc.SearchServiceStub(
        keyed_channel(search_server_address, auth_keys.KEYS["admin"], extra_metadata=[("x-sluice-tenant", "b")])
    )
    assert [h.document_id for h in admin_b.Search(request).hits] == [b_doc.id]
    # A client may not name another tenant.
    client_as_b = search_service_pb2_grpc.SearchServiceStub(
        keyed_channel(search_server_address, auth_keys.KEYS["client"], extra_metadata=[("x-sluice-tenant", "b")])
    )
    expect(grpc.StatusCode.PERMISSION_DENIED, "TENANT_NOT_ALLOWED", client_as_b.Search, request)


def test_row_level_security_holds_searchs_role_even_without_a_tenant_condition(two_tenants, database_url):
    _a, _b, a_doc, _b_doc = two_tenants
    with psycopg.connect(auth_keys.search_url(database_url), autocommit=True) as conn:
        (tenant_a,) = conn.execute("SELECT id FROM tenants WHERE name = 'default'").fetchone()
        # No tenant set: nothing at all.
        for table in ("collections", "documents", "chunks"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
        with conn.transaction():
            conn.execute("SELECT set_config('sluice.tenant_id', %s, true)", (str(tenant_a),))
            collections = {r[0] for r in conn.execute("SELECT name FROM collections")}
            documents = {str(r[0]) for r in conn.execute("SELECT id FROM documents")}
            chunks = [r[0] for r in conn.execute("SELECT text FROM chunks")]
        assert collections == {"mine", "shared-name"}
        assert documents == {a_doc.id}
        assert chunks == ["A's own notes about locks"]
        # Its own role cannot turn the policy off, write, or read content and jobs.
        for statement in (
            "SET row_security = off; SELECT count(*) FROM chunks",
            "DELETE FROM chunks",
            "SELECT count(*) FROM document_contents",
            "SELECT count(*) FROM ingestion_jobs",
        ):
            with pytest.raises(psycopg.Error), conn.transaction():
                conn.execute("SELECT set_config('sluice.tenant_id', %s, true)", (str(tenant_a),))
                for part in statement.split("; "):
                    rows = conn.execute(part).fetchall()
                    assert not rows or rows[0][0] == 0


def test_index_poisoning_is_impossible_without_a_worker_key(two_tenants, ingest_api):
    a, _b, _a_doc, _b_doc = two_tenants
    a.upload("mine", b"a document waiting for a worker", filename="w.txt")
    for key in (auth_keys.KEYS["client"], auth_keys.KEYS["reader"], auth_keys.KEYS["admin"]):
        jobs = job_service_pb2_grpc.JobServiceStub(keyed_channel(ingest_api.address, key))
        expect(
            grpc.StatusCode.PERMISSION_DENIED,
            "ROLE_NOT_ALLOWED",
            jobs.ClaimJob,
            js.ClaimJobRequest(worker_id="evil", wait_seconds=0),
        )
        expect(
            grpc.StatusCode.PERMISSION_DENIED,
            "ROLE_NOT_ALLOWED",
            jobs.FailJob,
            js.FailJobRequest(
                lease=js.LeaseRef(job_id=str(uuid.uuid4()), lease_token=str(uuid.uuid4())),
                error_code="DOCUMENT_CORRUPT",
                error_message="Your file contains malware. Call …",
            ),
        )
    pending = [d for d in a.docs.ListDocuments(ds.ListDocumentsRequest()).documents if d.filename == "w.txt"]
    assert pending[0].status == document_pb2.DOCUMENT_STATUS_PENDING and pending[0].attempts == 0


def test_a_worker_cannot_report_a_made_up_error_code(ingest_api):
    c = Clients(ingest_api.address)
    c.create_collection("docs")
    doc = c.upload("docs", b"some text")
    job = c.claim()
    c.stage(job, document_pb2.DOCUMENT_STATUS_PARSING)
    expect(
        grpc.StatusCode.INVALID_ARGUMENT,
        "UNKNOWN_ERROR_CODE",
        c.jobs.FailJob,
        js.FailJobRequest(lease=job.lease, retryable=False, error_code="CALL_THIS_NUMBER", error_message="pay"),
    )
    long = c.fail(job, retryable=False, code="DOCUMENT_CORRUPT", message="x" * 100_000).document
    assert long.status == document_pb2.DOCUMENT_STATUS_FAILED and len(long.error_message) <= 2000
    assert c.get(doc.id).error_code == "DOCUMENT_CORRUPT"
    c.close()


def test_every_code_the_worker_reports_is_registered():
    import re
    from pathlib import Path

    from sluice_common.worker_errors import REGISTERED

    root = Path(__file__).resolve().parents[2]
    sources = [
        *root.glob("services/worker/src/sluice_worker/**/*.py"),
        *root.glob("libs/common/src/sluice_common/embedders/*.py"),
    ]
    codes = set()
    for path in sources:
        text = path.read_text()
        codes |= set(re.findall(r'code="([A-Z][A-Z0-9_]+)"', text))
        codes |= set(re.findall(r'^([A-Z][A-Z0-9_]+) = "\1"$', text, flags=re.M))
    assert codes, "no codes found: the scan is broken"
    assert codes <= REGISTERED, f"unregistered: {sorted(codes - REGISTERED)}"
