"""SluiceReader: a Sluice collection's documents, as Sluice parsed and chunked them, as LlamaIndex
`Document`s.

Why it reads rather than uploads: a LlamaIndex reader turns a source into Documents, and what
Sluice holds that LlamaIndex cannot make by itself is the text its workers extracted (PDF, Word,
PowerPoint, HTML, e-mail, scans through OCR), with page numbers, element types and the
documents' metadata. Reading it back lets a LlamaIndex pipeline build its own index, summaries
or evaluations over exactly what Sluice searches. (To upload, use the SDK's `upload` or
`upload_folder` directly, or langchain_sluice's SluiceUploader.) What is read: reading.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import sluice_client
from llama_index.core.readers.base import BaseReader
from llama_index.core.schema import Document, NodeRelationship, RelatedNodeInfo
from sluice_client import AsyncClient, Chunk, Client

from .connection import Connection
from .metadata import chunk_metadata, document_metadata
from .reading import adocuments_with_chunks, documents_with_chunks
from .retrievers import hidden_keys

# Between chunks joined into one Document.
CHUNK_SEPARATOR = "\n\n"


class SluiceReader(BaseReader):
    """Read a collection's READY documents (or some by id) as LlamaIndex Documents.

        reader = SluiceReader()
        documents = reader.load_data("docs")                         # one Document per Sluice document
        chunks = reader.load_data("docs", per_chunk=True)            # one per chunk, Sluice's chunking kept
        documents = reader.load_data(document_ids=[doc_id])          # these documents (READY)
        documents = await reader.aload_data("docs")                  # the SDK's AsyncClient

    A whole document's Document has the Sluice document's id as `id_`, its chunks' text joined
    by a blank line, and the metadata a search hit of it carries (the document's typed metadata,
    `source`, `document_id`, `filename`, `mime_type`, `source_uri` when it has one). Per chunk,
    `id_` is the chunk's id, the SOURCE relationship the document's, and the metadata adds
    `chunk_id`, `page_number`, `chunk_index`, `element_type` and `section_title`. Documents come
    newest first, chunks in order.
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        search_address: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
    ) -> None:
        self._connection = Connection(
            address=address,
            search_address=search_address,
            api_key=api_key,
            timeout=timeout,
            client=client,
            async_client=async_client,
        )

    def lazy_load_data(
        self, collection: str | None = None, *, document_ids: Iterable[str] | None = None, per_chunk: bool = False
    ) -> Iterator[Document]:
        """The Documents of `collection`'s READY documents, or of `document_ids` (each READY, or a
        ValueError naming it), fetched a page at a time as you iterate."""
        for document, chunks in documents_with_chunks(self._connection.client(), collection, document_ids):
            yield from _documents(document, chunks, per_chunk)

    def load_data(
        self, collection: str | None = None, *, document_ids: Iterable[str] | None = None, per_chunk: bool = False
    ) -> list[Document]:
        """Every Document of `lazy_load_data`, as a list."""
        return list(self.lazy_load_data(collection, document_ids=document_ids, per_chunk=per_chunk))

    async def aload_data(
        self, collection: str | None = None, *, document_ids: Iterable[str] | None = None, per_chunk: bool = False
    ) -> list[Document]:
        """`load_data` with the SDK's AsyncClient."""
        loaded: list[Document] = []
        async for document, chunks in adocuments_with_chunks(self._connection.async_client(), collection, document_ids):
            loaded.extend(_documents(document, chunks, per_chunk))
        return loaded

    def close(self) -> None:
        """Close the sync client made here (a client passed in stays open)."""
        self._connection.close()

    async def aclose(self) -> None:
        """Close the AsyncClient made here for the running event loop."""
        await self._connection.aclose()


def _documents(document: sluice_client.Document, chunks: list[Chunk], per_chunk: bool) -> list[Document]:
    if not per_chunk:
        text = CHUNK_SEPARATOR.join(c.text for c in chunks)
        return [_document(document.id, text, document_metadata(document), None)]
    return [_document(c.id, c.text, chunk_metadata(document, c), document.id) for c in chunks]


def _document(id_: str, text: str, metadata: dict[str, Any], source: str | None) -> Document:
    relationships = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=source)} if source else {}
    return Document(
        id_=id_,
        text=text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden_keys(metadata),
        excluded_embed_metadata_keys=hidden_keys(metadata),
        relationships=relationships,
    )
