"""Fixtures of the CLI tests: the real services in-process, helpers to run `sluice`.

`stack` is one test's Sluice: the real ingest-api (`ingest_api` from tests/conftest.py) and
the real search service on a fresh migrated database, plus `ScriptedWorker`, which does a
worker's part through the real JobService (claim, read content, stages, complete or fail)
with chunk texts taken from the uploaded file and real hashing-embedder vectors. The real
worker (parsing sandboxes, unstructured) is exercised by test_e2e_dev.py; here the
outcome of processing must be chosen by the test, quickly.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import auth_keys
import grpc
import pytest
from client_messages import scan_cli_output
from search_server import RunningSearch
from sluice.v1 import document_pb2, job_service_pb2_grpc
from sluice.v1 import job_service_pb2 as js
from sluice_common.embedders import get_embedder

VENV_BIN = Path(sys.executable).parent

WORKER_ID = "cli-test-worker"
# Content that contains this marker FAILS on its first processing and is READY when retried.
FAIL_MARKER = b"FAIL"
CORRUPT_CODE = "DOCUMENT_CORRUPT"
CORRUPT_MESSAGE = "the file could not be parsed: it looks corrupt"
STAGES = [
    document_pb2.DOCUMENT_STATUS_PARSING,
    document_pb2.DOCUMENT_STATUS_CHUNKING,
    document_pb2.DOCUMENT_STATUS_EMBEDDING,
    document_pb2.DOCUMENT_STATUS_INDEXING,
]
TAG = re.compile(r"<[^>]+>")


@dataclass
class Result:
    code: int
    out: str
    err: str


def chunk_texts(filename: str, content: bytes) -> list[str]:
    """The chunks of a text file: its paragraphs (HTML without tags), one page."""
    text = content.decode("utf-8", "replace")
    if filename.endswith((".html", ".htm")):
        text = TAG.sub("\n\n", text)
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return [p for p in paragraphs if p] or [text.strip() or filename]


class ScriptedWorker:
    """A thread that claims jobs from the real JobService and finishes them like a worker.

    Each stage is reported and lasts `step_seconds`. A document whose content holds
    FAIL_MARKER fails permanently with DOCUMENT_CORRUPT the first time; after a retry it
    completes. Every other document completes with its paragraphs as chunks, embedded with
    the collection's hashing embedder so that vector and hybrid search are meaningful.
    `pause()` returns once no job is being claimed or processed; `resume()` undoes it.
    """

    def __init__(self, address: str, step_seconds: float = 0.0) -> None:
        self.step_seconds = step_seconds
        self.channel = auth_keys.channel(address)
        self.jobs = job_service_pb2_grpc.JobServiceStub(self.channel)
        self.failed_once: set[str] = set()
        self.processed: list[str] = []
        self.errors: list[str] = []
        self._running = threading.Event()
        self._running.set()
        self._stopping = threading.Event()
        self._busy = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="scripted-worker", daemon=True)
        self._thread.start()

    def pause(self) -> None:
        self._running.clear()
        with self._busy:  # the job in hand (if any) is finished
            pass

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stopping.set()
        self._running.set()
        self._thread.join(10)
        self.channel.close()

    def _loop(self) -> None:
        while not self._stopping.is_set():
            if not self._running.wait(0.05):
                continue
            with self._busy:
                if not self._running.is_set() or self._stopping.is_set():
                    continue
                try:
                    response = self.jobs.ClaimJob(js.ClaimJobRequest(worker_id=WORKER_ID, wait_seconds=0.1), timeout=10)
                    if response.HasField("job"):
                        self._process(response.job)
                except grpc.RpcError as error:
                    if not self._stopping.is_set():
                        self.errors.append(f"{error.code().name}: {error.details()}")
                        time.sleep(0.05)
                except Exception:  # reported by the fixture, never lost
                    self.errors.append(traceback.format_exc())

    def _stage(self, job: js.Job, stage: int, done: int = 0, total: int = 0, unit: str = "") -> None:
        self.jobs.ReportStage(js.ReportStageRequest(lease=job.lease, stage=stage, done=done, total=total, unit=unit), timeout=10)
        if self.step_seconds:
            time.sleep(self.step_seconds)

    def _process(self, job: js.Job) -> None:
        content = b"".join(
            r.data for r in self.jobs.ReadDocumentContent(js.ReadDocumentContentRequest(lease=job.lease), timeout=10)
        )
        self._stage(job, document_pb2.DOCUMENT_STATUS_PARSING, 0, 1, "pages")
        if FAIL_MARKER in content and job.document_id not in self.failed_once:
            self.failed_once.add(job.document_id)
            self.processed.append(job.document_id)
            self.jobs.FailJob(
                js.FailJobRequest(lease=job.lease, retryable=False, error_code=CORRUPT_CODE, error_message=CORRUPT_MESSAGE),
                timeout=10,
            )
            return
        texts = chunk_texts(job.filename, content)
        self._stage(job, document_pb2.DOCUMENT_STATUS_CHUNKING, 0, 0, "chunks")
        self._stage(job, document_pb2.DOCUMENT_STATUS_EMBEDDING, 0, len(texts), "chunks")
        embedder = get_embedder(job.embedder.provider, job.embedder.model, job.embedder.dimensions)
        # The hashing embedder embeds at once; the others (the local model) through the async interface.
        vectors = embedder.embed_many(texts) if hasattr(embedder, "embed_many") else asyncio.run(embedder.embed_documents(texts))
        self._stage(job, document_pb2.DOCUMENT_STATUS_INDEXING, len(texts), len(texts), "chunks")

        def messages():
            yield js.CompleteJobRequest(header=js.CompleteJobHeader(lease=job.lease, chunk_count=len(texts)))
            yield js.CompleteJobRequest(
                chunks=js.ChunkBatch(
                    chunks=[
                        js.Chunk(index=i, text=t, page_number=1, element_type="NarrativeText", embedding=v)
                        for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
                    ]
                )
            )

        # Counted before the commit: a client that sees the document READY (or FAILED) finds it
        # here too (after it, a test reading the count the instant a sync's --wait ended missed one).
        self.processed.append(job.document_id)
        self.jobs.CompleteJob(messages(), timeout=30)


@dataclass
class Stack:
    ingest: str
    search: str
    worker: ScriptedWorker
    database_url: str
    args: list[str] = field(default_factory=list)


@pytest.fixture
def stack(ingest_api, database_url):
    """Real ingest-api and search on this test's database, with a ScriptedWorker."""
    search = RunningSearch(database_url)
    worker = ScriptedWorker(ingest_api.address)
    yield Stack(
        ingest_api.address,
        search.address,
        worker,
        database_url,
        ["--ingest-address", ingest_api.address, "--search-address", search.address],
    )
    worker.stop()
    search.stop()
    assert not worker.errors, worker.errors


@pytest.fixture(autouse=True)
def cli_credentials(tmp_path_factory, monkeypatch):
    """The default tenant's keys as a credentials file, as `make run` writes it."""
    import json

    path = tmp_path_factory.mktemp("credentials") / "credentials"
    path.write_text(json.dumps({"tenant": "default", "keys": auth_keys.KEYS}))
    monkeypatch.setenv("SLUICE_CREDENTIALS", str(path))
    monkeypatch.delenv("SLUICE_API_KEY", raising=False)
    return path


# What an in-process test server's grpc prints to this process's stderr when a stream of an earlier
# call is closed under it (its cython layer's GeneratorExit traceback): not the CLI's output, and
# a `sluice` of its own process never sees it (a clean-clone CI run caught it in a watch test).
GRPC_SERVER_NOISE = re.compile(
    r'Traceback \(most recent call last\):\n  File "src/python/grpcio/grpc/_cython/[^\n]*\n(?:[^\n]*\n)*?GeneratorExit\n'
)


@pytest.fixture
def sluice(capsys, monkeypatch):
    """Run `sluice ARGS…` in this process (fast); returns exit code, stdout, stderr."""
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str) -> Result:
        from sluice_cli.main import run as cli_run

        capsys.readouterr()
        code = cli_run([str(a) for a in args])
        captured = capsys.readouterr()
        err = GRPC_SERVER_NOISE.sub("", captured.err)
        scan_cli_output(args, captured.out, err)
        return Result(code, captured.out, err)

    return run


def run_sluice_process(*args: str, env: dict | None = None, timeout: float = 120, cwd=None) -> Result:
    """Run the installed `sluice` console script as its own process."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    proc = subprocess.run(
        [str(VENV_BIN / "sluice"), *map(str, args)], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=cwd
    )
    scan_cli_output(args, proc.stdout, proc.stderr)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def docs_folder(tmp_path):
    """A small folder tree of text documents with hidden files that must be skipped."""
    root = tmp_path / "docs"
    (root / "nested" / "deeper").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "alpha.md").write_text("# Alpha\n\nSluice turns documents into searchable chunks.\n")
    (root / "nested" / "beta.txt").write_text("Workers claim leased jobs and embed chunks with pgvector.\n")
    (root / "nested" / "deeper" / "gamma.html").write_text("<h1>Gamma</h1><p>Hybrid search fuses keyword and vector ranks.</p>")
    (root / ".hidden.md").write_text("must not be uploaded")
    (root / ".git" / "config").write_text("must not be uploaded")
    return root
