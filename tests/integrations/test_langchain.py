"""langchain_sluice against a running Sluice with the real langchain-core: the retriever's hits,
filters, modes and async path, the uploader's Documents and files coming back with their
metadata, the loader reading a collection back, a missing collection's error, and the README's
example run as written."""

from __future__ import annotations

import asyncio
import datetime as dt

import auth_keys
import pytest
from langchain_core.documents import Document
from langchain_sluice import SluiceLoader, SluiceRetriever, SluiceUploader
from sluice_client import NotFound, Unauthenticated

from integrations.conftest import FILENAMES, ROOT, readme_example, run_installed

README = ROOT / "clients" / "langchain" / "README.md"
MARKER = "<!-- run as written by tests/integrations/test_langchain.py -->"
SCALING = "how many worker processes should I run to scale"


def test_the_retriever_returns_the_right_passage_first_with_its_document_and_chunk(library):
    retriever = SluiceRetriever(collection="library", top_k=3)
    for mode in ("hybrid", "keyword", "vector"):
        documents = SluiceRetriever(collection="library", top_k=3, mode=mode).invoke(SCALING)
        assert documents, mode
        assert documents[0].metadata["filename"] == "scaling-workers.md", (mode, [d.metadata["filename"] for d in documents])
    best = retriever.invoke(SCALING)[0]
    document = library["scaling-workers.md"]
    assert "SLUICE_DEV_WORKERS" in best.page_content or "worker" in best.page_content.lower()
    assert best.id == best.metadata["chunk_id"] and best.id
    assert best.metadata["document_id"] == document.id
    assert best.metadata["source"] == "scaling-workers.md"
    assert best.metadata["page_number"] == 1  # the ScriptedWorker puts every chunk on page 1
    assert best.metadata["element_type"] == "NarrativeText"
    assert isinstance(best.metadata["chunk_index"], int)
    assert best.metadata["score"] > 0
    # The document's metadata, with its types.
    assert best.metadata["team"] == "ops"
    assert best.metadata["year"] == 2025
    assert best.metadata["reviewed"] is True
    assert best.metadata["tags"] == ["workers", "scaling"]
    assert len(retriever.invoke(SCALING)) <= 3


def test_filters_narrow_the_hits(library):
    query = "search workers documents"
    everything = {d.metadata["filename"] for d in SluiceRetriever(collection="library", top_k=20).invoke(query)}
    assert everything == FILENAMES
    by_team = SluiceRetriever(collection="library", top_k=20, filter={"team": "search"}).invoke(query)
    assert by_team and {d.metadata["filename"] for d in by_team} == {"search-modes.txt"}
    recent = SluiceRetriever(collection="library", top_k=20, where=["year>=2024", "reviewed = true"]).invoke(query)
    assert {d.metadata["filename"] for d in recent} == {"scaling-workers.md"}
    by_name = SluiceRetriever(collection="library", top_k=20, filenames=["operations.md"]).invoke(query)
    assert {d.metadata["filename"] for d in by_name} == {"operations.md"}
    # Per call, over the retriever's own settings.
    retriever = SluiceRetriever(collection="library", top_k=20)
    assert len(retriever.invoke(query, top_k=1)) == 1
    assert {d.metadata["filename"] for d in retriever.invoke(query, where="year < 2024")} == {"operations.md"}
    one_each = retriever.invoke(query, max_per_document=1)
    assert len(one_each) == len({d.metadata["document_id"] for d in one_each})


def test_neighbors_give_the_chunk_with_its_context(library):
    hit = SluiceRetriever(collection="library", top_k=1, neighbors=1, rerank=False).invoke(SCALING)[0]
    assert hit.metadata["chunk_text"] in hit.page_content
    assert len(hit.page_content) > len(hit.metadata["chunk_text"])
    assert hit.metadata["context_first_chunk_index"] <= hit.metadata["chunk_index"] <= hit.metadata["context_last_chunk_index"]


def test_async_retrieval_matches_sync_in_each_event_loop(library):
    retriever = SluiceRetriever(collection="library", top_k=3)
    expected = [d.id for d in retriever.invoke(SCALING)]
    # Two event loops in turn (two asyncio.run, as scripts do): each gets an AsyncClient of its own.
    for _ in range(2):
        got = asyncio.run(retriever.ainvoke(SCALING))
        assert [d.id for d in got] == expected
        assert got[0].metadata["filename"] == "scaling-workers.md"

    async def together():
        return await asyncio.gather(retriever.ainvoke(SCALING), retriever.ainvoke("keyword search", filter={"team": "search"}))

    scaling, search = asyncio.run(together())
    assert scaling[0].metadata["filename"] == "scaling-workers.md"
    assert {d.metadata["filename"] for d in search} == {"search-modes.txt"}


def test_the_loader_reads_the_collection_back_as_sluice_parsed_it(client, library):
    documents = {d.metadata["filename"]: d for d in SluiceLoader("library").load()}
    assert set(documents) == FILENAMES
    stored = library["scaling-workers.md"]
    chunks = list(client.documents.iter_chunks(stored.id))
    scaling = documents["scaling-workers.md"]
    assert scaling.id == stored.id and scaling.page_content == "\n\n".join(c.text for c in chunks)
    assert scaling.metadata["year"] == 2025 and scaling.metadata["tags"] == ["workers", "scaling"]
    assert scaling.metadata["mime_type"] == "text/markdown" and scaling.metadata["document_id"] == stored.id
    per_chunk = SluiceLoader(document_ids=[stored.id], per_chunk=True).load()
    assert [d.id for d in per_chunk] == [c.id for c in chunks]
    assert [d.metadata["chunk_index"] for d in per_chunk] == list(range(len(chunks)))
    # A loaded chunk and a hit of it say the same.
    hit = SluiceRetriever(collection="library", top_k=1).invoke(SCALING)[0]
    loaded = next(d for d in per_chunk if d.id == hit.id)
    assert loaded.page_content == hit.page_content
    shared = set(loaded.metadata) & set(hit.metadata)
    assert {"team", "year", "tags", "source", "filename", "document_id", "chunk_id", "page_number", "chunk_index"} <= shared
    assert {k: loaded.metadata[k] for k in shared} == {k: hit.metadata[k] for k in shared}
    # Async: the same Documents.
    together = asyncio.run(SluiceLoader("library", per_chunk=True).aload())
    assert sorted(d.id for d in together) == sorted(d.id for d in SluiceLoader("library", per_chunk=True).load())
    with pytest.raises(ValueError, match="name a collection, or document_ids"):
        SluiceLoader()


def test_a_copied_retriever_searches_on_its_own_connection(library):
    retriever = SluiceRetriever(collection="library", top_k=3)
    assert len(retriever.invoke(SCALING)) == 3
    copied = retriever.model_copy(deep=True, update={"top_k": 1})
    assert [d.id for d in copied.invoke(SCALING)] == [retriever.invoke(SCALING)[0].id]
    retriever.close()  # the copy's client is its own
    assert len(copied.invoke(SCALING)) == 1


def test_the_connection_comes_from_arguments_or_from_a_client_given(client, library, stack, monkeypatch):
    for name in ("SLUICE_INGEST_ADDRESS", "SLUICE_SEARCH_ADDRESS", "SLUICE_CREDENTIALS"):
        monkeypatch.delenv(name)
    key = auth_keys.KEYS["client"]
    explicit = SluiceRetriever(collection="library", address=stack.ingest, search_address=stack.search, api_key=key)
    assert explicit.invoke(SCALING)[0].metadata["filename"] == "scaling-workers.md"
    assert key not in repr(explicit) and key not in explicit.model_dump_json()  # a SecretStr
    given = SluiceRetriever(collection="library", client=client)
    assert [d.id for d in given.invoke(SCALING)] == [d.id for d in explicit.invoke(SCALING)]
    given.close()  # a client given is its owner's: still open
    assert client.search("library", SCALING)
    wrong = SluiceRetriever(collection="library", address=stack.ingest, search_address=stack.search, api_key="sk-wrong")
    with pytest.raises(Unauthenticated):
        wrong.invoke(SCALING)
    with pytest.raises(Unauthenticated):
        SluiceUploader("library", address=stack.ingest, api_key="sk-wrong").upload_documents([Document(page_content="x")])


def test_a_missing_collection_raises_a_clear_error(stack):
    retriever = SluiceRetriever(collection="no-such-collection")
    with pytest.raises(NotFound) as error:
        retriever.invoke("anything")
    assert error.value.reason == "COLLECTION_NOT_FOUND"
    assert "no-such-collection" in str(error.value)
    with pytest.raises(NotFound):
        asyncio.run(retriever.ainvoke("anything"))
    with pytest.raises(NotFound):
        SluiceUploader("no-such-collection").upload_documents([Document(page_content="text")])
    with pytest.raises(NotFound) as error:
        SluiceLoader("no-such-collection").load()
    assert error.value.reason == "COLLECTION_NOT_FOUND"


def test_uploaded_documents_come_back_with_their_metadata(client, stack):
    client.collections.create("notes", embedder="hashing")
    published = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC)
    documents = [
        Document(
            page_content="Leases expire after thirty seconds without a renewal; another worker then takes the job.",
            metadata={"source": "runbook/leases.md", "page": 3, "draft": False, "published": published, "owners": ["ana", "bo"]},
        ),
        Document(page_content="Backups run every night at two and are kept for a fortnight.", metadata={"source": "backups"}),
        Document(page_content="Dashboards show queue depth per collection.", id="dashboards", metadata={"author": None}),
    ]
    with SluiceUploader("notes") as uploader:
        stored = uploader.upload_documents(documents)
    assert [d.ready for d in stored] == [True, True, True], [(d.status, d.error_message) for d in stored]
    assert [d.filename for d in stored] == ["leases.md.txt", "backups.txt", "dashboards.txt"]
    assert [d.mime_type for d in stored] == ["text/plain"] * 3
    assert stored[2].source_uri == "dashboards" and stored[0].source_uri == ""
    assert stored[0].typed_metadata["page"] == 3
    assert "author" not in stored[2].metadata

    hit = SluiceRetriever(collection="notes", top_k=1).invoke("when do leases expire")[0]
    assert hit.metadata["document_id"] == stored[0].id
    assert hit.page_content == documents[0].page_content
    assert hit.metadata["source"] == "runbook/leases.md"
    assert hit.metadata["page"] == 3
    assert hit.metadata["draft"] is False
    assert hit.metadata["published"] == published
    assert hit.metadata["owners"] == ["ana", "bo"]
    # The metadata filters as it was typed.
    found = SluiceRetriever(collection="notes", top_k=5, where=["page >= 3", "published < 2025-01-01"]).invoke("leases")
    assert [d.metadata["document_id"] for d in found] == [stored[0].id]

    # A Document's id names its source: new text under it is a new version that replaces the old.
    changed = Document(page_content="Dashboards show queue depth and lease renewals.", id="dashboards")
    again = asyncio.run(SluiceUploader("notes").aupload_documents([changed]))
    assert again[0].ready and again[0].source_uri == "dashboards" and again[0].version == 2
    texts = [d.page_content for d in SluiceRetriever(collection="notes", top_k=10).invoke("dashboards queue depth")]
    assert changed.page_content in texts and documents[2].page_content not in texts


def test_metadata_that_sluice_cannot_hold_is_refused_before_anything_is_sent(client, stack):
    client.collections.create("notes", embedder="hashing")
    documents = [
        Document(page_content="fine", metadata={"source": "a"}),
        Document(page_content="nested", metadata={"coordinates": {"x": 1}}),
    ]
    with pytest.raises(ValueError, match=r"document 2: 'coordinates' is a dict"):
        SluiceUploader("notes").upload_documents(documents)
    assert list(client.documents.list("notes")) == []


def test_files_and_folders_upload_with_their_metadata(client, stack, tmp_path):
    client.collections.create("files", embedder="hashing")
    folder = tmp_path / "handbook"
    (folder / "nested").mkdir(parents=True)
    (folder / "vacation.md").write_text("# Vacation\n\nAsk your manager two weeks before a vacation.\n")
    (folder / "nested" / "expenses.txt").write_text("Expenses are reimbursed within ten days.\n")
    (folder / ".hidden.txt").write_text("never uploaded")
    uploader = SluiceUploader("files")
    stored = uploader.upload_files([folder], metadata={"team": "people", "year": 2026})
    assert sorted(d.filename for d in stored) == ["expenses.txt", "vacation.md"]
    assert all(d.ready for d in stored)
    hit = SluiceRetriever(collection="files", top_k=1).invoke("how are expenses reimbursed")[0]
    assert hit.metadata["filename"] == "expenses.txt"
    assert hit.metadata["team"] == "people" and hit.metadata["year"] == 2026
    # Async, without waiting: PENDING or further, and READY afterwards.
    extra = tmp_path / "parking.txt"
    extra.write_text("Parking permits are issued by the front desk.")
    pending = asyncio.run(uploader.aupload_files(extra, wait=False))  # one path alone
    assert len(pending) == 1
    assert client.documents.wait(pending[0].id, timeout=60).ready
    uploader.close()


def test_the_readme_example_runs_as_written_on_the_installed_packages(client, stack, installed, tmp_path):
    code = readme_example(README, MARKER)
    assert len([line for line in code.splitlines() if line.strip()]) <= 12, code
    # The example's collection, made here on the hashing embedder (its create(exist_ok=True)
    # then finds it): the local model would cost search a model load, which proves nothing here.
    client.collections.create("notes", embedder="hashing")
    script = tmp_path / "readme_example.py"
    script.write_text(code)
    result = run_installed(installed, stack, script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "scaling-workers.md" in result.stdout, result.stdout
