"""Hostile inputs ("nothing half-stored, nothing lost"): characters PostgreSQL cannot store,
servers refusing a job's data, and files whose text the parser would silently drop."""

from __future__ import annotations

import asyncio
import contextlib
import io
import zipfile

import auth_keys
import grpc
import pytest
from lxml import etree
from sluice.v1 import document_pb2
from sluice_worker import pipeline as pipeline_module
from sluice_worker.domain import ChunkRecord, DocumentInvalid, storable_chunks
from sluice_worker.jobs_client import JobClient, job_failure_of
from sluice_worker.parsing.partition import _check_no_text_lost
from sluice_worker.parsing.xmltrees import _depth_and_limit_error, flatten_html, prepare_html
from sluice_worker.pipeline import JobPipeline
from sluice_worker.runner import Worker

from .e2e import InProcessWorker, chunk_rows, worker_settings
from .test_parsing import LIMITS

D = document_pb2


@pytest.fixture
def ingest_api(ingest_api_with_its_own_lease):
    return ingest_api_with_its_own_lease


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
        ChunkRecord(
            1, "te\x00xt \udc80end", element_type="Narrative\x00Text", section_title="T\x00itle", text_as_html="<td>\x00</td>"
        ),
    ]
    [only] = storable_chunks(chunks)
    assert (only.index, only.text, only.element_type, only.section_title, only.text_as_html) == (
        0,
        "text \ufffdend",
        "NarrativeText",
        "Title",
        "<td></td>",
    )
    assert chunks[1].text == "te\x00xt \udc80end", "the input is left as it was"


# --------------------------------------------------------------------------- ingest-api refuses the data


@contextlib.asynccontextmanager
async def worker_with(address: str, pool, **pipeline_options):
    """A real Worker (claim loop, lease renewals) whose pipeline takes extra options."""
    settings = worker_settings(address)
    client = JobClient(address, api_key=auth_keys.KEYS["worker"])
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

    monkeypatch.setattr(ingest_api.app.jobs, "save_snapshot", broken_save_snapshot)
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


# --------------------------------------------------------------------------- text the parser would drop

ONE_PARAGRAPH_CHARS = 10_500_000


def one_paragraph_html() -> bytes:
    sentence = "Sluice keeps every sentence of a very long paragraph. "
    body = (sentence * (ONE_PARAGRAPH_CHARS // len(sentence) + 1))[:ONE_PARAGRAPH_CHARS]
    return f"<html><body><h1>One paragraph</h1><p>{body}</p><p>The closing line survives too.</p></body></html>".encode()


def deeply_nested_html(depth: int = 100_000) -> bytes:
    return (
        "<html><body><h1>Nested</h1>"
        + "<div>" * depth
        + "<p>The text at the very bottom is kept.</p>"
        + "</div>" * depth
        + "<p>And the text after it.</p></body></html>"
    ).encode()


async def test_html_of_one_10_5_mb_paragraph_goes_ready_with_its_text(ingest_api, docs, sandbox_pool, database_url):
    # Big chunks keep the chunk count (and the test's time) down; the text is what matters.
    await docs.create_collection("long", max_characters=8000, new_after=7000)
    uploaded = await docs.upload("long", "long.html", one_paragraph_html())
    settings = worker_settings(ingest_api.address, parse_timeout_seconds=300)
    async with InProcessWorker(settings, sandbox_pool):
        document = await docs.wait(uploaded.id, timeout=600)
    assert document.status == D.DOCUMENT_STATUS_READY, document.error_message
    rows = chunk_rows(database_url, document.id)
    text = "".join(row[1] for row in rows)
    assert text.count("Sluice keeps every sentence") >= ONE_PARAGRAPH_CHARS // 60
    assert rows[0][1].startswith("One paragraph") and rows[-1][1].endswith("The closing line survives too.")


async def test_html_nested_100000_deep_goes_ready_with_its_text(ingest_api, docs, sandbox_pool, database_url):
    await docs.create_collection("deep")
    uploaded = await docs.upload("deep", "deep.html", deeply_nested_html())
    async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool):
        document = await docs.wait(uploaded.id, timeout=120)
    assert document.status == D.DOCUMENT_STATUS_READY, document.error_message
    text = " ".join(row[1] for row in chunk_rows(database_url, document.id))
    assert "Nested" in text and "The text at the very bottom is kept." in text and "And the text after it." in text


def test_flattening_keeps_the_text_in_order_and_bounds_the_depth():
    nested_lists = "<ul>" + "<li>item <ul>" * 1000 + "<li>bottom</li>" + "</ul></li>" * 1000 + "</ul><p>after &amp; done</p>"
    flat = flatten_html(nested_lists, 50)
    depth, limit_error = _depth_and_limit_error(flat)
    assert depth <= 60 and not limit_error
    text = " ".join(etree.fromstring(flat, etree.HTMLParser()).itertext()).split()
    assert text == ["item"] * 1000 + ["bottom", "after", "&", "done"]
    # Shallow HTML is left exactly as it was.
    page = "<html><body><p>a<p>b<ul><li>c<li>d</ul></body></html>"
    assert prepare_html(page) == page


async def test_docx_with_a_10_5_mb_text_run_is_read_whole(sandbox_pool):
    text = ("A run of text in a Word file that goes on. " * 250_000)[:ONE_PARAGRAPH_CHARS]
    async with sandbox_pool.session() as box:
        summary = await box.parse(
            office_docx(f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"), "long.docx", "", LIMITS, timeout=300, progress=None
        )
    assert summary.characters == len(text.strip())


async def test_docx_nested_past_the_xml_parsers_limit_names_the_limit(sandbox_pool):
    nested = "<w:sdt><w:sdtContent>" * 3000 + "<w:p><w:r><w:t>deep</w:t></w:r></w:p>" + "</w:sdtContent></w:sdt>" * 3000
    with pytest.raises(DocumentInvalid) as caught:
        async with sandbox_pool.session() as box:
            await box.parse(office_docx(nested), "deep.docx", "", LIMITS, timeout=60, progress=None)
    assert caught.value.code == "PARSER_LIMIT"
    assert "nested more than 2048 levels deep" in caught.value.message and "Word (DOCX)" in caught.value.message


def office_docx(body_xml: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
            "</Types>",
        )
        archive.writestr(
            "_rels/.rels",
            '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>'
            "</Relationships>",
        )
        archive.writestr(
            "word/document.xml",
            '<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
            f"<w:body>{body_xml}</w:body></w:document>",
        )
    return out.getvalue()


@pytest.mark.parametrize(
    ("fmt", "content", "lost"),
    [
        ("html", b"<html><body><p>Hello there, visible text.</p></body></html>", True),
        ("text", b"Plain text\x00 with a NUL.", True),
        ("html", b"<html><head><title>Only a title</title><script>var x = 1;</script></head><body> &nbsp; </body></html>", False),
        ("text", b"\x00\x00 \n\t", False),
        ("markdown", b"---\n\n***\n", False),
    ],
)
def test_no_text_from_the_parser_is_lost_text_when_the_file_has_some(fmt, content, lost):
    if lost:
        with pytest.raises(DocumentInvalid) as caught:
            _check_no_text_lost(fmt, content)
        assert caught.value.code == "PARSER_LOST_TEXT"
        assert caught.value.message.startswith("the parser found no text although the file contains about ")
        assert "visible text" in caught.value.message or "NUL" in caught.value.message
    else:
        _check_no_text_lost(fmt, content)  # empty as far as anyone can tell: DOCUMENT_EMPTY follows
