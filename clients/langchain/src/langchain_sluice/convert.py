"""Between Sluice's search hits and metadata and LangChain's `Document`s.

A hit's metadata is the document's own metadata with its types (numbers, booleans,
datetimes, lists of strings; docs/search.md, "Typed metadata"), `source` (the file name unless
the document has a `source` of its own), and where the chunk comes from. Sluice's keys are
written last, so `score`, `chunk_id` and the rest always mean what they say here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from langchain_core.documents import Document
from sluice_client import Hit
from sluice_client.types import python_value

# The keys a hit's Document always has, besides the document's own metadata.
HIT_KEYS = (
    "document_id",
    "chunk_id",
    "filename",
    "page_number",
    "chunk_index",
    "element_type",
    "score",
    "first_stage_score",
    "rerank_score",
)
# A file name made from a Document's source or id is cut to this length.
MAX_FILENAME_CHARACTERS = 200


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """A hit's metadata for a LangChain Document or a LlamaIndex node (see the module's docstring)."""
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
        # page_content is then the chunk with its neighbours; the hit's own text stays here.
        metadata.update(
            chunk_text=hit.text,
            context_first_chunk_index=raw.context_first_chunk_index,
            context_last_chunk_index=raw.context_last_chunk_index,
        )
    return metadata


def document_of(hit: Hit) -> Document:
    """A hit as a Document: its text (with its neighbours when the search asked for them), its
    metadata, and the chunk's id as the Document's id."""
    return Document(page_content=hit.context or hit.text, metadata=hit_metadata(hit), id=hit.chunk_id or None)


def sluice_metadata(metadata: Mapping[str, Any], what: str = "the metadata") -> tuple[dict[str, str], dict[str, Any]]:
    """LangChain metadata as the SDK's `metadata` (strings) and `typed_metadata` (numbers,
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


def filename_of(document: Document, position: int) -> str:
    """The file name a Document's text is uploaded under: its `source`'s last part, else its
    id, else `document-N`; always ending in .txt, since what is sent is plain text."""
    source = document.metadata.get("source")
    name = PurePath(str(source)).name if source else ""
    name = name or document.id or f"document-{position + 1}"
    name = name[:MAX_FILENAME_CHARACTERS]
    return name if name.endswith(".txt") else f"{name}.txt"
