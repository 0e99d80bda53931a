"""Hostile inputs ("nothing half-stored, nothing lost"): characters PostgreSQL cannot store,
servers refusing a job's data, and files whose text the parser would silently drop."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import pytest
from sluice.v1 import document_pb2

from sluice_worker import pipeline as pipeline_module
from sluice_worker.domain import ChunkRecord, storable_chunks
from sluice_worker.jobs_client import JobClient, job_failure_of
from sluice_worker.pipeline import JobPipeline
from sluice_worker.runner import Worker

from .e2e import Docs, InProcessWorker, chunk_rows, worker_settings

D = document_pb2


@pytest.fixture
async def docs(ingest_api):
    client = Docs(ingest_api.address)
    yield client
    await client.close()


async def test_a_text_file_with_nul_bytes_goes_ready_with_its_text(ingest_api, docs, sandbox_pool, database_url):
    await docs.create_collection("nul")
    content = b"A line with a NUL\x00 inside it.\n\nAnother\x00\x00 paragraph, NULs and all.\x00\n"
    uploaded = await docs.upload("nul", "nul.txt", content)
    async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool):
        document = await docs.wait(uploaded.id, timeout=60)
    assert document.status == D.DOCUMENT_STATUS_READY, document.error_message
    assert document.attempts == 1
    text = " ".join(row[1] for row in chunk_rows(database_url, document.id))
    assert "A line with a NUL inside it." in text and "Another paragraph, NULs and all." in text
    assert "\x00" not in text


def test_storable_chunks_drop_nul_and_lone_surrogates_and_renumber():
    chunks = [
        ChunkRecord(0, "\x00\x00"),
        ChunkRecord(1, "te\x00xt \udc80end", element_type="Narrative\x00Text", section_title="T\x00itle", text_as_html="<td>\x00</td>"),
    ]
    [only] = storable_chunks(chunks)
    assert (only.index, only.text, only.element_type, only.section_title, only.text_as_html) == (
        0, "text \ufffdend", "NarrativeText", "Title", "<td></td>"
    )
    assert chunks[1].text == "te\x00xt \udc80end", "the input is left as it was"


# --------------------------------------------------------------------------- ingest-api refuses the data


@contextlib.asynccontextmanager
async def worker_with(address: str, pool, **pipeline_options):
    """A real Worker (claim loop, heartbeats) whose pipeline takes extra options."""
    settings = worker_settings(address)
    client = JobClient(address)
    worker = Worker(client, JobPipeline(client, pool, settings, **pipeline_options), settings)
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.request_stop()
        await asyncio.wait_for(task, 60)
        await client.close()


def assert_failed_at_once(document, code: str, stage: int) -> None:
    """FAILED on the first attempt by the worker's FailJob, not by a lease running out."""
    assert document.status == D.DOCUMENT_STATUS_FAILED
    assert document.attempts == 1 and document.error_code == code, document.error_message
    assert "lease expired" not in document.error_message
    [attempt] = document.attempt_history
    assert attempt.outcome == D.ATTEMPT_OUTCOME_PERMANENT_FAILURE and attempt.error_code == code
    assert attempt.stage == stage and attempt.error_message == document.error_message


async def test_a_snapshot_refused_with_invalid_argument_fails_the_job_at_once(ingest_api, docs, sandbox_pool, monkeypatch):
    # A pipeline version longer than ingest-api accepts: SaveSnapshot answers INVALID_ARGUMENT.
    monkeypatch.setattr(pipeline_module, "UNSTRUCTURED_VERSION", "9" * 300)
    await docs.create_collection("refused-snapshot", max_attempts=3)
    uploaded = await docs.upload("refused-snapshot", "notes.md", b"# Notes\n\nSome text to keep.\n")
    async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool) as running:
        document = await docs.wait(uploaded.id, timeout=60)
    assert_failed_at_once(document, "INGEST_REJECTED", D.DOCUMENT_STATUS_CHUNKING)
    assert document.error_message.startswith("ingest-api refused the document's chunks (snapshot): pipeline_version")
    assert "INVALID_PIPELINE_VERSION" in document.error_message
    assert [r.outcome for r in running.worker.results] == ["failed"]


class WrongDimensions:
    provider = "test"

    async def embed_documents(self, texts):
        return [[0.6, 0.8, 0.0] for _ in texts]


async def test_chunks_refused_at_complete_job_fail_the_job_at_once(ingest_api, docs, sandbox_pool, database_url):
    await docs.create_collection("refused-chunks", dimensions=64, max_attempts=3)
    uploaded = await docs.upload("refused-chunks", "notes.md", b"# Notes\n\nSome text to keep.\n")
    async with worker_with(ingest_api.address, sandbox_pool, embedder_for=lambda _: WrongDimensions()) as worker:
        document = await docs.wait(uploaded.id, timeout=60)
    assert_failed_at_once(document, "INGEST_REJECTED", D.DOCUMENT_STATUS_INDEXING)
    assert "chunk 0 has a vector of 3 dimensions; the collection uses 64" in document.error_message
    assert [r.outcome for r in worker.results] == ["failed"]
    assert chunk_rows(database_url, document.id) == []


async def test_an_internal_error_of_ingest_api_is_retried_then_fails_with_it(ingest_api, docs, sandbox_pool, monkeypatch):
    async def broken_save_snapshot(*args, **kwargs):
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(ingest_api.app.service, "save_snapshot", broken_save_snapshot)
    await docs.create_collection("internal", max_attempts=2)
    uploaded = await docs.upload("internal", "notes.md", b"# Notes\n\nSome text to keep.\n")
    async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool) as running:
        document = await docs.wait(uploaded.id, timeout=60)
    assert document.status == D.DOCUMENT_STATUS_FAILED and document.attempts == 2
    assert document.error_code == "INGEST_ERROR"
    assert "ingest-api failed on the document's chunks (snapshot): internal error (reference" in document.error_message
    assert "disk is on fire" not in document.error_message, "ingest-api does not leak its internals"
    history = document.attempt_history
    assert [a.outcome for a in history] == [D.ATTEMPT_OUTCOME_RETRYABLE_FAILURE] * 2
    assert all(a.error_code == "INGEST_ERROR" and a.retryable and a.stage == D.DOCUMENT_STATUS_CHUNKING for a in history)
    assert [r.outcome for r in running.worker.results] == ["failed", "failed"]


@pytest.mark.parametrize(
    ("code", "retryable", "error_code"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, False, "INGEST_REJECTED"),
        (grpc.StatusCode.FAILED_PRECONDITION, False, "INGEST_REJECTED"),
        (grpc.StatusCode.NOT_FOUND, False, "INGEST_REJECTED"),
        (grpc.StatusCode.INTERNAL, True, "INGEST_ERROR"),
        (grpc.StatusCode.UNKNOWN, True, "INGEST_ERROR"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, True, "INGEST_ERROR"),
    ],
)
def test_answers_about_the_jobs_data_map_to_failures(code, retryable, error_code):
    failure = job_failure_of("CompleteJob", code, "SOME_REASON", "what was wrong")
    assert (failure.retryable, failure.code) == (retryable, error_code)
    assert failure.message.endswith("the document's chunks: what was wrong (SOME_REASON)")
