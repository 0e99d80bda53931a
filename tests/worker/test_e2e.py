"""End to end: real ingest-api (in-process gRPC server on a real PostgreSQL), real workers
(in-process, or subprocesses where signals matter), real files, real HTTP embeddings."""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.request

import auth_keys
import grpc
import pytest
from helpers import free_port, wait_for_async
from sluice.v1 import collection_pb2, document_pb2
from sluice_common.errors import reason_of
from sluice_worker.domain import ChunkRecord, JobLeaseLost
from sluice_worker.jobs_client import JobClient
from sluice_worker.pipeline import JobPipeline

from .e2e import Docs, InProcessWorker, WorkerProcess, chunk_rows, snapshot_count, worker_settings
from .openai_server import Injected
from .test_parsing import docx_bomb

D = document_pb2
OPENAI = collection_pb2.EMBEDDER_PROVIDER_OPENAI

GOOD = [
    "report.pdf",
    "handbook.docx",
    "architecture.pptx",
    "retrieval.html",
    "operations.md",
    "chinese.md",
    "minutes-latin1.txt",
    "notes-utf16.txt",
    "minutes-gb18030.txt",
    "overview-shift_jis.txt",
    "status.eml",
]


async def test_every_format_reaches_ready_with_sensible_chunks(ingest_api, docs, sandbox_pool, documents_dir, database_url):
    await docs.create_collection("formats", max_characters=300, new_after=250)
    uploaded = {name: await docs.upload("formats", name, (documents_dir / name).read_bytes()) for name in GOOD}
    subscribed = asyncio.Event()
    watch = asyncio.create_task(docs.watch(uploaded["report.pdf"].id, subscribed))
    await asyncio.wait_for(subscribed.wait(), 30)  # PENDING is seen before a worker can claim it
    async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool):
        finished = {d.filename: d for d in await docs.wait_all([d.id for d in uploaded.values()])}
        events = await asyncio.wait_for(watch, 30)

    for name in GOOD:
        document = finished[name]
        assert D.DocumentStatus.Name(document.status) == "DOCUMENT_STATUS_READY", (name, document.error_message)
        assert document.attempts == 1 and document.chunk_count > 0
        rows = chunk_rows(database_url, document.id)
        assert [r[0] for r in rows] == list(range(document.chunk_count))
        assert all(r[1].strip() and r[6] == 64 and len(r[1]) <= 300 for r in rows), name
        assert all(r[3] for r in rows), f"{name}: every chunk has an element type"

    pdf = chunk_rows(database_url, finished["report.pdf"].id)
    assert {r[2] for r in pdf} == {1, 2, 3} and pdf[0][1].startswith("Sluice Quarterly Report")
    pptx = chunk_rows(database_url, finished["architecture.pptx"].id)
    assert {r[2] for r in pptx} >= {1, 3}
    for name in ("handbook.docx", "retrieval.html", "operations.md", "architecture.pptx"):
        tables = [r for r in chunk_rows(database_url, finished[name].id) if r[3] == "Table"]
        assert tables and all("<table>" in r[5] for r in tables), name
    chinese = chunk_rows(database_url, finished["chinese.md"].id)
    assert all(r[1].endswith(("。", "！", "？")) or r[3] == "Title" for r in chinese)  # noqa: RUF001 - CJK punctuation, meant
    assert "réunion a commencé à neuf" in chunk_rows(database_url, finished["minutes-latin1.txt"].id)[0][1]
    assert "Weekly ingestion status" in chunk_rows(database_url, finished["status.eml"].id)[0][1]

    # Status before action, with progress, as WatchDocument shows it.
    stages = []
    for event in events:
        name = D.DocumentStatus.Name(event.status).removeprefix("DOCUMENT_STATUS_")
        if not stages or stages[-1] != name:
            stages.append(name)
    assert stages == ["PENDING", "PARSING", "CHUNKING", "EMBEDDING", "INDEXING", "READY"]
    assert any(e.progress.unit == "pages" and e.progress.done == 3 and e.progress.total == 3 for e in events)
    embedding = [e.progress for e in events if e.status == D.DOCUMENT_STATUS_EMBEDDING]
    assert embedding[0].done == 0 and embedding[0].total == finished["report.pdf"].chunk_count
    assert embedding[-1].done == embedding[-1].total


async def test_malformed_files_fail_once_and_the_worker_keeps_serving(ingest_api, docs, sandbox_pool, documents_dir):
    await docs.create_collection("bad", max_attempts=3)
    cases = {
        "truncated.pdf": "DOCUMENT_CORRUPT",
        "random.pdf": "DOCUMENT_CORRUPT",
        "not-a-zip.docx": "DOCUMENT_CORRUPT",
        "encrypted.pdf": "PDF_ENCRYPTED",
        "blank.txt": "DOCUMENT_EMPTY",
        "no-text.pdf": "DOCUMENT_EMPTY",
    }
    uploaded = {name: await docs.upload("bad", name, (documents_dir / "malformed" / name).read_bytes()) for name in cases}
    uploaded["bomb.docx"] = await docs.upload("bad", "bomb.docx", docx_bomb(600 * 1024 * 1024))
    cases["bomb.docx"] = "DOCUMENT_TOO_LARGE"
    with pytest.raises(grpc.aio.AioRpcError) as empty:
        await docs.upload("bad", "empty.txt", b"")
    assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT and reason_of(empty.value) == "EMPTY_UPLOAD"

    async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool):
        failed = {d.filename: d for d in await docs.wait_all([d.id for d in uploaded.values()])}
        healthy = await docs.upload("bad", "after.md", b"# Still working\n\nThe worker goes on after bad files.\n")
        assert (await docs.wait(healthy.id)).status == D.DOCUMENT_STATUS_READY

    for name, code in cases.items():
        document = failed[name]
        assert document.status == D.DOCUMENT_STATUS_FAILED, name
        assert document.attempts == 1, f"{name}: a permanent error is not retried"
        assert document.error_code == code, (name, document.error_message)
        assert document.error_message and "Traceback" not in document.error_message and "Error(" not in document.error_message
    assert "password" in failed["encrypted.pdf"].error_message
    assert "decompression bomb" in failed["bomb.docx"].error_message


async def test_flaky_embedding_provider_still_makes_every_document_ready(
    ingest_api, docs, sandbox_pool, documents_dir, openai_server
):
    openai_server.failure_rate = 0.3
    openai_server.random_failures = [Injected(429, {"retry-after": "0.05"}, "rate limited"), Injected(500, {}, "overloaded")]
    await docs.create_collection(
        "flaky", provider=OPENAI, model="test-embed", dimensions=32, max_characters=200, new_after=150, max_attempts=6
    )
    names = ["report.pdf", "handbook.docx", "retrieval.html", "operations.md", "chinese.md", "status.eml"]
    uploaded = [await docs.upload("flaky", name, (documents_dir / name).read_bytes()) for name in names]
    # Two quick retries inside a batch, then the job's own retries: one attempt fails with
    # p ~ 0.1, six in a row with p ~ 1e-6 per document.
    settings = worker_settings(
        ingest_api.address, openai_base_url=openai_server.base_url, openai_max_retries=2, embed_batch_size=2, openai_batch_size=2
    )
    async with InProcessWorker(settings, sandbox_pool) as running:
        documents = await docs.wait_all([d.id for d in uploaded])
    assert all(d.status == D.DOCUMENT_STATUS_READY for d in documents), [(d.filename, d.error_message) for d in documents]
    assert all(1 <= d.attempts <= d.max_attempts for d in documents)
    statuses = [r.status for r in openai_server.requests]
    assert statuses.count(429) + statuses.count(500) >= 3, "the provider did fail along the way"
    # Failures only ever hit EMBEDDING, so every retry resumed from the snapshot.
    assert sum(r.snapshot_reused for r in running.worker.results) == sum(d.attempts - 1 for d in documents)


async def test_a_permanently_failing_provider_fails_after_max_attempts_with_history(
    ingest_api, docs, sandbox_pool, documents_dir, openai_server
):
    openai_server.always = Injected(503, {}, "service unavailable")
    await docs.create_collection("down", provider=OPENAI, model="test-embed", dimensions=32, max_attempts=3)
    document = await docs.upload("down", "operations.md", (documents_dir / "operations.md").read_bytes())
    settings = worker_settings(ingest_api.address, openai_base_url=openai_server.base_url, openai_max_retries=0)
    async with InProcessWorker(settings, sandbox_pool) as running:
        document = await docs.wait(document.id, timeout=60)
    assert document.status == D.DOCUMENT_STATUS_FAILED
    assert document.attempts == 3 and document.error_code == "EMBEDDING_PROVIDER_ERROR"
    assert "503" in document.error_message
    history = document.attempt_history
    assert [a.number for a in history] == [1, 2, 3]
    assert all(
        a.error_code == "EMBEDDING_PROVIDER_ERROR" and a.retryable and a.stage == D.DOCUMENT_STATUS_EMBEDDING for a in history
    )
    assert [a.outcome for a in history[:2]] == [D.ATTEMPT_OUTCOME_RETRYABLE_FAILURE] * 2
    # Attempts 2 and 3 resumed from the snapshot instead of parsing again.
    assert [r.snapshot_reused for r in running.worker.results] == [False, True, True]


async def test_worker_killed_mid_embedding_is_finished_by_another_from_the_snapshot(
    ingest_api_factory, sandbox_pool, documents_dir, openai_server, database_url, tmp_path
):
    ingest = ingest_api_factory(lease_seconds=2.0)
    docs = Docs(ingest.address)
    try:
        await docs.create_collection(
            "crash", provider=OPENAI, model="test-embed", dimensions=32, max_characters=150, new_after=100
        )
        document = await docs.upload("crash", "report.pdf", (documents_dir / "report.pdf").read_bytes())
        openai_server.always = Injected(200, delay=0.4)  # slow: EMBEDDING lasts seconds
        doomed = WorkerProcess(
            ingest.address,
            tmp_path / "doomed.log",
            SLUICE_OPENAI_BASE_URL=openai_server.base_url,
            SLUICE_WORKER_CONCURRENCY="1",
            SLUICE_EMBED_BATCH_SIZE="1",
            SLUICE_WORKER_ID="doomed",
        )
        try:
            await docs.wait(document.id, {D.DOCUMENT_STATUS_EMBEDDING}, timeout=120, predicate=lambda d: d.progress.done >= 1)
        finally:
            doomed.kill()
        assert (await docs.get(document.id)).status == D.DOCUMENT_STATUS_EMBEDDING
        assert snapshot_count(database_url) == 1
        openai_server.always = None

        settings = worker_settings(ingest.address, openai_base_url=openai_server.base_url, worker_id="survivor")
        async with InProcessWorker(settings, sandbox_pool) as survivor:
            document = await docs.wait(document.id, timeout=60)
        assert document.status == D.DOCUMENT_STATUS_READY
        assert document.attempts == 2
        assert [a.outcome for a in document.attempt_history] == [D.ATTEMPT_OUTCOME_LEASE_EXPIRED, D.ATTEMPT_OUTCOME_SUCCEEDED]
        assert [a.worker_id for a in document.attempt_history] == ["doomed", "survivor"]
        assert [r.snapshot_reused for r in survivor.worker.results] == [True]
        rows = chunk_rows(database_url, document.id)
        assert len(rows) == document.chunk_count and [r[0] for r in rows] == list(range(len(rows)))
        assert snapshot_count(database_url) == 1
    finally:
        await docs.close()


async def test_a_stale_worker_cannot_write_chunks(ingest_api_factory, sandbox_pool, documents_dir, database_url):
    ingest = ingest_api_factory(lease_seconds=1.0)
    docs = Docs(ingest.address)
    stale_client, fresh_client = (
        JobClient(ingest.address, api_key=auth_keys.KEYS["worker"]),
        JobClient(ingest.address, api_key=auth_keys.KEYS["worker"]),
    )
    try:
        await docs.create_collection("stale")
        document = await docs.upload("stale", "operations.md", (documents_dir / "operations.md").read_bytes())
        stale_job = await stale_client.claim_job("stale", 5)
        assert stale_job is not None
        fresh_job = None
        for _ in range(100):  # the lease lapses unrenewed; then another worker takes over
            fresh_job = await fresh_client.claim_job("fresh", 0.5)
            if fresh_job is not None:
                break
        assert fresh_job is not None and fresh_job.lease.lease_token != stale_job.lease.lease_token

        # The stale worker, unaware, runs the whole pipeline: it is refused at its first write.
        settings = worker_settings(ingest.address)
        stale = await JobPipeline(stale_client, sandbox_pool, settings).run(stale_job)
        assert stale.outcome == "abandoned"
        with pytest.raises(JobLeaseLost):
            await stale_client.complete_job(stale_job.lease, [ChunkRecord(0, "forged", embedding=[0.125] * 64)], 10)
        assert chunk_rows(database_url, document.id) == []

        fresh = await JobPipeline(fresh_client, sandbox_pool, settings).run(fresh_job)
        assert fresh.outcome == "succeeded"
        document = await docs.get(document.id)
        assert document.status == D.DOCUMENT_STATUS_READY and document.chunk_count == fresh.chunk_count
        assert "forged" not in {r[1] for r in chunk_rows(database_url, document.id)}
    finally:
        await stale_client.close()
        await fresh_client.close()
        await docs.close()


async def test_deleting_a_document_stops_its_job_promptly(
    ingest_api_factory, sandbox_pool, documents_dir, openai_server, database_url
):
    ingest = ingest_api_factory(lease_seconds=1.5)
    docs = Docs(ingest.address)
    try:
        await docs.create_collection(
            "cancel", provider=OPENAI, model="test-embed", dimensions=32, max_characters=150, new_after=100
        )
        doomed = await docs.upload("cancel", "report.pdf", (documents_dir / "report.pdf").read_bytes())
        openai_server.always = Injected(200, delay=0.3)
        settings = worker_settings(
            ingest.address, openai_base_url=openai_server.base_url, embed_batch_size=1, worker_concurrency=1
        )
        async with InProcessWorker(settings, sandbox_pool) as running:
            await docs.wait(doomed.id, {D.DOCUMENT_STATUS_EMBEDDING})
            await docs.delete(doomed.id)
            for _ in range(200):  # the next lease renewal (lease / 3) learns of it
                if running.worker.results:
                    break
                await asyncio.sleep(0.05)
            assert [r.outcome for r in running.worker.results] == ["abandoned"]
            openai_server.always = None
            after = await docs.upload("cancel", "operations.md", (documents_dir / "operations.md").read_bytes())
            assert (await docs.wait(after.id)).status == D.DOCUMENT_STATUS_READY
        assert chunk_rows(database_url, doomed.id) == []
    finally:
        await docs.close()


async def test_sigterm_hands_back_unfinished_jobs_and_exits_cleanly(ingest_api, docs, documents_dir, openai_server, tmp_path):
    await docs.create_collection("term", provider=OPENAI, model="test-embed", dimensions=32, max_characters=150, new_after=100)
    document = await docs.upload("term", "report.pdf", (documents_dir / "report.pdf").read_bytes())
    openai_server.always = Injected(200, delay=1.0)  # far slower than the grace period allows
    metrics_port = free_port()
    worker = WorkerProcess(
        ingest_api.address,
        tmp_path / "term.log",
        SLUICE_OPENAI_BASE_URL=openai_server.base_url,
        SLUICE_WORKER_CONCURRENCY="1",
        SLUICE_EMBED_BATCH_SIZE="1",
        SLUICE_SHUTDOWN_GRACE_SECONDS="0.5",
        SLUICE_WORKER_ID="terminated",
        SLUICE_METRICS_PORT=str(metrics_port),
    )
    try:
        await docs.wait(document.id, {D.DOCUMENT_STATUS_EMBEDDING}, timeout=120)
        scraped = await asyncio.to_thread(
            lambda: urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        )
        assert "sluice_worker_jobs_claimed_total 1.0" in scraped
        assert "sluice_worker_jobs_in_flight 1.0" in scraped
        assert 'sluice_worker_stage_duration_seconds_count{stage="PARSING"} 1.0' in scraped
        worker.signal(signal.SIGTERM)
        assert await worker.wait_exit(60) == 0
    finally:
        if worker.process.poll() is None:
            worker.kill()
    document = await docs.get(document.id)
    assert document.status == D.DOCUMENT_STATUS_PENDING
    assert [a.outcome for a in document.attempt_history] == [D.ATTEMPT_OUTCOME_RELEASED]
    events = [json.loads(line) for line in worker.log().splitlines() if line.startswith("{")]
    assert any(e.get("event") == "job handed back" for e in events)
    assert any(e.get("event") == "job claimed" and e.get("document_id") == document.id for e in events), "logs carry the ids"


async def test_sigterm_cancels_an_idle_long_poll(ingest_api_factory, tmp_path):
    # Nothing to do: the worker sits in a 10-minute ClaimJob long-poll. SIGTERM must not wait it out.
    ingest_api = ingest_api_factory(max_claim_wait_seconds=600.0)
    worker = WorkerProcess(ingest_api.address, tmp_path / "idle.log", SLUICE_CLAIM_WAIT_SECONDS="600")
    try:
        # A new worker process imports the parsers and warms its sandboxes before it claims: over a
        # minute on a loaded machine (seen at load 2 with two test processes). The timeout is a safety net.
        await wait_for_async(
            lambda: "worker started: claiming jobs" in worker.log() or worker.process.poll() is not None,
            timeout=180,
            what="the worker to start claiming",
        )
        assert worker.process.poll() is None, worker.log()
        await asyncio.sleep(1.0)  # inside the long-poll now
        worker.signal(signal.SIGTERM)
        assert await worker.wait_exit(90) == 0  # long before the poll would have ended, on a loaded machine too
    finally:
        if worker.process.poll() is None:
            worker.kill()
