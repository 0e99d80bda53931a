"""Hostile inputs ("nothing half-stored, nothing lost"): characters PostgreSQL cannot store,
servers refusing a job's data, and files whose text the parser would silently drop."""

from __future__ import annotations

import pytest
from sluice.v1 import document_pb2

from sluice_worker.domain import ChunkRecord, storable_chunks

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
