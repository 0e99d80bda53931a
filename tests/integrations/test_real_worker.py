"""Both integrations on what a real worker makes of real files: a PDF and a Word document
uploaded by langchain-sluice's SluiceUploader, parsed, chunked and embedded by
`python -m sluice_worker.main` (a subprocess), then read back with their real pages and element
types by both retrievers and the LlamaIndex reader."""

from __future__ import annotations

from pathlib import Path

from langchain_sluice import SluiceRetriever as LangChainRetriever
from langchain_sluice import SluiceUploader
from llama_index_sluice import SluiceReader
from llama_index_sluice import SluiceRetriever as LlamaIndexRetriever
from worker.e2e import WorkerProcess

from integrations.conftest import ROOT

DOCUMENTS = ROOT / "tests" / "fixtures" / "documents"
# On page 2 of report.pdf (tests/fixtures/documents/make_fixtures.py, REPORT_PAGES).
THROUGHPUT = "throughput grew as more worker processes were added; the embedding stage was the most expensive"


def test_real_files_come_back_with_their_pages_through_both_integrations(client, stack, tmp_path: Path):
    client.collections.create("reports", embedder="hashing", chunk_size=300, overlap=0)
    stack.worker.stop()  # the real worker processes these, not the ScriptedWorker
    worker = WorkerProcess(stack.ingest, tmp_path / "worker.log", SLUICE_WORKER_CONCURRENCY="1")
    try:
        stored = SluiceUploader("reports").upload_files(
            [DOCUMENTS / "report.pdf", DOCUMENTS / "handbook.docx"], metadata={"kind": "fixture", "quarter": 3}, timeout=240
        )
    finally:
        worker.kill()
    assert [(d.filename, d.status.name, d.error_message) for d in stored] == [
        ("report.pdf", "READY", ""),
        ("handbook.docx", "READY", ""),
    ], worker.log()[-3000:]
    report = stored[0]
    assert report.chunk_count > 1

    best = LangChainRetriever(collection="reports", top_k=3).invoke(THROUGHPUT)[0]
    assert best.metadata["filename"] == "report.pdf" and best.metadata["page_number"] == 2, best
    assert best.metadata["element_type"] and best.metadata["quarter"] == 3 and best.metadata["kind"] == "fixture"
    assert "Throughput" in best.page_content

    node = LlamaIndexRetriever("reports", top_k=3).retrieve(THROUGHPUT)[0]
    assert node.node.node_id == best.id and node.node.metadata["page_number"] == 2

    chunks = SluiceReader().load_data(document_ids=[report.id], per_chunk=True)
    assert len(chunks) == report.chunk_count
    assert {c.metadata["page_number"] for c in chunks} >= {1, 2}
    assert best.id in {c.id_ for c in chunks}
    whole = SluiceReader().load_data("reports")
    assert sorted(d.metadata["filename"] for d in whole) == ["handbook.docx", "report.pdf"]
    assert "Sluice Quarterly Report" in next(d.text for d in whole if d.id_ == report.id)
