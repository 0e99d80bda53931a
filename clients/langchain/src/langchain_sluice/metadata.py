"""Sluice metadata between the SDK and a framework's documents, with no framework in sight.

A hit's metadata is the document's own metadata with its types (numbers, booleans, datetimes,
lists of strings; docs/search.md, "Typed metadata"), `source` (the file name unless the
document has a `source` of its own), and where the chunk comes from. Sluice's keys are written
last, so `score`, `chunk_id` and the rest always mean what they say here.

langchain_sluice/metadata.py and llama_index_sluice/metadata.py are the same file (see
connection.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sluice_client import Chunk, Document, Hit
from sluice_client.types import python_value


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """A hit's metadata (see the module's docstring); with neighbours, the hit's own text too."""
    raw = hit.raw
    metadata: dict[str, Any] = dict(hit.metadata)
    metadata.update({key: python_value(value) for key, value in raw.typed_metadata.items()})
    metadata.setdefault("source", hit.filename)
    metadata.update(
        document_id=hit.document_id,
        chunk_id=hit.chunk_id,
        filename=hit.filename,
        page_number=hit.page_number,
        chunk_index=hit.chunk_index,
        element_type=raw.element_type,
        score=hit.score,
        first_stage_score=raw.first_stage_score,
        rerank_score=raw.rerank_score,
    )
    if hit.context:
        # The text is then the chunk with its neighbours; the hit's own text stays here.
        metadata.update(
            chunk_text=hit.text,
            context_first_chunk_index=raw.context_first_chunk_index,
            context_last_chunk_index=raw.context_last_chunk_index,
        )
    return metadata


def document_metadata(document: Document) -> dict[str, Any]:
    """A Sluice document's metadata as a hit of it shows it, without the chunk's keys."""
    metadata: dict[str, Any] = dict(document.metadata)
    metadata.update(document.typed_metadata)
    metadata.setdefault("source", document.filename)
    metadata.update(document_id=document.id, filename=document.filename, mime_type=document.mime_type)
    if document.source_uri:
        metadata["source_uri"] = document.source_uri
    return metadata


def chunk_metadata(document: Document, chunk: Chunk) -> dict[str, Any]:
    """A chunk's metadata as a hit of it shows it, without scores."""
    metadata = document_metadata(document)
    metadata.update(
        chunk_id=chunk.id,
        page_number=chunk.page_number,
        chunk_index=chunk.chunk_index,
        element_type=chunk.element_type,
    )
    if chunk.section_title:
        metadata["section_title"] = chunk.section_title
    return metadata


def sluice_metadata(metadata: Mapping[str, Any], what: str = "the metadata") -> tuple[dict[str, str], dict[str, Any]]:
    """A framework's metadata as the SDK's `metadata` (strings) and `typed_metadata` (numbers,
    booleans, datetimes and dates, lists of strings). None values are left out; anything else
    (a dict, a list of numbers…) is a ValueError naming the key, before anything is sent."""
    strings: dict[str, str] = {}
    typed: dict[str, Any] = {}
    for key, value in metadata.items():
        name = str(key)
        if value is None:
            continue
        if isinstance(value, str):
            strings[name] = value
        elif isinstance(value, (bool, int, float, dt.datetime, dt.date)):
            typed[name] = value
        elif isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
            typed[name] = list(value)
        else:
            raise ValueError(
                f"{what}: {name!r} is a {type(value).__name__}; Sluice metadata holds strings, numbers, booleans, "
                "datetimes and lists of strings (docs/search.md, 'Typed metadata'): convert or drop it first"
            )
    return strings, typed
