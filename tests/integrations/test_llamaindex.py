"""llama_index_sluice against a running Sluice with the real llama-index-core: the retriever's
nodes, the SDK's filters and LlamaIndex's MetadataFilters, the async path, the reader's
Documents (whole or per chunk, disabled and edited chunks as search sees them), a missing
collection's error, and the README's example run as written."""

from __future__ import annotations

import asyncio

import auth_keys
import pytest
from llama_index.core.schema import MetadataMode
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
from llama_index_sluice import SluiceReader, SluiceRetriever
from sluice_client import NotFound, Unauthenticated

from integrations.conftest import FILENAMES, ROOT, readme_example, run_installed

README = ROOT / "clients" / "llamaindex" / "README.md"
MARKER = "<!-- run as written by tests/integrations/test_llamaindex.py -->"
SCALING = "how many worker processes should I run to scale"
QUERY = "search workers documents"


def names(nodes) -> set[str]:
    return {n.node.metadata["filename"] for n in nodes}


def test_the_retriever_returns_the_right_passage_first_as_a_scored_node(library):
    for mode in ("hybrid", "keyword", "vector"):
        nodes = SluiceRetriever("library", top_k=3, mode=mode).retrieve(SCALING)
        assert nodes and nodes[0].node.metadata["filename"] == "scaling-workers.md", (mode, names(nodes))
        assert len(nodes) <= 3
    best = SluiceRetriever("library", top_k=3).retrieve(SCALING)[0]
    node = best.node
    assert node.node_id == node.metadata["chunk_id"] and node.node_id
    assert node.ref_doc_id == library["scaling-workers.md"].id == node.metadata["document_id"]
    assert best.score == node.metadata["score"] > 0
    assert node.metadata["page_number"] == 1 and node.metadata["element_type"] == "NarrativeText"
    assert node.metadata["year"] == 2025 and node.metadata["reviewed"] is True
    assert node.metadata["tags"] == ["workers", "scaling"] and node.metadata["team"] == "ops"
    # What an LLM is shown: the text with the file name, page and the document's metadata, not
    # Sluice's bookkeeping.
    shown = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "filename: scaling-workers.md" in shown and "team: ops" in shown and node.text in shown
    assert node.metadata["chunk_id"] not in shown and "score" not in shown
    assert "source:" not in shown  # it only repeats the file name here


def test_filters_narrow_the_nodes(library):
    def found(**options) -> set[str]:
        return names(SluiceRetriever("library", top_k=20, **options).retrieve(QUERY))

    assert found() == FILENAMES
    assert found(filter={"team": "search"}) == {"search-modes.txt"}
    assert found(where=["year>=2024", "reviewed = true"]) == {"scaling-workers.md"}
    assert found(filenames=["operations.md"]) == {"operations.md"}
    # LlamaIndex's MetadataFilters, typed as Sluice compares them.
    assert found(filters=MetadataFilters(filters=[MetadataFilter(key="team", value="ops")])) == {"scaling-workers.md"}
    assert found(filters=MetadataFilters(filters=[MetadataFilter(key="year", value=2024, operator=FilterOperator.GTE)])) == {
        "scaling-workers.md",
        "search-modes.txt",
    }
    assert found(
        filters=MetadataFilters(filters=[MetadataFilter(key="team", value=["docs", "search"], operator=FilterOperator.IN)])
    ) == {
        "operations.md",
        "search-modes.txt",
    }
    assert found(filters=MetadataFilters(filters=[MetadataFilter(key="team", value=["ops"], operator=FilterOperator.NIN)])) == {
        "operations.md",
        "search-modes.txt",
    }
    either = MetadataFilters(
        filters=[MetadataFilter(key="year", value=2023), MetadataFilter(key="team", value="search")], condition=FilterCondition.OR
    )
    assert found(filters=either) == {"operations.md", "search-modes.txt"}
    tags = MetadataFilter(key="tags", value="scaling", operator=FilterOperator.CONTAINS)
    assert found(filters=MetadataFilters(filters=[tags])) == {"scaling-workers.md"}
    every = MetadataFilter(key="tags", value=["workers", "scaling"], operator=FilterOperator.ALL)
    assert found(filters=MetadataFilters(filters=[every])) == {"scaling-workers.md"}
    anyof = MetadataFilter(key="tags", value=["search", "overview"], operator=FilterOperator.ANY)
    assert found(filters=MetadataFilters(filters=[anyof])) == {"search-modes.txt", "operations.md"}
    assert (
        found(filters=MetadataFilters(filters=[MetadataFilter(key="owner", value=None, operator=FilterOperator.IS_EMPTY)]))
        == FILENAMES
    )
    # MetadataFilters and the SDK's where together: both hold.
    recent = MetadataFilters(filters=[MetadataFilter(key="year", value=2024, operator=FilterOperator.GTE)])
    assert found(filters=recent, where="reviewed = false") == {"search-modes.txt"}
    # What Sluice cannot express is refused before any call.
    with pytest.raises(ValueError, match="no 'text_match' filter"):
        found(filters=MetadataFilters(filters=[MetadataFilter(key="team", value="o", operator=FilterOperator.TEXT_MATCH)]))
    with pytest.raises(ValueError, match="no 'not' group"):
        found(filters=MetadataFilters(filters=[MetadataFilter(key="team", value="ops")], condition=FilterCondition.NOT))
    # Options are read at each call.
    retriever = SluiceRetriever("library", top_k=20)
    retriever.top_k = 1
    assert len(retriever.retrieve(QUERY)) == 1


def test_async_retrieval_matches_sync_in_each_event_loop(library):
    retriever = SluiceRetriever("library", top_k=3)
    expected = [n.node.node_id for n in retriever.retrieve(SCALING)]
    for _ in range(2):  # two asyncio.run in turn: an AsyncClient per event loop
        got = asyncio.run(retriever.aretrieve(SCALING))
        assert [n.node.node_id for n in got] == expected

    async def together():
        return await asyncio.gather(retriever.aretrieve(SCALING), retriever.aretrieve("keyword search"))

    scaling, search = asyncio.run(together())
    assert scaling[0].node.metadata["filename"] == "scaling-workers.md"
    assert search[0].node.metadata["filename"] == "search-modes.txt"


def test_the_reader_reads_the_collection_as_sluice_parsed_it(client, library):
    reader = SluiceReader()
    documents = {d.metadata["filename"]: d for d in reader.load_data("library")}
    assert set(documents) == FILENAMES
    scaling = documents["scaling-workers.md"]
    stored = library["scaling-workers.md"]
    assert scaling.id_ == stored.id and scaling.metadata["document_id"] == stored.id
    assert scaling.metadata["year"] == 2025 and scaling.metadata["tags"] == ["workers", "scaling"]
    assert scaling.metadata["mime_type"] == "text/markdown"
    chunks = list(client.documents.iter_chunks(stored.id))
    assert len(chunks) == stored.chunk_count > 1
    assert scaling.text == "\n\n".join(c.text for c in chunks)

    # Per chunk: Sluice's chunking kept, each chunk pointing at its document.
    per_chunk = reader.load_data(document_ids=[stored.id], per_chunk=True)
    assert [d.id_ for d in per_chunk] == [c.id for c in chunks]
    assert [d.text for d in per_chunk] == [c.text for c in chunks]
    assert {d.ref_doc_id for d in per_chunk} == {stored.id}
    assert [d.metadata["chunk_index"] for d in per_chunk] == list(range(len(chunks)))
    assert per_chunk[0].metadata["page_number"] == 1 and per_chunk[0].metadata["team"] == "ops"

    # What search sees: a disabled chunk is left out, an edited one read with its new text.
    client.documents.disable_chunk(chunks[0].id)
    client.documents.edit_chunk(chunks[1].id, "Edited: run two workers per core.")
    after = reader.load_data(document_ids=[stored.id], per_chunk=True)
    assert [d.id_ for d in after] == [c.id for c in chunks[1:]]
    assert after[0].text == "Edited: run two workers per core."

    # Async: the same Documents.
    together = asyncio.run(reader.aload_data("library"))
    assert sorted(d.id_ for d in together) == sorted(d.id_ for d in reader.load_data("library"))
    assert {d.id_: d.text for d in together} == {d.id_: d.text for d in reader.load_data("library")}


def test_the_reader_refuses_a_document_that_is_not_ready(client, stack):
    client.collections.create("notes", embedder="hashing")
    stack.worker.pause()
    try:
        pending = client.documents.upload("notes", b"Not processed yet.", filename="later.txt")
        with pytest.raises(ValueError, match=rf"{pending.id} \(later.txt\) is PENDING, not READY"):
            SluiceReader().load_data(document_ids=[pending.id])
        assert SluiceReader().load_data("notes") == []  # only READY documents are read
    finally:
        stack.worker.resume()


def test_the_connection_comes_from_arguments_or_from_a_client_given(client, library, stack, monkeypatch):
    for name in ("SLUICE_INGEST_ADDRESS", "SLUICE_SEARCH_ADDRESS", "SLUICE_CREDENTIALS"):
        monkeypatch.delenv(name)
    key = auth_keys.KEYS["client"]
    explicit = SluiceRetriever("library", address=stack.ingest, search_address=stack.search, api_key=key)
    assert explicit.retrieve(SCALING)[0].node.metadata["filename"] == "scaling-workers.md"
    assert len(SluiceReader(address=stack.ingest, api_key=key).load_data("library")) == len(FILENAMES)
    given = SluiceRetriever("library", client=client)
    assert [n.node.node_id for n in given.retrieve(SCALING)] == [n.node.node_id for n in explicit.retrieve(SCALING)]
    assert len(SluiceReader(client=client).load_data("library")) == len(FILENAMES)
    with pytest.raises(Unauthenticated):
        SluiceRetriever("library", address=stack.ingest, search_address=stack.search, api_key="sk-wrong").retrieve(SCALING)


def test_a_missing_collection_raises_a_clear_error(stack):
    with pytest.raises(NotFound) as error:
        SluiceRetriever("no-such-collection").retrieve("anything")
    assert error.value.reason == "COLLECTION_NOT_FOUND"
    assert "no-such-collection" in str(error.value)
    with pytest.raises(NotFound):
        asyncio.run(SluiceRetriever("no-such-collection").aretrieve("anything"))
    with pytest.raises(NotFound) as error:
        SluiceReader().load_data("no-such-collection")
    assert error.value.reason == "COLLECTION_NOT_FOUND"
    with pytest.raises(NotFound):
        asyncio.run(SluiceReader().aload_data("no-such-collection"))


def test_the_shared_modules_are_the_same_in_both_packages():
    """connection.py, metadata.py and reading.py are one text kept in two packages (neither
    depends on the other's framework): a change to one must be made to both."""
    for name in ("connection.py", "metadata.py", "reading.py"):
        langchain = (ROOT / "clients/langchain/src/langchain_sluice" / name).read_text()
        llamaindex = (ROOT / "clients/llamaindex/src/llama_index_sluice" / name).read_text()
        assert langchain == llamaindex, f"{name} differs between langchain_sluice and llama_index_sluice"


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
    # MockLLM echoes its prompt: the passages, with their file name, are in it.
    assert "filename: scaling-workers.md" in result.stdout and "Question: How do I scale workers?" in result.stdout, result.stdout
