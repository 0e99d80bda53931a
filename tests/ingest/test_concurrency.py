"""Real concurrency against real PostgreSQL: several gRPC clients on their own channels."""

from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psycopg
from sluice.v1 import document_pb2 as D

from .helpers import Clients

JOBS = 500
CLAIMERS = 8


def seed_jobs(database_url: str, collection: str, count: int) -> None:
    """Insert documents and jobs in bulk (the upload path is tested elsewhere)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            """
            WITH c AS (SELECT id, tenant_id, max_attempts FROM collections WHERE name = %s),
                 d AS (
                    INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256, size_bytes)
                    SELECT c.tenant_id, c.id, 'f' || g || '.txt', 'text/plain', encode(sha256(g::text::bytea), 'hex'), 1
                    FROM c, generate_series(1, %s) g
                    RETURNING id, collection_id)
            INSERT INTO ingestion_jobs (document_id, max_attempts)
            SELECT d.id, c.max_attempts FROM d JOIN c ON c.id = d.collection_id
            """,
            (collection, count),
        )


def claim_all(address: str, worker: str, sink: list, stop_when_empty: bool = True) -> None:
    c = Clients(address)
    try:
        while True:
            job = c.claim(worker)
            if job is None:
                if stop_when_empty:
                    return
                continue
            sink.append((job.lease.job_id, job.attempt, job.lease.lease_token))
    finally:
        c.close()


def test_eight_claimers_claim_every_job_exactly_once_per_attempt(ingest_api, database_url):
    setup = Clients(ingest_api.address)
    setup.create_collection(max_attempts=3)
    seed_jobs(database_url, "docs", JOBS)

    for attempt in (1, 2):
        claims: list[list] = [[] for _ in range(CLAIMERS)]
        threads = [threading.Thread(target=claim_all, args=(ingest_api.address, f"w{i}", claims[i])) for i in range(CLAIMERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        flat = [c for per_worker in claims for c in per_worker]
        per_job = Counter(job_id for job_id, _, _ in flat)
        assert len(per_job) == JOBS and set(per_job.values()) == {1}, "a job was claimed twice or not at all"
        assert {a for _, a, _ in flat} == {attempt}
        assert sum(1 for per_worker in claims if per_worker) > 1, "claims were not spread over workers"
        with psycopg.connect(database_url) as conn:
            assert (
                conn.execute(
                    "SELECT count(*) FROM ingestion_jobs WHERE status = 'RUNNING' AND attempts = %s", (attempt,)
                ).fetchone()[0]
                == JOBS
            )
            assert conn.execute("SELECT count(*) FROM job_attempts WHERE number = %s", (attempt,)).fetchone()[0] == JOBS
        if attempt == 1:
            # Fail every job temporarily; each comes back for exactly one more claim.
            leases = {job_id: token for job_id, _, token in flat}

            def fail(item):
                job_id, token = item
                c = Clients(ingest_api.address)
                from sluice.v1 import job_service_pb2 as js

                c.jobs.FailJob(
                    js.FailJobRequest(
                        lease=js.LeaseRef(job_id=job_id, lease_token=token),
                        retryable=True,
                        error_code="EMBEDDING_UNAVAILABLE",
                        error_message="try again",
                    )
                )
                c.close()

            with ThreadPoolExecutor(CLAIMERS) as pool:
                list(pool.map(fail, leases.items()))
            with psycopg.connect(database_url, autocommit=True) as conn:
                conn.execute("UPDATE ingestion_jobs SET available_at = now()")
    setup.close()


ALLOWED_PAIRS = {
    ("PENDING", "PENDING"),
    ("PENDING", "RUNNING"),
    ("PARSING", "RUNNING"),
    ("CHUNKING", "RUNNING"),
    ("EMBEDDING", "RUNNING"),
    ("INDEXING", "RUNNING"),
    ("READY", "SUCCEEDED"),
    ("FAILED", "FAILED"),
}


def test_reader_never_sees_document_and_job_disagree(ingest_api_factory, database_url):  # noqa: C901 - its threads are closures over the test's state
    api = ingest_api_factory(retry_delay_seconds=0.01)
    setup = Clients(api.address)
    setup.create_collection(max_attempts=3)
    documents = [setup.upload(content=f"document {i}".encode()).id for i in range(60)]
    stop = threading.Event()
    violations: list = []
    samples = Counter()

    def sample_sql():
        with psycopg.connect(database_url, autocommit=True) as conn:
            while not stop.is_set():
                rows = conn.execute(
                    "SELECT d.status::text, j.status::text FROM documents d JOIN ingestion_jobs j ON j.document_id = d.id"
                ).fetchall()
                for pair in rows:
                    samples[pair] += 1
                    if pair not in ALLOWED_PAIRS:
                        violations.append(("sql", pair))

    def sample_grpc():
        c = Clients(api.address)
        name = {v: k for k, v in D.DocumentStatus.items()}
        job_name = {v: k for k, v in D.IngestionJobStatus.items()}
        while not stop.is_set():
            doc = c.get(random.choice(documents))
            pair = (
                name[doc.status].removeprefix("DOCUMENT_STATUS_"),
                job_name[doc.job_status].removeprefix("INGESTION_JOB_STATUS_"),
            )
            if pair not in ALLOWED_PAIRS:
                violations.append(("grpc", pair))
        c.close()

    def work(worker: str, seed: int):
        rng = random.Random(seed)
        c = Clients(api.address)
        idle = 0
        while idle < 3:
            job = c.claim(worker, wait=0.2)
            if job is None:
                idle += 1
                continue
            idle = 0
            for stage in (
                D.DOCUMENT_STATUS_PARSING,
                D.DOCUMENT_STATUS_CHUNKING,
                D.DOCUMENT_STATUS_EMBEDDING,
                D.DOCUMENT_STATUS_INDEXING,
            ):
                c.stage(job, stage)
                if rng.random() < 0.1:
                    c.fail(job, retryable=rng.random() < 0.7)
                    break
            else:
                c.complete(job, texts=[f"chunk {worker}"])
        c.close()

    readers = [threading.Thread(target=sample_sql), threading.Thread(target=sample_grpc)]
    workers = [threading.Thread(target=work, args=(f"w{i}", i)) for i in range(4)]
    for t in readers + workers:
        t.start()
    for t in workers:
        t.join(180)
    stop.set()
    for t in readers:
        t.join(30)
    assert not violations, violations[:10]
    assert sum(samples.values()) > 100
    seen = {pair for pair in samples}
    assert {("READY", "SUCCEEDED"), ("FAILED", "FAILED")} <= seen
    assert seen & {("PARSING", "RUNNING"), ("CHUNKING", "RUNNING"), ("EMBEDDING", "RUNNING"), ("INDEXING", "RUNNING")}
    with psycopg.connect(database_url) as conn:
        # Rule 1 at rest: chunks exist only under READY documents, and every READY one has its chunks.
        assert (
            conn.execute(
                "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.status <> 'READY'"
            ).fetchone()[0]
            == 0
        )
        assert (
            conn.execute(
                "SELECT count(*) FROM documents d WHERE status = 'READY' AND NOT EXISTS"
                " (SELECT 1 FROM chunks c WHERE c.document_id = d.id)"
            ).fetchone()[0]
            == 0
        )
        terminal = conn.execute("SELECT count(*) FROM documents WHERE status IN ('READY', 'FAILED')").fetchone()[0]
    assert terminal == len(documents)
    setup.close()
