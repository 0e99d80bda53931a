"""Each chunk records the types of the elements it was cut from, in order of first appearance
(Chunk.element_types, docs/chunks.md): unstructured's composite chunks carry their original
elements, a table chunk is a Table."""

from __future__ import annotations

from sluice_worker.domain import ChunkingSettings, storable_chunks
from sluice_worker.jobs_client import chunk_from_proto, chunk_to_proto
from sluice_worker.parsing.chunking import chunk_elements
from sluice_worker.parsing.partition import ParseLimits, partition_document

MARKDOWN = b"""# Harbour rules

Every vessel reports to the harbour master on arrival.

- Moor at the assigned berth.
- Keep the quay clear.

| Vessel | Berth |
|---|---|
| Aurora | 4 |
"""


def test_chunks_record_the_types_of_their_elements():
    elements, _ = partition_document(MARKDOWN, "rules.md", "text/markdown", ParseLimits())
    records = storable_chunks(chunk_elements(elements, ChunkingSettings(1000, 800, 0), 100))
    text = [r for r in records if r.element_type != "Table"]
    tables = [r for r in records if r.element_type == "Table"]
    assert text and tables
    assert text[0].element_types[:2] == ["Title", "NarrativeText"] and "ListItem" in text[0].element_types
    assert len(set(text[0].element_types)) == len(text[0].element_types)  # each type once
    assert text[0].element_type in text[0].element_types
    assert all(t.element_types == ["Table"] for t in tables)
    # They travel to ingest-api and back (snapshots) unchanged.
    assert [chunk_from_proto(chunk_to_proto(r)).element_types for r in records] == [r.element_types for r in records]
