"""The pipeline and the worker loop on fakes (no IO): order of calls, fencing, cancellation,
hand-back at shutdown."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from sluice.v1 import collection_pb2, job_service_pb2
from sluice_common.embedders import EmbeddingError
from sluice_worker.domain import (
    ChunkingSettings,
    ChunkRecord,
    DocumentInvalid,
    JobLeaseLost,
    ParseSummary,
    Stage,
    pipeline_version,
)
from sluice_worker.pipeline import UNSTRUCTURED_VERSION, JobPipeline
from sluice_worker.runner import Worker
from sluice_worker.settings import WorkerSettings


def make_job(lease_seconds: float = 30.0, job_id: str = "job-1", **fields) -> job_service_pb2.Job:
    defaults = dict(
        lease=job_service_pb2.LeaseRef(job_id=job_id, lease_token="token-1"),
        document_id="doc-1",
        collection="c",
        filename="a.md",
        mime_type="text/markdown",
        size_bytes=10,
        attempt=1,
        max_attempts=3,
        lease_seconds=lease_seconds,
        embedder=collection_pb2.EmbedderConfig(provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="h", dimensions=4),
        chunking=collection_pb2.ChunkingConfig(max_characters=200, new_after_n_chars=150, overlap=0),
    )
    return job_service_pb2.Job(**{**defaults, **fields})


class FakePort:
    """JobService as the pipeline sees it; every call lands in `calls`."""

    def __init__(self, snapshot=None, fail_on: str | None = None) -> None:
        self.calls: list[tuple] = []
        self.snapshot = snapshot
        self.fail_on = fail_on
        self.jobs: list = []
        self.cancelled = False

    def _record(self, *call) -> None:
        self.calls.append(call)
        if self.fail_on == call[0]:
            raise JobLeaseLost(call[0])

    async def report_stage(self, lease, stage, done=0, total=0, unit=""):
        assert isinstance(stage, Stage), f"stages are reported with the proto enum, not {stage!r}"
        self._record("stage", stage, done, total, unit)

    async def read_document_content(self, lease):
        self._record("read_content")
        return b"# Title\n\nSome text."

    async def read_snapshot(self, lease, version):
        self._record("read_snapshot")
        return self.snapshot

    async def save_snapshot(self, lease, version, chunks, batch_size):
        self._record("save_snapshot", len(chunks))

    async def complete_job(self, lease, chunks, batch_size):
        self._record("complete", len(chunks), [len(c.embedding) for c in chunks])

    async def fail_job(self, lease, *, retryable, error_code, error_message):
        self._record("fail", retryable, error_code)
        return retryable

    async def release_job(self, lease):
        self._record("release")

    async def renew_lease(self, lease):
        self._record("renew")
        return self.cancelled

    async def claim_job(self, worker_id, wait_seconds):
        if self.jobs:
            return self.jobs.pop(0)
        await asyncio.sleep(min(wait_seconds, 0.05))
        return None


class FakeSession:
    def __init__(self, port: FakePort, chunks: int = 5, error: Exception | None = None) -> None:
        self.port, self.chunks, self.error = port, chunks, error

    async def parse(self, data, filename, mime_type, limits, *, timeout, progress):
        self.port.calls.append(("parse",))
        if self.error:
            raise self.error
        await progress(1, 1, "pages")
        return ParseSummary(elements=3, pages=1, characters=100)

    async def chunk(self, settings, max_chunks, *, timeout):
        self.port.calls.append(("chunk",))
        return [ChunkRecord(i, f"chunk {i}") for i in range(self.chunks)]


class FakeParser:
    def __init__(self, session: FakeSession) -> None:
        self._session = session

    @contextlib.asynccontextmanager
    async def session(self):
        yield self._session


class FakeEmbedder:
    provider = "fake"
    batch_size = 2

    def __init__(self, error: Exception | None = None, gate: asyncio.Event | None = None) -> None:
        self.error, self.gate = error, gate

    async def embed_documents(self, texts):
        if self.gate is not None:
            await self.gate.wait()
        if self.error:
            raise self.error
        return [[0.5, 0.5, 0.5, 0.5] for _ in texts]


def settings(**overrides) -> WorkerSettings:
    return WorkerSettings(
        **{
            "embed_batch_size": 2,
            "progress_interval_seconds": 0,
            "claim_wait_seconds": 0.05,
            "worker_concurrency": 1,
            **overrides,
        }
    )


def pipeline(port, session=None, embedder=None) -> JobPipeline:
    return JobPipeline(
        port, FakeParser(session or FakeSession(port)), settings(), embedder_for=lambda _: embedder or FakeEmbedder()
    )


def names(port: FakePort) -> list[str]:
    return [c[0] if c[0] != "stage" else c[1].name for c in port.calls]


async def test_status_is_reported_before_each_stage_with_progress():
    port = FakePort()
    result = await pipeline(port).run(make_job())
    assert result.outcome == "succeeded" and result.chunk_count == 5 and not result.snapshot_reused
    # The claim listed no snapshot of this content: no ReadSnapshot call.
    assert names(port) == [
        "PARSING",
        "read_content",
        "parse",
        "PARSING",
        "CHUNKING",
        "chunk",
        "save_snapshot",
        "EMBEDDING",
        "EMBEDDING",
        "EMBEDDING",
        "EMBEDDING",
        "INDEXING",
        "complete",
    ]
    embedding = [c[2:] for c in port.calls if c[:2] == ("stage", Stage.EMBEDDING)]
    assert embedding == [(0, 5, "chunks"), (2, 5, "chunks"), (4, 5, "chunks"), (5, 5, "chunks")]
    assert ("stage", Stage.PARSING, 1, 1, "pages") in port.calls
    assert port.calls[-1] == ("complete", 5, [4] * 5)


async def test_a_quick_document_reports_each_stage_once():
    # Progress goes at most every interval; the end of a stage is said by the next stage's report.
    port = FakePort()
    quick = JobPipeline(
        port, FakeParser(FakeSession(port)), settings(progress_interval_seconds=60), embedder_for=lambda _: FakeEmbedder()
    )
    assert (await quick.run(make_job())).outcome == "succeeded"
    assert [c[1].name for c in port.calls if c[0] == "stage"] == ["PARSING", "CHUNKING", "EMBEDDING", "INDEXING"]


async def test_a_small_document_that_came_with_its_claim_is_not_read_again():
    content = b"# Title\n\nSome text."
    port = FakePort()
    result = await pipeline(port).run(make_job(content=content, size_bytes=len(content)))
    assert result.outcome == "succeeded"
    assert "read_content" not in names(port) and "parse" in names(port)


async def test_a_snapshot_skips_parsing_and_chunking():
    port = FakePort(snapshot=[ChunkRecord(0, "saved"), ChunkRecord(1, "chunks")])
    job = make_job()
    version = pipeline_version(JobPipeline(port, None, WorkerSettings()).chunking_of(job), UNSTRUCTURED_VERSION)
    result = await pipeline(port).run(make_job(snapshot_versions=["another-version", version]))
    assert result.snapshot_reused and result.outcome == "succeeded"
    assert names(port) == ["read_snapshot", "EMBEDDING", "EMBEDDING", "INDEXING", "complete"]


async def test_a_snapshot_of_another_pipeline_version_is_not_asked_for():
    port = FakePort(snapshot=[ChunkRecord(0, "saved")])
    result = await pipeline(port).run(make_job(snapshot_versions=["another-version"]))
    assert not result.snapshot_reused and "read_snapshot" not in names(port) and "parse" in names(port)


@pytest.mark.parametrize("where", ["save_snapshot", "complete", "stage"])
async def test_a_lost_lease_stops_all_writes(where):
    port = FakePort(fail_on=where)
    result = await pipeline(port).run(make_job())
    assert result.outcome == "abandoned"
    assert names(port)[-1] in (where, "PARSING")
    assert "fail" not in names(port)


async def test_a_bad_document_fails_once_permanently():
    port = FakePort()
    session = FakeSession(port, error=DocumentInvalid("PDF_ENCRYPTED", "the PDF is protected by a password"))
    result = await pipeline(port, session).run(make_job())
    assert result.outcome == "failed" and result.error_code == "PDF_ENCRYPTED"
    assert port.calls[-1] == ("fail", False, "PDF_ENCRYPTED")
    assert "save_snapshot" not in names(port)


@pytest.mark.parametrize(("retryable", "code"), [(True, "EMBEDDING_RATE_LIMITED"), (False, "EMBEDDING_INPUT_REJECTED")])
async def test_embedding_errors_keep_their_classification(retryable, code):
    port = FakePort()
    embedder = FakeEmbedder(error=EmbeddingError("provider says no", code=code, retryable=retryable))
    result = await pipeline(port, embedder=embedder).run(make_job())
    assert result.outcome == "failed"
    assert port.calls[-1] == ("fail", retryable, code)


def test_pipeline_version_names_the_chunking_settings():
    a = pipeline_version(ChunkingSettings(1500, 1000, 0), "0.27")
    assert a != pipeline_version(ChunkingSettings(1500, 1000, 100), "0.27")
    assert a != pipeline_version(ChunkingSettings(1000, 1000, 0), "0.27")
    assert a != pipeline_version(ChunkingSettings(1500, 1000, 0), "0.28")
    assert ChunkingSettings.effective(0, 0, 0, default_max=1500, default_new_after=1000) == ChunkingSettings(1500, 1000, 0)
    assert ChunkingSettings.effective(100, 500, 200, default_max=1500, default_new_after=1000) == ChunkingSettings(100, 100, 99)


async def run_worker_until(port: FakePort, gate: asyncio.Event, condition, **overrides) -> Worker:
    s = settings(**overrides)
    worker = Worker(port, JobPipeline(port, FakeParser(FakeSession(port)), s, embedder_for=lambda _: FakeEmbedder(gate=gate)), s)
    task = asyncio.create_task(worker.run())
    for _ in range(400):
        if condition(worker):
            break
        await asyncio.sleep(0.01)
    return worker, task


async def test_a_cancelled_job_stops_at_its_next_lease_renewal_and_writes_nothing():
    port = FakePort()
    port.jobs = [make_job(lease_seconds=0.3)]
    gate = asyncio.Event()  # embedding never finishes on its own
    worker, task = await run_worker_until(port, gate, lambda w: "EMBEDDING" in names(port))
    port.cancelled = True
    for _ in range(200):
        if worker.results:
            break
        await asyncio.sleep(0.01)
    assert [r.outcome for r in worker.results] == ["abandoned"]
    gate.set()
    worker.request_stop()
    await task
    after = names(port)[names(port).index("renew") :]
    assert set(after) <= {"renew"}, "nothing but lease renewals after the cancellation"


async def test_stop_hands_back_jobs_that_outlive_the_grace_period():
    port = FakePort()
    port.jobs = [make_job()]
    gate = asyncio.Event()
    worker, task = await run_worker_until(port, gate, lambda w: "EMBEDDING" in names(port), shutdown_grace_seconds=0.1)
    worker.request_stop()
    await asyncio.wait_for(task, 10)
    assert [r.outcome for r in worker.results] == ["released"]
    assert names(port)[-1] == "release"
    assert "complete" not in names(port) and "fail" not in names(port)


async def test_stop_lets_a_job_finish_within_the_grace_period():
    port = FakePort()
    port.jobs = [make_job()]
    gate = asyncio.Event()
    worker, task = await run_worker_until(port, gate, lambda w: "EMBEDDING" in names(port), shutdown_grace_seconds=30)
    worker.request_stop()
    await asyncio.sleep(0.05)
    gate.set()
    await asyncio.wait_for(task, 10)
    assert [r.outcome for r in worker.results] == ["succeeded"]
    assert "release" not in names(port)
