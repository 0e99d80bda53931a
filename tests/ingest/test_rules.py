"""The rules of docs/architecture.md#the-rules, one by one, through real gRPC against a real PostgreSQL."""

from __future__ import annotations

import uuid

import grpc
import psycopg
import pytest
from sluice.v1 import collection_pb2
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js
from sluice_common.errors import reason_of

from .helpers import Clients, chunk_generations


def db(url):
    return psycopg.connect(url, autocommit=True)


def expire_lease(url, job_id):
    with db(url) as conn:
        conn.execute("UPDATE ingestion_jobs SET locked_at = now() - interval '1 hour' WHERE id = %s", (job_id,))


def make_due(url, job_id):
    with db(url) as conn:
        conn.execute("UPDATE ingestion_jobs SET available_at = now() WHERE id = %s", (job_id,))


def chunk_count(url, document_id) -> int:
    with db(url) as conn:
        return conn.execute("SELECT count(*) FROM chunks WHERE document_id = %s", (document_id,)).fetchone()[0]


# ---------------------------------------------------------------- rule 1


def test_rule1_ready_only_after_every_stage(c, database_url):
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    c.stage(job, D.DOCUMENT_STATUS_CHUNKING)
    c.stage(job, D.DOCUMENT_STATUS_EMBEDDING)
    with pytest.raises(grpc.RpcError) as err:
        c.complete(job)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and reason_of(err.value) == "STAGE_NOT_INDEXING"
    assert c.get(doc.id).status == D.DOCUMENT_STATUS_EMBEDDING
    assert chunk_count(database_url, doc.id) == 0
    c.stage(job, D.DOCUMENT_STATUS_INDEXING)
    assert c.complete(job).status == D.DOCUMENT_STATUS_READY
    assert chunk_count(database_url, doc.id) == 2


def test_rule1_a_broken_commit_writes_nothing(c, database_url):
    doc = c.upload()
    job = c.claim()
    c.run_to_indexing(job)

    def lying_header():
        yield js.CompleteJobRequest(header=js.CompleteJobHeader(lease=job.lease, chunk_count=3))
        yield js.CompleteJobRequest(chunks=js.ChunkBatch(chunks=[js.Chunk(index=0, text="x", embedding=[1] * 8)]))

    with pytest.raises(grpc.RpcError) as err:
        c.jobs.CompleteJob(lying_header())
    assert reason_of(err.value) == "CHUNK_COUNT_MISMATCH"

    def wrong_dimensions():
        yield js.CompleteJobRequest(header=js.CompleteJobHeader(lease=job.lease, chunk_count=1))
        yield js.CompleteJobRequest(chunks=js.ChunkBatch(chunks=[js.Chunk(index=0, text="x", embedding=[1] * 5)]))

    with pytest.raises(grpc.RpcError) as err:
        c.jobs.CompleteJob(wrong_dimensions())
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and reason_of(err.value) == "DIMENSION_MISMATCH"
    assert chunk_count(database_url, doc.id) == 0
    assert c.get(doc.id).status == D.DOCUMENT_STATUS_INDEXING


def test_rule1_completion_replaces_previous_chunks(c, database_url):
    doc = c.upload()
    job = c.claim()
    c.run_to_indexing(job)
    c.complete(job, texts=["a", "b", "c"])
    c.docs.ReprocessDocument(ds.ReprocessDocumentRequest(id=doc.id))
    job = c.claim()
    c.run_to_indexing(job)
    c.complete(job, texts=["only one"])
    assert chunk_count(database_url, doc.id) == 1


def search_state(url) -> dict[str, object]:
    """What search reads besides documents: per live generation, the keyword statistics (the sum
    of each term's deltas) beside the same figures recomputed from the chunks, and the
    (generation, document) pairs of document_vectors beside those holding chunks, and the rows
    of keyword_chunks beside the chunks' own columns they copy."""
    with db(url) as conn:
        live = conn.execute(
            "SELECT s.generation_id, s.term, sum(s.df) FROM keyword_stats s GROUP BY 1, 2 HAVING sum(s.df) <> 0"
        ).fetchall()
        recomputed = conn.execute(
            "SELECT c.generation_id, l.lexeme, count(*) FROM chunks c, unnest(c.search_tsv) l GROUP BY 1, 2"
            " UNION ALL SELECT c.generation_id, '', count(*) FROM chunks c GROUP BY 1"
        ).fetchall()
        live_generations = {
            r[0] for r in conn.execute("SELECT id FROM collection_generations WHERE state IN ('ACTIVE', 'BUILDING')")
        }
        vectors = conn.execute("SELECT generation_id, document_id FROM document_vectors").fetchall()
        chunked = conn.execute("SELECT DISTINCT generation_id, document_id FROM chunks").fetchall()
        # What keyword search scores (migration 0028): each chunk's own columns, nothing else.
        keyword_rows = conn.execute(
            "SELECT chunk_id, generation_id, tenant_id, search_bm25::text, terms::text FROM keyword_chunks"
        ).fetchall()
        chunk_rows = conn.execute(
            "SELECT id, generation_id, tenant_id, search_bm25::text, strip(search_tsv)::text FROM chunks"
        ).fetchall()
    return {
        "keyword_stats": {(g, t): int(n) for g, t, n in live if g in live_generations},
        "recomputed": {(g, t): int(n) for g, t, n in recomputed if g in live_generations},
        "document_vectors": set(vectors),
        "chunked": set(chunked),
        "keyword_chunks": sorted(keyword_rows),
        "chunks": sorted(chunk_rows),
    }


def term_df(url, word: str) -> int:
    """How many chunks the keyword statistics count for `word`, over every generation."""
    with db(url) as conn:
        return int(
            conn.execute(
                "SELECT coalesce(sum(s.df), 0) FROM keyword_stats s"
                " WHERE s.term IN (SELECT lexeme FROM unnest(to_tsvector('sluice_text', %s)))",
                (word,),
            ).fetchone()[0]
        )


def test_rule1_reprocess_takes_the_chunks_of_every_generation(c, database_url):
    """ReprocessDocument moves a READY document to PENDING and deletes its chunks of every
    generation (the ACTIVE one and a reindex's BUILDING one) in that transaction, so a document
    that is not READY holds none; the keyword statistics and document_vectors lose it with them."""
    reprocessed, kept = c.upload(content=b"reprocessed"), c.upload(content=b"kept")
    for text in ("zephyr river", "kept lake"):
        job = c.claim()
        c.run_to_indexing(job)
        c.complete(job, texts=[text, text + " again"])
    # A reindex: the reprocessed document is embedded into generation 2, the kept one's EMBED job
    # stays open (claimed, not completed), so generation 2 stays BUILDING.
    hashing_v2 = collection_pb2.EmbedderConfig(
        provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v2", dimensions=16
    )
    c.docs.ReindexCollection(ds.ReindexCollectionRequest(name="docs", embedder=hashing_v2))
    embeds = {job.document_id: job for job in (c.claim(), c.claim())}
    assert set(embeds) == {reprocessed.id, kept.id} and all(j.kind == js.JOB_KIND_EMBED for j in embeds.values())
    c.complete(embeds[reprocessed.id], texts=["zephyr river"], dimensions=16)
    assert chunk_generations(database_url, reprocessed.id) == {1: 2, 2: 1}
    assert term_df(database_url, "zephyr") == 3

    pending = c.docs.ReprocessDocument(ds.ReprocessDocumentRequest(id=reprocessed.id))
    assert pending.status == D.DOCUMENT_STATUS_PENDING
    assert chunk_generations(database_url, reprocessed.id) == {}
    assert chunk_generations(database_url, kept.id) == {1: 2}
    assert term_df(database_url, "zephyr") == 0
    state = search_state(database_url)
    assert state["keyword_stats"] == state["recomputed"]
    assert state["document_vectors"] == state["chunked"]
    assert state["keyword_chunks"] == state["chunks"]
    assert {document for _, document in state["document_vectors"]} == {uuid.UUID(kept.id)}

    # Its next commit brings it back, into the ACTIVE generation (and a fresh EMBED job for 2).
    job = c.claim()
    assert job.document_id == reprocessed.id and job.kind == js.JOB_KIND_INGEST
    c.run_to_indexing(job)
    assert c.complete(job, texts=["zephyr sea"]).status == D.DOCUMENT_STATUS_READY
    assert chunk_generations(database_url, reprocessed.id) == {1: 1}
    assert term_df(database_url, "zephyr") == 1


def test_rule1_only_ready_documents_hold_chunks(c, database_url):
    """After each step of a mix of uploads, commits, failures, retries, reprocesses, chunks
    disabled and edited (docs/chunks.md) and a deletion: every chunk, enabled or disabled,
    belongs to a READY document, every READY document has chunks, and the keyword statistics and
    document_vectors are those of the enabled chunks."""

    def check(step: str) -> None:
        with db(database_url) as conn:
            outside = conn.execute(
                "SELECT d.status::text, count(*) FROM (SELECT document_id FROM chunks"
                " UNION ALL SELECT document_id FROM disabled_chunks) c JOIN documents d ON d.id = c.document_id"
                " WHERE d.status <> 'READY' GROUP BY 1"
            ).fetchall()
            bare = conn.execute(
                "SELECT count(*) FROM documents d WHERE d.status = 'READY'"
                " AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id)"
                " AND NOT EXISTS (SELECT 1 FROM disabled_chunks c WHERE c.document_id = d.id)"
            ).fetchone()[0]
        assert (outside, bare) == ([], 0), step
        state = search_state(database_url)
        assert state["keyword_stats"] == state["recomputed"], step
        assert state["document_vectors"] == state["chunked"], step
        assert state["keyword_chunks"] == state["chunks"], step

    def commit(document_id: str, texts: list[str]) -> None:
        job = c.claim(wait=5)
        assert job.document_id == document_id
        c.run_to_indexing(job)
        assert c.complete(job, texts=texts).status == D.DOCUMENT_STATUS_READY

    def fail(document_id: str, retryable: bool) -> None:
        job = c.claim(wait=5)
        assert job.document_id == document_id
        c.stage(job, D.DOCUMENT_STATUS_PARSING)
        c.fail(job, retryable=retryable)

    first, second, third = (c.upload(content=f"document {n}".encode()).id for n in range(3))
    check("uploaded")
    commit(first, ["first one", "first two"])
    commit(second, ["second one"])
    fail(third, retryable=False)
    check("two READY, one FAILED")
    listed = c.docs.ListChunks(ds.ListChunksRequest(document_id=first)).chunks
    c.docs.UpdateChunk(ds.UpdateChunkRequest(chunk_id=listed[1].id, enabled=False))
    (only,) = c.docs.ListChunks(ds.ListChunksRequest(document_id=second)).chunks
    c.docs.UpdateChunk(ds.UpdateChunkRequest(chunk_id=only.id, text="second one, edited"))
    check("a chunk disabled, one edited")
    c.docs.UpdateChunk(ds.UpdateChunkRequest(chunk_id=only.id, enabled=False))
    check("every chunk of a document disabled")
    c.docs.UpdateChunk(ds.UpdateChunkRequest(chunk_id=only.id, enabled=True))
    c.docs.ReprocessDocument(ds.ReprocessDocumentRequest(id=first))
    check("reprocessed")
    fail(first, retryable=False)  # a reprocess that ends FAILED
    check("reprocess failed")
    c.docs.RetryDocument(ds.RetryDocumentRequest(id=first))
    commit(first, ["first again"])
    c.docs.RetryDocument(ds.RetryDocumentRequest(id=third))
    commit(third, ["third at last"])
    check("retried")
    c.docs.ReprocessDocument(ds.ReprocessDocumentRequest(id=second))
    fail(second, retryable=True)  # back to PENDING, due again shortly
    check("reprocess waiting for a retry")
    commit(second, ["second again", "second two"])
    c.docs.DeleteDocument(ds.DeleteDocumentRequest(id=third))
    check("reprocessed, retried and deleted")
    assert {c.get(d).status for d in (first, second)} == {D.DOCUMENT_STATUS_READY}


def test_rule1_migration_0027_takes_the_chunks_a_reprocess_left(c, database_url):
    """A database from before the reprocess deleted chunks may hold a document that left READY
    with its chunks: migration 0027 deletes them, and the statistics follow."""
    from alembic import command
    from sluice_ingest.migrations import alembic_config

    kept, left = (c.upload(content=f"document {n}".encode()).id for n in range(2))
    for document_id, texts in ((kept, ["kept one", "kept two"]), (left, ["leftover one", "leftover two"])):
        job = c.claim(wait=5)
        assert job.document_id == document_id
        c.run_to_indexing(job)
        c.complete(job, texts=texts)
    config = alembic_config(database_url)
    command.downgrade(config, "0026")
    with db(database_url) as conn:  # what a reprocess (to PENDING) or its failure left before
        conn.execute("UPDATE documents SET status = 'FAILED', error_message = 'x' WHERE id = %s", (left,))
    assert chunk_count(database_url, left) == 2 and term_df(database_url, "leftover") == 2

    command.upgrade(config, "head")
    assert (chunk_count(database_url, kept), chunk_count(database_url, left)) == (2, 0)
    assert term_df(database_url, "leftover") == 0
    state = search_state(database_url)
    assert state["keyword_stats"] == state["recomputed"]
    assert state["document_vectors"] == state["chunked"]
    assert state["keyword_chunks"] == state["chunks"]


# ---------------------------------------------------------------- rule 2


def test_rule2_status_before_action_survives_a_crash(c, database_url):
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    c.stage(job, D.DOCUMENT_STATUS_CHUNKING)
    # The worker dies here: nothing more is reported. The database shows the last stage begun.
    with db(database_url) as conn:
        assert conn.execute("SELECT status::text FROM documents WHERE id = %s", (doc.id,)).fetchone()[0] == "CHUNKING"
    expire_lease(database_url, job.lease.job_id)
    second = c.claim("w2")
    assert second.lease.job_id == job.lease.job_id and second.attempt == 2
    history = c.get(doc.id).attempt_history
    assert history[0].stage == D.DOCUMENT_STATUS_CHUNKING and history[0].outcome == D.ATTEMPT_OUTCOME_LEASE_EXPIRED
    assert history[1].outcome == D.ATTEMPT_OUTCOME_RUNNING and history[1].worker_id == "w2"


def test_rule2_stages_cannot_go_backwards_or_skip(c):
    doc = c.upload()
    job = c.claim()
    with pytest.raises(grpc.RpcError) as err:
        c.stage(job, D.DOCUMENT_STATUS_INDEXING)  # PENDING → INDEXING skips the pipeline
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and reason_of(err.value) == "ILLEGAL_TRANSITION"
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    c.stage(job, D.DOCUMENT_STATUS_CHUNKING)
    with pytest.raises(grpc.RpcError):
        c.stage(job, D.DOCUMENT_STATUS_PARSING)
    with pytest.raises(grpc.RpcError) as err:
        c.stage(job, D.DOCUMENT_STATUS_READY)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert c.get(doc.id).status == D.DOCUMENT_STATUS_CHUNKING


def test_rule2_progress_updates_within_a_stage(c):
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    c.stage(job, D.DOCUMENT_STATUS_CHUNKING)
    c.stage(job, D.DOCUMENT_STATUS_EMBEDDING, 0, 10)
    c.stage(job, D.DOCUMENT_STATUS_EMBEDDING, 7, 10)
    progress = c.get(doc.id).progress
    assert (progress.stage, progress.done, progress.total) == (D.DOCUMENT_STATUS_EMBEDDING, 7, 10)


def test_resume_from_snapshot_skips_parsing(c):
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    c.stage(job, D.DOCUMENT_STATUS_CHUNKING)

    def snapshot():
        yield js.SaveSnapshotRequest(header=js.SnapshotHeader(lease=job.lease, pipeline_version="v1", chunk_count=2))
        yield js.SaveSnapshotRequest(
            chunks=js.ChunkBatch(chunks=[js.Chunk(index=0, text="a", page_number=1), js.Chunk(index=1, text="b", page_number=2)])
        )

    assert c.jobs.SaveSnapshot(snapshot()).chunk_count == 2
    c.stage(job, D.DOCUMENT_STATUS_EMBEDDING)
    c.fail(job, retryable=True)
    job = c.claim(wait=5)
    with pytest.raises(grpc.RpcError) as err:
        list(c.jobs.ReadSnapshot(js.ReadSnapshotRequest(lease=job.lease, pipeline_version="v2")))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    chunks = [ch for r in c.jobs.ReadSnapshot(js.ReadSnapshotRequest(lease=job.lease, pipeline_version="v1")) for ch in r.chunks]
    assert [(ch.index, ch.text, ch.page_number) for ch in chunks] == [(0, "a", 1), (1, "b", 2)]
    c.stage(job, D.DOCUMENT_STATUS_EMBEDDING)  # PENDING → EMBEDDING: allowed only as a resume
    assert c.get(doc.id).status == D.DOCUMENT_STATUS_EMBEDDING


# ---------------------------------------------------------------- rule 4


def test_rule4_failed_keeps_message_and_new_stage_clears_stale_one(c):
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    c.fail(job, retryable=True, message="embedding provider answered 503")
    waiting = c.get(doc.id)
    assert waiting.status == D.DOCUMENT_STATUS_PENDING
    assert waiting.error_message == ("attempt 1/3 failed temporarily, will retry automatically: embedding provider answered 503")
    assert waiting.error_code == "EMBEDDING_UNAVAILABLE"
    job = c.claim(wait=5)
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    advanced = c.get(doc.id)
    assert advanced.error_message == "" and advanced.error_code == ""
    c.fail(job, retryable=False, code="PDF_ENCRYPTED", message="the PDF is encrypted; upload it without a password")
    failed = c.get(doc.id)
    assert failed.status == D.DOCUMENT_STATUS_FAILED
    assert failed.error_message == "the PDF is encrypted; upload it without a password"
    assert failed.error_code == "PDF_ENCRYPTED"


# ---------------------------------------------------------------- rule 5


def test_rule5_upload_creates_document_and_job_together(c, database_url):
    doc = c.upload()
    assert (doc.status, doc.job_status) == (D.DOCUMENT_STATUS_PENDING, D.INGESTION_JOB_STATUS_PENDING)
    with db(database_url) as conn:
        row = conn.execute(
            "SELECT d.status::text, j.status::text, j.attempts FROM documents d JOIN ingestion_jobs j"
            " ON j.document_id = d.id WHERE d.id = %s",
            (doc.id,),
        ).fetchone()
    assert row == ("PENDING", "PENDING", 0)


# ---------------------------------------------------------------- rule 6


def test_rule6_claim_respects_available_at_and_max_attempts(c, database_url):
    doc = c.upload()
    with db(database_url) as conn:
        conn.execute("UPDATE ingestion_jobs SET available_at = now() + interval '1 hour'")
    assert c.claim() is None
    with db(database_url) as conn:
        conn.execute("UPDATE ingestion_jobs SET available_at = now()")
    job = c.claim()
    assert job.document_id == doc.id and job.attempt == 1 and job.lease.lease_token
    with db(database_url) as conn:
        row = conn.execute("SELECT status::text, attempts, locked_at IS NOT NULL, locked_by FROM ingestion_jobs").fetchone()
    assert row == ("RUNNING", 1, True, "w1")
    assert c.claim() is None  # a live lease is not claimable


def test_rule6_expired_lease_is_reclaimed_with_a_new_token(c, database_url):
    from prometheus_client import REGISTRY

    def reclaimed():
        return REGISTRY.get_sample_value("sluice_job_lease_expiries_total", {"outcome": "reclaimed"}) or 0

    c.upload()
    first = c.claim("w1")
    expire_lease(database_url, first.lease.job_id)
    before = reclaimed()
    second = c.claim("w2")
    assert reclaimed() == before + 1
    assert second.lease.job_id == first.lease.job_id
    assert second.lease.lease_token != first.lease.lease_token
    assert second.attempt == 2


def test_rule6_renewing_keeps_the_lease(c, database_url):
    c.upload()
    job = c.claim()
    with db(database_url) as conn:
        conn.execute("UPDATE ingestion_jobs SET locked_at = now() - interval '4 seconds'")
    response = c.jobs.RenewLease(js.RenewLeaseRequest(lease=job.lease))
    assert not response.cancelled and response.HasField("lease_expire_time")
    with db(database_url) as conn:
        fresh = conn.execute("SELECT locked_at > now() - interval '1 second' FROM ingestion_jobs").fetchone()[0]
    assert fresh
    assert c.claim("w2") is None


# ---------------------------------------------------------------- rule 7


def test_rule7_backoff_follows_formula_and_cap(ingest_api_factory, database_url):
    api = ingest_api_factory(retry_delay_seconds=40.0)
    c = Clients(api.address)
    c.create_collection(max_attempts=6)
    doc = c.upload()
    delays = []
    for attempt in range(1, 6):
        job = c.claim()
        assert job.attempt == attempt
        result = c.fail(job, retryable=True)
        assert result.will_retry
        assert result.document.error_message.startswith(f"attempt {attempt}/6 failed temporarily, will retry")
        with db(database_url) as conn:
            delays.append(
                conn.execute("SELECT extract(epoch FROM available_at - updated_at)::float FROM ingestion_jobs").fetchone()[0]
            )
        assert c.claim() is None  # not due yet
        make_due(database_url, job.lease.job_id)
    assert delays == [40, 80, 160, 300, 300]
    job = c.claim()
    result = c.fail(job, retryable=True, message="still down")
    assert not result.will_retry
    final = c.get(doc.id)
    assert (final.status, final.job_status) == (D.DOCUMENT_STATUS_FAILED, D.INGESTION_JOB_STATUS_FAILED)
    assert final.error_message == "failed after 6 attempts: still down"
    assert [a.outcome for a in final.attempt_history] == [D.ATTEMPT_OUTCOME_RETRYABLE_FAILURE] * 6
    c.close()


def test_rule7_permanent_error_fails_at_once(c):
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    result = c.fail(job, retryable=False, code="DOCUMENT_CORRUPT", message="the file is not a valid PDF")
    assert not result.will_retry
    final = c.get(doc.id)
    assert final.status == D.DOCUMENT_STATUS_FAILED and final.attempts == 1
    assert final.attempt_history[0].outcome == D.ATTEMPT_OUTCOME_PERMANENT_FAILURE
    assert final.attempt_history[0].stage == D.DOCUMENT_STATUS_PARSING


# ---------------------------------------------------------------- rule 8


def test_rule8_exhausted_expired_lease_fails_the_document(ingest_api_factory, database_url):
    api = ingest_api_factory()
    c = Clients(api.address)
    c.create_collection(max_attempts=1)
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    expire_lease(database_url, job.lease.job_id)
    assert c.claim("w2") is None  # the call converges instead of claiming
    final = c.get(doc.id)
    assert (final.status, final.job_status) == (D.DOCUMENT_STATUS_FAILED, D.INGESTION_JOB_STATUS_FAILED)
    assert final.error_message == "worker lease expired and the maximum number of attempts was reached"
    assert final.attempt_history[0].outcome == D.ATTEMPT_OUTCOME_LEASE_EXPIRED
    c.close()


def test_rule8_exhausted_expired_lease_on_ready_document_succeeds(ingest_api_factory, database_url):
    api = ingest_api_factory()
    c = Clients(api.address)
    c.create_collection(max_attempts=1)
    doc = c.upload()
    other = c.upload()
    job = c.claim()
    # The crash hit the window after the document became READY but before the job was closed.
    with db(database_url) as conn:
        conn.execute("UPDATE documents SET status = 'READY' WHERE id = %s", (job.document_id,))
    expire_lease(database_url, job.lease.job_id)
    assert c.claim("w2") is None  # this call converged; it claims nothing
    final = c.get(job.document_id)
    assert (final.status, final.job_status) == (D.DOCUMENT_STATUS_READY, D.INGESTION_JOB_STATUS_SUCCEEDED)
    assert final.error_message == ""
    nxt = c.claim("w2")  # the next call claims normally
    assert nxt is not None and nxt.document_id in {doc.id, other.id} - {job.document_id}
    c.close()


# ---------------------------------------------------------------- fencing


def test_stale_worker_is_fenced_off(c, database_url):
    doc = c.upload()
    stale = c.claim("w1")
    c.run_to_indexing(stale)
    expire_lease(database_url, stale.lease.job_id)
    fresh = c.claim("w2")
    assert fresh.attempt == 2
    before = c.get(doc.id)

    calls = {
        "CompleteJob": lambda: c.complete(stale),
        "ReportStage": lambda: c.stage(stale, D.DOCUMENT_STATUS_PARSING),
        "FailJob": lambda: c.fail(stale, retryable=False),
        "RenewLease": lambda: c.jobs.RenewLease(js.RenewLeaseRequest(lease=stale.lease)),
        "ReleaseJob": lambda: c.jobs.ReleaseJob(js.ReleaseJobRequest(lease=stale.lease)),
        "ReadDocumentContent": lambda: list(c.jobs.ReadDocumentContent(js.ReadDocumentContentRequest(lease=stale.lease))),
    }
    for name, call in calls.items():
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION, name
        assert reason_of(err.value) == "LEASE_NOT_HELD", name
    after = c.get(doc.id)
    assert chunk_count(database_url, doc.id) == 0
    assert (after.status, after.job_status, after.attempts) == (before.status, before.job_status, before.attempts)
    # The new holder is unaffected and can finish.
    c.run_to_indexing(fresh)
    assert c.complete(fresh).status == D.DOCUMENT_STATUS_READY


def test_release_hands_back_without_charging_an_attempt(c):
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    released = c.jobs.ReleaseJob(js.ReleaseJobRequest(lease=job.lease)).document
    assert (released.status, released.job_status, released.attempts) == (
        D.DOCUMENT_STATUS_PENDING,
        D.INGESTION_JOB_STATUS_PENDING,
        0,
    )
    again = c.claim()
    assert again.document_id == doc.id and again.attempt == 1
    assert [a.outcome for a in c.get(doc.id).attempt_history] == [D.ATTEMPT_OUTCOME_RELEASED, D.ATTEMPT_OUTCOME_RUNNING]
