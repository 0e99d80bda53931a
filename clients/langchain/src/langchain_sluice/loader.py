"""SluiceLoader: a Sluice collection's documents, as Sluice parsed and chunked them, as LangChain
`Document`s (a LangChain document loader; the other way, into Sluice, is SluiceUploader).

What Sluice holds that LangChain's own loaders would have to redo is the text its workers
extracted (PDF, Word, PowerPoint, HTML, e-mail, scans through OCR) with pages, element types
and the documents' metadata; loading it back serves a pipeline of your own (summaries,
evaluation sets, another index) over exactly what Sluice searches. What is read: reading.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator

import sluice_client
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from sluice_client import AsyncClient, Chunk, Client

from .connection import Connection
from .metadata import chunk_metadata, document_metadata
from .reading import adocuments_with_chunks, documents_with_chunks

# Between chunks joined into one Document.
CHUNK_SEPARATOR = "\n\n"


class SluiceLoader(BaseLoader):
    """Load a collection's READY documents (or some by id) as LangChain Documents.

        documents = SluiceLoader("docs").load()                      # one Document per Sluice document
        chunks = SluiceLoader("docs", per_chunk=True).load()         # one per chunk, Sluice's chunking kept
        documents = SluiceLoader(document_ids=[doc_id]).load()       # these documents (each READY)
        async for document in SluiceLoader("docs").alazy_load(): ...  # the SDK's AsyncClient

    A whole document's Document has the Sluice document's id as `id`, its chunks' text joined by
    a blank line, and the metadata a search hit of it carries (its typed metadata, `source`,
    `document_id`, `filename`, `mime_type`, `source_uri` when it has one). Per chunk, `id` is the
    chunk's id and the metadata adds `chunk_id`, `page_number`, `chunk_index`, `element_type` and
    `section_title`: what SluiceRetriever's hits carry, without the scores.
    """

    def __init__(
        self,
        collection: str | None = None,
        *,
        document_ids: Iterable[str] | None = None,
        per_chunk: bool = False,
        address: str | None = None,
        search_address: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
    ) -> None:
        if not collection and document_ids is None:
            raise ValueError("name a collection, or document_ids")
        self.collection = collection
        self.document_ids = list(document_ids) if document_ids is not None else None
        self.per_chunk = per_chunk
        self._connection = Connection(
            address=address,
            search_address=search_address,
            api_key=api_key,
            timeout=timeout,
            client=client,
            async_client=async_client,
        )

    def lazy_load(self) -> Iterator[Document]:
        """The Documents, a page of documents and of chunks at a time as you iterate."""
        for document, chunks in documents_with_chunks(self._connection.client(), self.collection, self.document_ids):
            yield from _documents(document, chunks, self.per_chunk)

    async def alazy_load(self) -> AsyncIterator[Document]:
        """`lazy_load` with the SDK's AsyncClient."""
        reading = adocuments_with_chunks(self._connection.async_client(), self.collection, self.document_ids)
        async for document, chunks in reading:
            for loaded in _documents(document, chunks, self.per_chunk):
                yield loaded

    def close(self) -> None:
        """Close the sync client made here (a client passed in stays open)."""
        self._connection.close()

    async def aclose(self) -> None:
        """Close the AsyncClient made here for the running event loop."""
        await self._connection.aclose()


def _documents(document: sluice_client.Document, chunks: list[Chunk], per_chunk: bool) -> list[Document]:
    if not per_chunk:
        text = CHUNK_SEPARATOR.join(c.text for c in chunks)
        return [Document(page_content=text, metadata=document_metadata(document), id=document.id)]
    return [Document(page_content=c.text, metadata=chunk_metadata(document, c), id=c.id) for c in chunks]
