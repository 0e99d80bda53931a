"""SluiceRetriever: a LlamaIndex retriever over one Sluice collection."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import MetadataFilters
from sluice_client import AsyncClient, Client, Hit
from sluice_client.filters import where as conditions

from .connection import Connection
from .filters import where_of
from .metadata import hit_metadata

# Sluice's own keys that an LLM or an embedding model gains nothing from reading: left out of
# what LlamaIndex shows them (filename, page_number, source and the document's metadata stay).
BOOKKEEPING_KEYS = [
    "document_id",
    "chunk_id",
    "chunk_index",
    "element_type",
    "score",
    "first_stage_score",
    "rerank_score",
    "chunk_text",
    "context_first_chunk_index",
    "context_last_chunk_index",
    "mime_type",
    "source_uri",
    "section_title",
]


class SluiceRetriever(BaseRetriever):
    """The chunks of a Sluice collection that best match a query, as `NodeWithScore`s.

    Only READY documents are searched. Each node is a `TextNode` whose `id_` is the chunk's id,
    whose text is the chunk's (with its neighbours when `neighbors` > 0), whose SOURCE
    relationship (`node.ref_doc_id`) is the document's id, and whose metadata is the document's
    own (typed) metadata with `document_id`, `chunk_id`, `filename`, `page_number`,
    `chunk_index`, `element_type`, `score`, `first_stage_score`, `rerank_score` and `source`
    (metadata.py); the score is the hit's.

        retriever = SluiceRetriever("docs", top_k=4, where=["year>=2024"])
        nodes = retriever.retrieve("how do leases expire")
        nodes = await retriever.aretrieve("how do leases expire")  # the SDK's AsyncClient

    `filters` takes LlamaIndex's MetadataFilters (filters.py); `filter` (metadata equal to
    strings) and `where` (conditions as text) are the SDK's, and all of them must hold. Errors
    are the SDK's (`sluice_client.SluiceError`: `NotFound` with reason COLLECTION_NOT_FOUND for a
    collection that does not exist, …).
    """

    def __init__(
        self,
        collection: str,
        *,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        top_k: int = 4,
        filters: MetadataFilters | None = None,
        filter: dict[str, str] | None = None,
        where: Any = None,
        filenames: Iterable[str] | None = None,
        document_ids: Iterable[str] | None = None,
        neighbors: int = 0,
        max_per_document: int = 0,
        min_score: float | None = None,
        rerank: bool = True,
        search_kwargs: dict[str, Any] | None = None,
        address: str | None = None,
        search_address: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self.collection = collection
        self.mode = mode
        self.top_k = top_k
        self.filters = filters
        self.filter = filter
        self.where = where
        self.filenames = list(filenames) if filenames is not None else None
        self.document_ids = list(document_ids) if document_ids is not None else None
        self.neighbors = neighbors
        self.max_per_document = max_per_document
        self.min_score = min_score
        self.rerank = rerank
        self.search_kwargs = dict(search_kwargs or {})
        self._connection = Connection(
            address=address,
            search_address=search_address,
            api_key=api_key,
            timeout=timeout,
            client=client,
            async_client=async_client,
        )
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def search_arguments(self) -> dict[str, Any]:
        """The SDK `search` arguments of this retriever (read at each call: change them freely)."""
        where = self.where
        if self.filters is not None:
            # Both must hold: the SDK joins a list of filters with all_of.
            where = [part for part in (conditions(where), where_of(self.filters)) if part is not None]
        return {
            "top_k": self.top_k,
            "mode": self.mode,
            "filter": self.filter,
            "where": where,
            "filenames": self.filenames,
            "document_ids": self.document_ids,
            "neighbors": self.neighbors,
            "max_per_document": self.max_per_document,
            "min_score": self.min_score,
            "rerank": None if self.rerank else False,
            **self.search_kwargs,
        }

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self._connection.client().search(self.collection, query_bundle.query_str, **self.search_arguments())
        return [node_of(hit) for hit in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        client = self._connection.async_client()
        hits = await client.search(self.collection, query_bundle.query_str, **self.search_arguments())
        return [node_of(hit) for hit in hits]

    def close(self) -> None:
        """Close the sync client this retriever made (a client passed in stays open)."""
        self._connection.close()

    async def aclose(self) -> None:
        """Close the AsyncClient this retriever made for the running event loop."""
        await self._connection.aclose()


def hidden_keys(metadata: dict[str, Any]) -> list[str]:
    """The keys LlamaIndex leaves out of what the LLM and the embedder read: the bookkeeping,
    `source` when it only repeats the file name, and `page_number` 0 (a format without pages)."""
    hidden = list(BOOKKEEPING_KEYS)
    if metadata.get("source") == metadata.get("filename"):
        hidden.append("source")
    if metadata.get("page_number") == 0:
        hidden.append("page_number")
    return hidden


def node_of(hit: Hit) -> NodeWithScore:
    """A hit as a scored TextNode (see SluiceRetriever)."""
    metadata = hit_metadata(hit)
    node = TextNode(
        id_=hit.chunk_id,
        text=hit.context or hit.text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden_keys(metadata),
        excluded_embed_metadata_keys=hidden_keys(metadata),
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.document_id)},
    )
    return NodeWithScore(node=node, score=hit.score)
