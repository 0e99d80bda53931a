"""Index generations (docs/architecture.md#index-generations, issue 13): ReindexCollection, the switch, cancellation,
EMBED jobs through the same leased JobService path (fencing, retries, rule 8), and what happens
to documents uploaded, deleted or retried during a reindex. Real PostgreSQL and gRPC; the
worker is played by hand through JobService so each step is observable."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import psycopg
import pytest
from alembic import command
from helpers import expect_error, wait_for
from sluice.v1 import collection_pb2
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js
from sluice_common import vector_index
from sluice_common.db import open_pool
from sluice_ingest.migrations import alembic_config
from sluice_ingest.store.generations import INDEX_LOCK_CLASS, GenerationStore

from .helpers import Clients, D, chunk_generations

G = collection_pb2
FAST = {"generation_sweep_seconds": 0.05, "retired_generation_grace_seconds": 0.3}


def hashing(model: str = "hashing-v2", dimensions: int = 16) -> collection_pb2.EmbedderConfig:
    return collection_pb2.EmbedderConfig(provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model=model, dimensions=dimensions)


def reindex(c: Clients, embedder=None, name: str = "docs") -> collection_pb2.Collection:
    return c.docs.ReindexCollection(ds.ReindexCollectionRequest(name=name, embedder=embedder or hashing()))


def collection(c: Clients, name: str = "docs") -> collection_pb2.Collection:
    return c.docs.GetCollection(ds.GetCollectionRequest(name=name))


def states(col: collection_pb2.Collection) -> list[tuple[int, int]]:
    return [(g.number, g.state) for g in col.generations]


def switched_collection(c: Clients, name: str = "docs") -> collection_pb2.Collection:
    """The collection once generation 2 is ACTIVE and 1 RETIRED. The last EMBED commit switches
    it before answering, unless the sweep (every 50 ms here) was building the generation's index
    at that moment: then the sweep switches it a moment later (GenerationStore.try_switch)."""
    return wait_for(
        lambda: (
            (col := collection(c, name))
            and states(col) == [(1, G.GENERATION_STATE_RETIRED), (2, G.GENERATION_STATE_ACTIVE)]
            and col
        ),
        what="generation 2 ACTIVE",
    )


def ready_document(c: Clients, text: str) -> str:
    doc = c.upload(content=text.encode())
    job = c.claim()
    assert job.kind == js.JOB_KIND_INGEST and job.document_id == doc.id
    c.run_to_indexing(job)
    assert c.complete(job, [text, text + " again"]).status == D.DOCUMENT_STATUS_READY
    return doc.id


def event_count(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM document_events").fetchone()[0]


def hnsw_indexes(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'chunks_embedding_%'")}


def generation_ids(url: str) -> dict[int, int]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT number, id FROM collection_generations").fetchall())


def test_reindex_embeds_snapshots_into_a_new_generation_and_switches(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory(**FAST).address)
    c.create_collection("docs")
    first, second = ready_document(c, "alpha text"), ready_document(c, "beta text")
    before = event_count(database_url)

    building = reindex(c)
    assert states(building) == [(1, G.GENERATION_STATE_ACTIVE), (2, G.GENERATION_STATE_BUILDING)]
    new = building.generations[1]
    assert (new.documents_total, new.documents_ready, new.documents_pending) == (2, 0, 2)
    assert new.embedder.model == "hashing-v2" and new.embedder.dimensions == 16
    assert building.embedder.dimensions == 8  # search still reads generation 1

    jobs = [c.claim(), c.claim()]
    assert {j.document_id for j in jobs} == {first, second}
    for job in jobs:
        assert job.kind == js.JOB_KIND_EMBED and job.generation == 2
        assert job.embedder.model == "hashing-v2" and job.embedder.dimensions == 16
        # Progress of an EMBED job is its own: the document stays READY, no event is written.
        c.stage(job, D.DOCUMENT_STATUS_EMBEDDING, 1, 2)
        c.stage(job, D.DOCUMENT_STATUS_INDEXING, 0, 2)
        assert c.get(job.document_id).status == D.DOCUMENT_STATUS_READY
    # Vectors of the old dimension are refused: the job embeds for generation 2.
    expect_error(lambda: c.complete(jobs[0], ["x"], dimensions=8), grpc.StatusCode.INVALID_ARGUMENT, "DIMENSION_MISMATCH")
    assert c.complete(jobs[0], ["alpha text new"], dimensions=16).status == D.DOCUMENT_STATUS_READY
    assert states(collection(c)) == [(1, G.GENERATION_STATE_ACTIVE), (2, G.GENERATION_STATE_BUILDING)]
    assert c.complete(jobs[1], ["beta text new"], dimensions=16).status == D.DOCUMENT_STATUS_READY

    switched = switched_collection(c)
    assert switched.embedder.model == "hashing-v2" and switched.embedder.dimensions == 16
    assert switched.generations[1].documents_ready == 2 and switched.generations[1].HasField("activate_time")
    assert event_count(database_url) == before  # the reindex wrote no document event
    assert chunk_generations(database_url, first) == {1: 2, 2: 1}
    # After the grace period the sweep drops generation 1's chunks and index.
    ids = generation_ids(database_url)
    wait_for(lambda: chunk_generations(database_url, first) == {2: 1})
    wait_for(lambda: vector_index.index_name(ids[1]) not in hnsw_indexes(database_url))
    assert vector_index.index_name(ids[2]) in hnsw_indexes(database_url)
    # A new upload now runs for generation 2 only.
    third = c.upload(content=b"gamma")
    job = c.claim()
    assert job.document_id == third.id and job.kind == js.JOB_KIND_INGEST and job.generation == 2
    assert job.embedder.dimensions == 16
    c.run_to_indexing(job)
    c.complete(job, ["gamma"], dimensions=16)
    assert chunk_generations(database_url, third.id) == {2: 1}


def test_documents_uploaded_retried_or_deleted_during_a_reindex(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory(**FAST).address)
    c.create_collection("docs", max_attempts=1)
    kept, deleted = ready_document(c, "kept"), ready_document(c, "deleted")
    failed = c.upload(content=b"fails")
    job = c.claim()
    c.fail(job, retryable=False)
    reindex(c)
    # Uploaded during the reindex: its INGEST commit (generation 1) adds its EMBED job at once.
    fresh = c.upload(content=b"fresh")
    c.docs.RetryDocument(ds.RetryDocumentRequest(id=failed.id))
    c.docs.DeleteDocument(ds.DeleteDocumentRequest(id=deleted))
    claimed = {}
    while (job := c.claim()) is not None:
        claimed[(job.document_id, job.kind)] = job
    assert set(claimed) == {(kept, js.JOB_KIND_EMBED), (fresh.id, js.JOB_KIND_INGEST), (failed.id, js.JOB_KIND_INGEST)}
    for key in [(fresh.id, js.JOB_KIND_INGEST), (failed.id, js.JOB_KIND_INGEST)]:
        c.run_to_indexing(claimed[key])
        assert claimed[key].generation == 1
        c.complete(claimed[key], ["text of " + key[0]], dimensions=8)
    c.complete(claimed[(kept, js.JOB_KIND_EMBED)], ["kept"], dimensions=16)
    assert states(collection(c))[1] == (2, G.GENERATION_STATE_BUILDING)  # two READY documents still to embed
    later = {}
    while (job := c.claim()) is not None:
        later[job.document_id] = job
    assert set(later) == {fresh.id, failed.id} and all(j.kind == js.JOB_KIND_EMBED for j in later.values())
    for job in later.values():
        c.complete(job, ["again"], dimensions=16)
    switched_collection(c)
    for document_id in (kept, fresh.id, failed.id):
        assert 2 in chunk_generations(database_url, document_id)
    assert chunk_generations(database_url, deleted) == {}


def test_an_ingest_commit_that_loses_the_switch_runs_again_for_the_new_generation(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory(**FAST).address)
    c.create_collection("docs")
    ready = ready_document(c, "ready")
    late = c.upload(content=b"late")
    ingest = c.claim()
    assert ingest.document_id == late.id and ingest.generation == 1
    c.run_to_indexing(ingest)
    reindex(c)
    embed = c.claim()
    assert embed.document_id == ready and embed.kind == js.JOB_KIND_EMBED
    c.complete(embed, ["ready"], dimensions=16)  # every READY document is in generation 2: it switches
    switched_collection(c)
    expect_error(lambda: c.complete(ingest, ["late"], dimensions=8), grpc.StatusCode.FAILED_PRECONDITION, "LEASE_NOT_HELD")
    assert c.get(late.id).status == D.DOCUMENT_STATUS_PENDING
    again = c.claim()
    assert again.document_id == late.id and again.generation == 2 and again.embedder.dimensions == 16
    assert again.attempt == 1  # the handed-back attempt was not charged
    c.run_to_indexing(again)
    assert c.complete(again, ["late"], dimensions=16).status == D.DOCUMENT_STATUS_READY
    assert chunk_generations(database_url, late.id) == {2: 1}


def test_cancel_drops_the_building_generation_its_jobs_chunks_and_index(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory(**FAST).address)
    c.create_collection("docs")
    first, _ = ready_document(c, "one"), ready_document(c, "two")
    reindex(c)
    ids = generation_ids(database_url)
    # Bulk-loaded first: no index until the generation is complete (docs/search.md, "Vector precision").
    assert vector_index.index_name(ids[2]) not in hnsw_indexes(database_url)
    done = c.claim()
    running = c.claim()
    c.complete(done, ["one"], dimensions=16)
    assert sum(chunk_generations(database_url, done.document_id).get(2, 0) for _ in [0]) == 1
    cancelled = c.docs.CancelReindex(ds.CancelReindexRequest(name="docs"))
    assert states(cancelled) == [(1, G.GENERATION_STATE_ACTIVE), (2, G.GENERATION_STATE_CANCELLED)]
    assert vector_index.index_name(ids[2]) not in hnsw_indexes(database_url)
    assert chunk_generations(database_url, done.document_id) == {1: 2}
    # The running EMBED job is gone: its next lease renewal says cancelled, its commit is refused.
    assert c.jobs.RenewLease(js.RenewLeaseRequest(lease=running.lease)).cancelled
    expect_error(lambda: c.complete(running, ["two"], dimensions=16), grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND")
    assert c.get(first).status == D.DOCUMENT_STATUS_READY and c.claim() is None
    expect_error(
        lambda: c.docs.CancelReindex(ds.CancelReindexRequest(name="docs")),
        grpc.StatusCode.FAILED_PRECONDITION,
        "NO_REINDEX_IN_PROGRESS",
    )
    # A new reindex after a cancel is generation 3.
    assert states(reindex(c))[-1] == (3, G.GENERATION_STATE_BUILDING)


def test_delete_collection_during_a_reindex_removes_every_generation(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory(**FAST).address)
    c.create_collection("docs")
    ready_document(c, "one")
    reindex(c)
    job = c.claim()
    c.docs.DeleteCollection(ds.DeleteCollectionRequest(name="docs", force=True))
    assert hnsw_indexes(database_url) == set()
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM collection_generations").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM ingestion_jobs").fetchone()[0] == 0
    assert c.jobs.RenewLease(js.RenewLeaseRequest(lease=job.lease)).cancelled


def test_embed_jobs_are_fenced_by_their_lease(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory(lease_seconds=0.5, **FAST).address)
    c.create_collection("docs")
    document = ready_document(c, "fenced")
    reindex(c)
    stale = c.claim("w1")
    time.sleep(0.7)
    fresh = c.claim("w2")
    assert fresh.document_id == document and fresh.attempt == 2 and fresh.kind == js.JOB_KIND_EMBED
    assert c.get(document).status == D.DOCUMENT_STATUS_READY  # a takeover does not touch the document
    for call in (
        lambda: c.stage(stale, D.DOCUMENT_STATUS_EMBEDDING),
        lambda: c.complete(stale, ["fenced"], dimensions=16),
        lambda: c.fail(stale, retryable=True),
    ):
        expect_error(call, grpc.StatusCode.FAILED_PRECONDITION, "LEASE_NOT_HELD")
    assert c.complete(fresh, ["fenced"], dimensions=16).status == D.DOCUMENT_STATUS_READY
    switched_collection(c)


def test_an_embed_job_that_fails_for_good_holds_the_switch_until_retried(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory(lease_seconds=0.4, **FAST).address)
    c.create_collection("docs", max_attempts=1)
    ok, stuck = ready_document(c, "ok"), ready_document(c, "stuck")
    reindex(c)
    jobs = {j.document_id: j for j in (c.claim(), c.claim())}
    c.complete(jobs[ok], ["ok"], dimensions=16)
    time.sleep(0.6)
    # Rule 8 for an EMBED job: its lease expired with no attempt left → FAILED, the document untouched.
    assert c.claim() is None
    document = c.get(stuck)
    assert document.status == D.DOCUMENT_STATUS_READY and document.error_message == ""
    time.sleep(0.3)  # a few sweeps: none switches
    building = collection(c)
    assert states(building) == [(1, G.GENERATION_STATE_ACTIVE), (2, G.GENERATION_STATE_BUILDING)]
    generation = building.generations[1]
    assert (generation.documents_total, generation.documents_ready, generation.documents_failed) == (2, 1, 1)
    assert [f.document_id for f in generation.failures] == [stuck]
    assert generation.failures[0].error_code == "LEASE_EXPIRED"
    assert "maximum number of attempts" in generation.failures[0].error_message
    assert chunk_generations(database_url, stuck) == {1: 2}  # still searchable in generation 1
    # Another embedder while one is building is refused; the same one retries the failed documents.
    expect_error(lambda: reindex(c, hashing("hashing-v3", 12)), grpc.StatusCode.FAILED_PRECONDITION, "REINDEX_IN_PROGRESS")
    retried = reindex(c)
    assert retried.generations[1].documents_failed == 0 and retried.generations[1].documents_pending == 1
    job = c.claim()
    assert job.document_id == stuck and job.attempt == 1
    # A retryable failure with no attempt left fails it again, recorded on the job only.
    c.fail(job, retryable=True)
    assert collection(c).generations[1].failures[0].error_message.startswith("failed after 1 attempts")
    reindex(c)
    job = c.claim()
    c.complete(job, ["stuck"], dimensions=16)
    switched_collection(c)


def test_reindex_validates_its_input(ingest_api):
    c = Clients(ingest_api.address)
    c.create_collection("docs")
    expect_error(lambda: reindex(c, name="nope"), grpc.StatusCode.NOT_FOUND, "COLLECTION_NOT_FOUND")
    expect_error(lambda: reindex(c, name=""), grpc.StatusCode.INVALID_ARGUMENT, "MISSING_COLLECTION")
    expect_error(lambda: reindex(c, collection_pb2.EmbedderConfig()), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_EMBEDDER")
    expect_error(lambda: reindex(c, hashing("hashing-v1", 8)), grpc.StatusCode.FAILED_PRECONDITION, "EMBEDDER_UNCHANGED")
    expect_error(lambda: reindex(c, hashing("h", 5000)), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_EMBEDDER")
    expect_error(
        lambda: reindex(
            c,
            collection_pb2.EmbedderConfig(provider=collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS, model="no-such-model"),
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "EMBEDDER_MODEL_NOT_INSTALLED",
    )
    expect_error(
        lambda: c.docs.CancelReindex(ds.CancelReindexRequest(name="nope")), grpc.StatusCode.NOT_FOUND, "COLLECTION_NOT_FOUND"
    )
    # An empty collection has nothing to embed: it switches at once, defaults filled visibly.
    switched = reindex(c, collection_pb2.EmbedderConfig(provider=collection_pb2.EMBEDDER_PROVIDER_HASHING))
    assert states(switched) == [(1, G.GENERATION_STATE_RETIRED), (2, G.GENERATION_STATE_ACTIVE)]
    assert (switched.embedder.model, switched.embedder.dimensions) == ("hashing-v1", 256)


def test_create_collection_refuses_a_local_model_that_is_not_installed(ingest_api):
    """Rough edge 2 (issue 13): before, the collection was created and every document then
    failed with EMBEDDER_MODEL_NOT_FOUND."""
    c = Clients(ingest_api.address)

    def create(model: str, dimensions: int = 0):
        return c.docs.CreateCollection(
            ds.CreateCollectionRequest(
                collection=collection_pb2.Collection(
                    name="local",
                    embedder=collection_pb2.EmbedderConfig(
                        provider=collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS, model=model, dimensions=dimensions
                    ),
                )
            )
        )

    err = expect_error(lambda: create("bge-small-en-v1.5", 384), grpc.StatusCode.INVALID_ARGUMENT, "EMBEDDER_MODEL_NOT_INSTALLED")
    assert "bge-small-en-v1.5" in err.details() and "all-MiniLM-L6-v2" in err.details()
    expect_error(lambda: c.docs.GetCollection(ds.GetCollectionRequest(name="local")), grpc.StatusCode.NOT_FOUND)
    created = create("")  # the defaults, filled and shown
    assert (created.embedder.model, created.embedder.dimensions) == ("all-MiniLM-L6-v2", 384)
    assert states(created) == [(1, G.GENERATION_STATE_ACTIVE)]


def test_migration_0009_round_trip_keeps_the_chunks(database_url):
    """Down to 0008 and up again with a collection, a READY document and its chunks in place."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        cid = conn.execute(
            "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions,"
            " chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts)"
            " VALUES (1, 'c', 'hashing', 'h', 3, 1000, 800, 0, 3) RETURNING id"
        ).fetchone()[0]
        doc = conn.execute(
            "INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256, size_bytes, status)"
            " VALUES (1, %s, 'a.txt', 'text/plain', repeat('a', 64), 1, 'READY') RETURNING id",
            (cid,),
        ).fetchone()[0]
        conn.execute("INSERT INTO ingestion_jobs (document_id, max_attempts, status) VALUES (%s, 3, 'SUCCEEDED')", (doc,))
        conn.execute(
            "INSERT INTO chunks (document_id, tenant_id, collection_id, chunk_index, text, embedding)"
            " VALUES (%s, 1, %s, 0, 'x', '[1,0,0]')",
            (doc, cid),
        )
    config = alembic_config(database_url)
    command.downgrade(config, "0008")
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 1
        assert conn.execute(f"SELECT 1 FROM pg_indexes WHERE indexname = 'chunks_embedding_c{cid}'").fetchone()
    command.upgrade(config, "head")
    with psycopg.connect(database_url) as conn:
        gid, state = conn.execute(
            "SELECT id, state::text FROM collection_generations WHERE collection_id = %s", (cid,)
        ).fetchone()
        assert state == "ACTIVE"
        assert conn.execute("SELECT generation_id FROM chunks").fetchone()[0] == gid
        assert conn.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", (vector_index.index_name(gid),)).fetchone()
        assert conn.execute("SELECT kind::text, generation_id FROM ingestion_jobs").fetchone() == ("INGEST", gid)


def test_embed_jobs_notify_waiting_workers_but_write_no_document_event(ingest_api, database_url):
    c = Clients(ingest_api.address)
    c.create_collection("docs")
    ready_document(c, "notify me")
    before = event_count(database_url)
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN sluice_jobs_available")
        listener.execute("LISTEN sluice_collections")
        reindex(c)
        channels = {n.channel for n in listener.notifies(timeout=10, stop_after=2)}
    # The new EMBED job wakes ClaimJob long-polls; the new generation wakes search's cache.
    assert channels == {"sluice_jobs_available", "sluice_collections"}
    job = c.claim()
    c.fail(job, retryable=True)  # back to PENDING: still no document event
    assert event_count(database_url) == before


def test_concurrent_embed_commits_switch_exactly_once(ingest_api_factory, database_url):
    """Twelve EMBED jobs complete at the same moment (real threads, real transactions), with the
    periodic sweep off: the last commit to take the generation lock sees every other one and
    switches; no commit is lost and the switch happens once."""
    c = Clients(ingest_api_factory(generation_sweep_seconds=3600).address)
    c.create_collection("docs")
    documents = [ready_document(c, f"document {i}") for i in range(12)]
    reindex(c)
    jobs = [c.claim(f"w{i}") for i in range(12)]
    assert {j.document_id for j in jobs} == set(documents)
    barrier = threading.Barrier(len(jobs))

    def complete(job):
        own = Clients(c.address)
        try:
            barrier.wait()
            return own.complete(job, ["text"], dimensions=16).status
        finally:
            own.close()

    with ThreadPoolExecutor(len(jobs)) as pool:
        assert set(pool.map(complete, jobs)) == {D.DOCUMENT_STATUS_READY}
    switched_collection(c)
    for document_id in documents:
        assert chunk_generations(database_url, document_id).get(2) == 1


def test_documents_becoming_ready_while_a_reindex_starts_are_never_missed(ingest_api_factory, database_url):
    """INGEST commits racing ReindexCollection (real threads): each document either was READY
    when the reindex read them (it got its EMBED job there) or committed after (its commit saw
    the BUILDING generation and added the job): every READY document ends with one."""
    # The test plays the worker by hand, without renewing leases: the first of the ten leases must
    # outlast the claims and stages of the other nine (it lapsed at the suite's 5 s at load 10).
    c = Clients(ingest_api_factory(generation_sweep_seconds=3600, lease_seconds=60.0).address)
    c.create_collection("docs")
    ready_document(c, "already ready")
    jobs = []
    for i in range(10):
        c.upload(content=f"racing {i}".encode())
        job = c.claim()
        c.run_to_indexing(job)
        jobs.append(job)
    barrier = threading.Barrier(len(jobs) + 1)

    def complete(job):
        own = Clients(c.address)
        try:
            barrier.wait()
            return own.complete(job, ["racing"]).status
        finally:
            own.close()

    def start_reindex():
        barrier.wait()
        return reindex(c)

    with ThreadPoolExecutor(len(jobs) + 1) as pool:
        futures = [pool.submit(complete, job) for job in jobs] + [pool.submit(start_reindex)]
        for future in futures:
            future.result()
    with psycopg.connect(database_url) as conn:
        missing = conn.execute(
            "SELECT d.id FROM documents d WHERE d.status = 'READY' AND NOT EXISTS (SELECT 1 FROM ingestion_jobs j"
            " JOIN collection_generations g ON g.id = j.generation_id AND g.state = 'BUILDING'"
            " WHERE j.document_id = d.id AND j.kind = 'EMBED')"
        ).fetchall()
        embed_jobs = conn.execute("SELECT count(*) FROM ingestion_jobs WHERE kind = 'EMBED'").fetchone()[0]
    assert missing == [] and embed_jobs == 11


def test_the_installed_local_models_can_be_declared_where_ingest_api_has_none():
    """ingest-api's container image carries no model: SLUICE_INSTALLED_LOCAL_MODELS names what the
    workers have (docker-compose.yml and the Kubernetes manifests set it)."""
    from sluice_common.embedders import EmbedderSettings, check_local_model

    declared = EmbedderSettings(installed_local_models="all-MiniLM-L6-v2, /models/e5-small")
    check_local_model("all-MiniLM-L6-v2:onnx-int8", declared)
    check_local_model("/models/e5-small", declared)
    with pytest.raises(ValueError, match="installed: 'all-MiniLM-L6-v2', '/models/e5-small'"):
        check_local_model("bge-small-en-v1.5", declared)


def test_a_generation_never_switches_without_its_index_and_the_sweep_rebuilds_a_missing_one(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory(**FAST).address)
    c.create_collection("docs")
    ready_document(c, "indexed")
    c.docs.ReindexCollection(ds.ReindexCollectionRequest(name="docs", embedder=hashing()))
    ids = generation_ids(database_url)
    with psycopg.connect(database_url, autocommit=True) as conn:
        # Hold off the sweep's rebuild first: taking the lock after the drop can deadlock with a rebuild
        # that started in between (CREATE INDEX CONCURRENTLY waits for this session's transaction).
        conn.execute("SELECT pg_advisory_lock(%s, %s)", (INDEX_LOCK_CLASS, ids[2]))
        # As if ingest-api died between the reindex's commit and its index build (or the build failed).
        conn.execute(vector_index.drop_index_sql(ids[2]))
        job = c.claim()
        c.complete(job, ["indexed"], dimensions=16)
        assert states(collection(c))[1] == (2, G.GENERATION_STATE_BUILDING)  # complete, but no index yet
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (INDEX_LOCK_CLASS, ids[2]))
    wait_for(lambda: states(collection(c))[1] == (2, G.GENERATION_STATE_ACTIVE))
    assert vector_index.index_name(ids[2]) in hnsw_indexes(database_url)


def test_a_large_generations_index_is_built_after_the_last_commit_has_answered(ingest_api_factory, database_url):
    """Past reindex_inline_index_max_chunks the last EMBED commit answers at once and the index
    build (minutes at 100,000 chunks) runs in the background: here a transaction holding chunks in
    SHARE UPDATE EXCLUSIVE mode stalls CREATE INDEX CONCURRENTLY (not the commit's inserts), and the
    commit's answer must come back anyway; built inline, it would wait for the lock."""
    c = Clients(ingest_api_factory(**FAST, reindex_inline_index_max_chunks=1).address)
    c.create_collection("docs")
    ready_document(c, "large generation")
    c.docs.ReindexCollection(ds.ReindexCollectionRequest(name="docs", embedder=hashing()))
    ids = generation_ids(database_url)
    assert vector_index.index_name(ids[2]) not in hnsw_indexes(database_url)  # bulk-loaded first
    job = c.claim()
    with psycopg.connect(database_url) as blocker:
        blocker.execute("LOCK TABLE chunks IN SHARE UPDATE EXCLUSIVE MODE")
        messages = [js.CompleteJobRequest(header=js.CompleteJobHeader(lease=job.lease, chunk_count=2))]
        chunks = [
            js.Chunk(index=i, text=t, page_number=1, element_type="NarrativeText", embedding=[0.25] * 16)
            for i, t in enumerate(["large generation", "large generation again"])
        ]
        messages.append(js.CompleteJobRequest(chunks=js.ChunkBatch(chunks=chunks)))
        document = c.jobs.CompleteJob(iter(messages), timeout=20).document  # DEADLINE_EXCEEDED if built inline
        assert document.status == D.DOCUMENT_STATUS_READY
        assert states(collection(c))[1] == (2, G.GENERATION_STATE_BUILDING)  # its build waits for the lock
        blocker.rollback()
    wait_for(lambda: states(collection(c))[1] == (2, G.GENERATION_STATE_ACTIVE))
    assert vector_index.index_name(ids[2]) in hnsw_indexes(database_url)


def test_two_callers_racing_into_the_switch_switch_once_and_neither_fails(ingest_api_factory, database_url):
    """The sweep and the last EMBED commit's call can both find the generation complete with its
    index and reach the switch transaction together. The one that gets the row locks second must
    see the switch already made (completeness is asked again under the locks, and requires
    BUILDING) and give up (False), not raise IllegalTransition from move_generation: that would
    fail a CompleteJob whose commit had succeeded. Here two calls of try_switch (real
    connections) wait on a transaction holding the generations' rows, then race; without the
    second question one of them raises."""
    c = Clients(ingest_api_factory(generation_sweep_seconds=3600).address)
    c.create_collection("docs")
    ready_document(c, "raced")
    reindex(c)
    ids = generation_ids(database_url)

    async def with_store(work):
        pool = await open_pool(database_url, max_size=4, name="race")
        try:
            return await work(GenerationStore(pool))
        finally:
            await pool.close()

    assert asyncio.run(with_store(lambda store: store.ensure_index(ids[2])))  # the index first, built here
    with psycopg.connect(database_url, autocommit=True) as conn:
        # The commit's own switch skips a generation whose index lock is held (wait=False).
        conn.execute("SELECT pg_advisory_lock(%s, %s)", (INDEX_LOCK_CLASS, ids[2]))
        c.complete(c.claim(), ["raced"], dimensions=16)
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (INDEX_LOCK_CLASS, ids[2]))
    assert states(collection(c))[1] == (2, G.GENERATION_STATE_BUILDING)  # complete, indexed, not switched

    async def race(store: GenerationStore) -> list[object]:
        return await asyncio.gather(*(store.try_switch(ids[2], wait=True) for _ in range(2)), return_exceptions=True)

    with psycopg.connect(database_url) as blocker, ThreadPoolExecutor(1) as pool:
        blocker.execute("SELECT 1 FROM collection_generations WHERE id = ANY(%s) FOR UPDATE", ([ids[1], ids[2]],))
        outcome = pool.submit(asyncio.run, with_store(race))
        with psycopg.connect(database_url, autocommit=True) as watcher:
            wait_for(
                lambda: (
                    watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        " AND query LIKE '%%FROM collection_generations WHERE id = ANY%%FOR UPDATE'"
                    ).fetchone()[0]
                    == 2
                ),
                what="both calls waiting on the generations' rows",
            )
        blocker.rollback()
        results = outcome.result(timeout=30)
    assert sorted(results, key=repr) == [False, True], results
    assert states(collection(c)) == [(1, G.GENERATION_STATE_RETIRED), (2, G.GENERATION_STATE_ACTIVE)]
