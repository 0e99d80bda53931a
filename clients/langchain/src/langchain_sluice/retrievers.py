"""SluiceRetriever: a LangChain retriever over one Sluice collection."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, SecretStr
from sluice_client import AsyncClient, Client

from .connection import Connection
from .convert import document_of


class SluiceRetriever(BaseRetriever):
    """The chunks of a Sluice collection that best match a query, as LangChain `Document`s.

    Only READY documents are searched. Each Document's `page_content` is the chunk's text (the
    chunk with its neighbours when `neighbors` > 0), its `id` the chunk's id, and its metadata
    the document's own (typed) metadata with `document_id`, `chunk_id`, `filename`,
    `page_number`, `chunk_index`, `element_type`, `score`, `first_stage_score`, `rerank_score`
    and `source` (metadata.py).

        retriever = SluiceRetriever(collection="docs", top_k=4, where=["year>=2024"])
        documents = retriever.invoke("how do leases expire")
        documents = await retriever.ainvoke("how do leases expire")  # the SDK's AsyncClient

    Every search option can also be given per call: `retriever.invoke(query, top_k=8,
    filter={"team": "search"})`. Errors are the SDK's (`sluice_client.SluiceError`: `NotFound`
    with reason COLLECTION_NOT_FOUND for a collection that does not exist, …).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    collection: str
    """The collection to search."""
    mode: Literal["hybrid", "vector", "keyword"] = "hybrid"
    """HYBRID fuses keyword (BM25) and vector similarity; docs/search.md."""
    top_k: int = 4
    """How many chunks to return (the server allows 1 to 100 by default)."""
    filter: dict[str, str] | None = None
    """Metadata that must be equal, as text: {"team": "search"}."""
    where: Any = None
    """Typed conditions that must all hold, as the SDK takes them: "year>=2024", ["lang in en,de",
    "draft != true"], or MetadataFilter messages (docs/search.md, "Conditions")."""
    filenames: list[str] | None = None
    """Only documents with one of these file names."""
    document_ids: list[str] | None = None
    """Only these documents."""
    neighbors: int = 0
    """Join this many chunks on each side of a hit into its page_content (docs/search.md)."""
    max_per_document: int = 0
    """At most this many chunks of one document (0: no limit)."""
    min_score: float | None = None
    """Leave out hits scoring below this."""
    rerank: bool = True
    """Let the collection's reranker (if it has one) reorder the hits; False skips it."""
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Any other argument of the SDK's `search` (consistency_token=, explain=, generation=)."""

    address: str | None = None
    """ingest-api's address; default SLUICE_INGEST_ADDRESS, else localhost:50051."""
    search_address: str | None = None
    """search's address; default SLUICE_SEARCH_ADDRESS, else localhost:50052."""
    api_key: SecretStr | None = None
    """Default SLUICE_API_KEY, else the credentials file of `make run`."""
    timeout: float = 30.0
    """Each call's deadline in seconds, retries included. The first search of a collection on
    the local model loads the model in search: give a fresh server more."""
    client: Client | None = Field(default=None, exclude=True)
    """A sync SDK client to use instead of one made from the settings above (not closed here)."""
    async_client: AsyncClient | None = Field(default=None, exclude=True)
    """An AsyncClient to use for `ainvoke` (not closed here; it belongs to one event loop)."""

    _connection: Connection = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self._connection = Connection(
            address=self.address,
            search_address=self.search_address,
            api_key=self.api_key.get_secret_value() if self.api_key else None,
            timeout=self.timeout,
            client=self.client,
            async_client=self.async_client,
        )

    def search_arguments(self, **overrides: Any) -> dict[str, Any]:
        """The SDK `search` arguments of this retriever, with a call's overrides."""
        arguments: dict[str, Any] = {
            "top_k": self.top_k,
            "mode": self.mode,
            "filter": self.filter,
            "where": self.where,
            "filenames": self.filenames,
            "document_ids": self.document_ids,
            "neighbors": self.neighbors,
            "max_per_document": self.max_per_document,
            "min_score": self.min_score,
            "rerank": None if self.rerank else False,
            **self.search_kwargs,
        }
        if "rerank" in overrides:
            overrides["rerank"] = None if overrides["rerank"] else False
        arguments.update(overrides)
        return arguments

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        hits = self._connection.client().search(self.collection, query, **self.search_arguments(**kwargs))
        return [document_of(hit) for hit in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        hits = await self._connection.async_client().search(self.collection, query, **self.search_arguments(**kwargs))
        return [document_of(hit) for hit in hits]

    def close(self) -> None:
        """Close the sync client this retriever made (a client passed in stays open)."""
        self._connection.close()

    async def aclose(self) -> None:
        """Close the AsyncClient this retriever made for the running event loop."""
        await self._connection.aclose()
