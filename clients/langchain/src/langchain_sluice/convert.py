"""Between Sluice's search hits and LangChain's `Document`s (the metadata: metadata.py)."""

from __future__ import annotations

from pathlib import PurePath

from langchain_core.documents import Document
from sluice_client import Hit

from .metadata import hit_metadata

# A file name made from a Document's source or id is cut to this length.
MAX_FILENAME_CHARACTERS = 200


def document_of(hit: Hit) -> Document:
    """A hit as a Document: its text (with its neighbours when the search asked for them), its
    metadata, and the chunk's id as the Document's id."""
    return Document(page_content=hit.context or hit.text, metadata=hit_metadata(hit), id=hit.chunk_id or None)


def filename_of(document: Document, position: int) -> str:
    """The file name a Document's text is uploaded under: its `source`'s last part, else its
    id, else `document-N`; always ending in .txt, since what is sent is plain text."""
    source = document.metadata.get("source")
    name = PurePath(str(source)).name if source else ""
    name = name or document.id or f"document-{position + 1}"
    name = name[:MAX_FILENAME_CHARACTERS]
    return name if name.endswith(".txt") else f"{name}.txt"
