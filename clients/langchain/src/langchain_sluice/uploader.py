"""SluiceUploader: LangChain `Document`s and files into a Sluice collection.

A Document's `page_content` is uploaded as a plain-text file and its metadata as the Sluice
document's metadata, with its types (metadata.sluice_metadata), so that a filter can select it
and every hit of it carries it back. A Document with an `id` is uploaded with that id as its
`source_uri`: uploading changed text under the same id makes a new version that replaces the old
one when it is READY (docs/architecture.md#document-versions), as LangChain's own stores treat
ids. Files go through the SDK's `upload_folder` (folders walked, hidden files skipped).

Uploads are idempotent (the SDK's request_id, and the server stores the same bytes in a
collection once), so running an upload again after a failure stores nothing twice.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sluice_client
from langchain_core.documents import Document
from sluice_client import AsyncClient, Client, SluiceError, UploadResult

from .connection import Connection
from .convert import filename_of
from .metadata import sluice_metadata

TEXT = "text/plain"


class SluiceUploader:
    """Upload LangChain Documents or files into one collection, optionally waiting until each is
    READY (or FAILED: check `.ready` / `.failed` / `.error_message` of what comes back).

        uploader = SluiceUploader("docs")
        stored = uploader.upload_documents(splits)                       # list[sluice_client.Document]
        stored = uploader.upload_files(["handbook/"], metadata={"team": "ops"})
        stored = await uploader.aupload_documents(splits)

    Connection settings are the retriever's: arguments, else the SDK's environment variables and
    credentials file, else `make run`'s defaults; or a `client` / `async_client` of your own.
    """

    def __init__(
        self,
        collection: str,
        *,
        address: str | None = None,
        search_address: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        concurrency: int = 4,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
    ) -> None:
        self.collection = collection
        self.concurrency = max(1, concurrency)
        self._connection = Connection(
            address=address,
            search_address=search_address,
            api_key=api_key,
            timeout=timeout,
            client=client,
            async_client=async_client,
        )

    # ------------------------------------------------------------------ LangChain Documents

    def upload_documents(
        self, documents: Iterable[Document], *, wait: bool = True, timeout: float | None = None
    ) -> list[sluice_client.Document]:
        """Upload each Document's text with its metadata, `concurrency` at a time; with `wait`,
        follow them to READY or FAILED (sluice_client.WaitTimeout after `timeout` seconds).
        Returns the Sluice documents in the order given. A bad metadata value is a ValueError
        before anything is sent; a refused upload raises the SDK's error once the others ended."""
        uploads = _prepare(documents)
        client = self._connection.client()

        def one(upload: dict[str, Any]) -> sluice_client.Document:
            return client.documents.upload(self.collection, **upload)

        with ThreadPoolExecutor(max_workers=min(self.concurrency, max(1, len(uploads)))) as pool:
            futures = [pool.submit(one, upload) for upload in uploads]
        failure = next((f.exception() for f in futures if f.exception() is not None), None)
        if failure is not None:
            raise failure
        stored = [future.result() for future in futures]
        return client.documents.wait_all(stored, timeout=timeout) if wait and stored else stored

    async def aupload_documents(
        self, documents: Iterable[Document], *, wait: bool = True, timeout: float | None = None
    ) -> list[sluice_client.Document]:
        """`upload_documents` with the SDK's AsyncClient."""
        uploads = _prepare(documents)
        client = self._connection.async_client()
        slots = asyncio.Semaphore(self.concurrency)

        async def one(upload: dict[str, Any]) -> sluice_client.Document:
            async with slots:
                return await client.documents.upload(self.collection, **upload)

        outcomes = await asyncio.gather(*(one(upload) for upload in uploads), return_exceptions=True)
        failure = next((o for o in outcomes if isinstance(o, BaseException)), None)
        if failure is not None:
            raise failure
        stored = [o for o in outcomes if isinstance(o, sluice_client.Document)]
        return await client.documents.wait_all(stored, timeout=timeout) if wait and stored else stored

    # ------------------------------------------------------------------ files

    def upload_files(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        metadata: Mapping[str, Any] | None = None,
        wait: bool = True,
        timeout: float | None = None,
    ) -> list[sluice_client.Document]:
        """Upload files and folders (recursively, hidden files skipped) as they are: PDF, Word,
        HTML…, parsed by Sluice's workers. `metadata` (typed as for Documents) goes on each.
        Returns the Sluice documents in file order; a refused upload raises once the others ended."""
        strings, typed = sluice_metadata(metadata or {})
        results = self._connection.client().documents.upload_folder(
            self.collection,
            *_paths(paths),
            concurrency=self.concurrency,
            wait=wait,
            timeout=timeout,
            metadata=strings,
            typed_metadata=typed,
        )
        return _documents(results)

    async def aupload_files(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        metadata: Mapping[str, Any] | None = None,
        wait: bool = True,
        timeout: float | None = None,
    ) -> list[sluice_client.Document]:
        """`upload_files` with the SDK's AsyncClient."""
        strings, typed = sluice_metadata(metadata or {})
        results = await self._connection.async_client().documents.upload_folder(
            self.collection,
            *_paths(paths),
            concurrency=self.concurrency,
            wait=wait,
            timeout=timeout,
            metadata=strings,
            typed_metadata=typed,
        )
        return _documents(results)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Close the sync client made here (a client passed in stays open)."""
        self._connection.close()

    async def aclose(self) -> None:
        """Close the AsyncClient made here for the running event loop."""
        await self._connection.aclose()

    def __enter__(self) -> SluiceUploader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _prepare(documents: Iterable[Document]) -> list[dict[str, Any]]:
    """Each Document's upload arguments, every metadata value checked before anything is sent."""
    uploads = []
    for position, document in enumerate(documents):
        strings, typed = sluice_metadata(document.metadata, f"the metadata of document {position + 1}")
        uploads.append(
            {
                "source": document.page_content.encode("utf-8"),
                "filename": filename_of(document, position),
                "mime_type": TEXT,
                "metadata": strings,
                "typed_metadata": typed,
                "source_uri": document.id or None,
            }
        )
    return uploads


def _paths(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str | os.PathLike[str]]:
    """One path or several (a lone string is one path, not a sequence of characters)."""
    return [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)


def _documents(results: list[UploadResult]) -> list[sluice_client.Document]:
    failure: SluiceError | None = next((r.error for r in results if r.error is not None), None)
    if failure is not None:
        raise failure
    return [r.document for r in results if r.document is not None]
