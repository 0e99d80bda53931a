"""A collection's documents with their chunks, as the SDK reads them, with no framework in sight.

The chunks are those of ListChunks (`documents.iter_chunks`) in the collection's ACTIVE index
generation: edited chunks with their edited text, disabled chunks left out (search does not
return them either). Only READY documents have chunks: a collection's are listed by status, and
a document named by id that is not READY is a ValueError naming it.

langchain_sluice/reading.py and llama_index_sluice/reading.py are the same file (see
connection.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator

from sluice_client import AsyncClient, Chunk, Client, Document, DocumentStatus


def documents_with_chunks(
    client: Client, collection: str | None, document_ids: Iterable[str] | None = None
) -> Iterator[tuple[Document, list[Chunk]]]:
    """(document, its enabled chunks in order) for `collection`'s READY documents, newest first,
    or for `document_ids` in the order given; a page at a time as you iterate."""
    for document in _documents(client, collection, document_ids):
        yield document, [chunk for chunk in client.documents.iter_chunks(document.id) if chunk.enabled]


async def adocuments_with_chunks(
    client: AsyncClient, collection: str | None, document_ids: Iterable[str] | None = None
) -> AsyncIterator[tuple[Document, list[Chunk]]]:
    """`documents_with_chunks` with the SDK's AsyncClient."""
    async for document in _adocuments(client, collection, document_ids):
        yield document, [chunk async for chunk in client.documents.iter_chunks(document.id) if chunk.enabled]


def _documents(client: Client, collection: str | None, document_ids: Iterable[str] | None) -> Iterator[Document]:
    if document_ids is None:
        client.collections.get(_named(collection))  # NotFound (COLLECTION_NOT_FOUND) rather than no documents
        yield from client.documents.list(collection, status=DocumentStatus.READY)
        return
    for document_id in document_ids:
        yield ready(client.documents.get(document_id))


async def _adocuments(client: AsyncClient, collection: str | None, document_ids: Iterable[str] | None) -> AsyncIterator[Document]:
    if document_ids is None:
        await client.collections.get(_named(collection))
        async for document in client.documents.list(collection, status=DocumentStatus.READY):
            yield document
        return
    for document_id in document_ids:
        yield ready(await client.documents.get(document_id))


def _named(collection: str | None) -> str:
    if not collection:
        raise ValueError("name a collection, or document_ids")
    return collection


def ready(document: Document) -> Document:
    """The document, if READY; else a ValueError naming it and its status."""
    if not document.ready:
        raise ValueError(
            f"document {document.id} ({document.filename}) is {document.status.name}, not READY: only READY documents have "
            "chunks (wait for it with the SDK's documents.wait)"
        )
    return document
