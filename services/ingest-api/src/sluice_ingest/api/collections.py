"""DocumentService's collection calls (create, get, list, delete, reindex, cancel): convert, call
one use case (service/collections.py), convert back."""

from __future__ import annotations

import grpc
from sluice.v1 import collection_pb2, document_service_pb2
from sluice_common.auth import current_principal
from sluice_common.auth.scope import require_creatable, require_visible, scope
from sluice_common.errors import grpc_errors

from ..service import CollectionSpec, CollectionUseCases, EvalQueryIn
from .converters import PROVIDER_FROM_PROTO, collection_to_proto, precision_of, reranker_of


def tenant() -> int:
    """The tenant every DocumentService query of this call is scoped to (the caller's)."""
    return current_principal().tenant_id


class CollectionCalls:
    """The collection half of DocumentServicer (documents.py), over the collection use cases."""

    collections: CollectionUseCases

    @grpc_errors
    async def CreateCollection(
        self, request: document_service_pb2.CreateCollectionRequest, context: grpc.aio.ServicerContext
    ) -> collection_pb2.Collection:
        c = request.collection
        require_creatable(c.name)  # PERMISSION_DENIED: reveals nothing (docs/tenancy.md, "Scoped keys")
        spec = CollectionSpec(
            name=c.name,
            description=c.description,
            provider=PROVIDER_FROM_PROTO.get(c.embedder.provider, ""),
            model=c.embedder.model,
            dimensions=c.embedder.dimensions,
            chunk_max_characters=c.chunking.max_characters,
            chunk_new_after_n_chars=c.chunking.new_after_n_chars,
            # Unset takes the default; an explicit 0 means no overlap (the field has presence).
            chunk_overlap=c.chunking.overlap if c.chunking.HasField("overlap") else None,
            max_attempts=c.max_attempts,
            reranker=reranker_of(c.reranker),
            vector_precision=precision_of(c.vector_precision),
        )
        return collection_to_proto(await self.collections.create_collection(tenant(), spec))

    @grpc_errors
    async def GetCollection(
        self, request: document_service_pb2.GetCollectionRequest, context: grpc.aio.ServicerContext
    ) -> collection_pb2.Collection:
        require_visible(request.name)
        return collection_to_proto(await self.collections.get_collection(tenant(), request.name))

    @grpc_errors
    async def ListCollections(
        self, request: document_service_pb2.ListCollectionsRequest, context: grpc.aio.ServicerContext
    ) -> document_service_pb2.ListCollectionsResponse:
        rows, token = await self.collections.list_collections(tenant(), request.page_size, request.page_token, scope())
        return document_service_pb2.ListCollectionsResponse(
            collections=[collection_to_proto(r) for r in rows], next_page_token=token
        )

    @grpc_errors
    async def DeleteCollection(
        self, request: document_service_pb2.DeleteCollectionRequest, context: grpc.aio.ServicerContext
    ) -> document_service_pb2.DeleteCollectionResponse:
        require_visible(request.name)
        deleted = await self.collections.delete_collection(tenant(), request.name, request.force)
        return document_service_pb2.DeleteCollectionResponse(deleted_documents=deleted)

    @grpc_errors
    async def ReindexCollection(
        self, request: document_service_pb2.ReindexCollectionRequest, context: grpc.aio.ServicerContext
    ) -> collection_pb2.Collection:
        require_visible(request.name)
        e = request.embedder
        row = await self.collections.reindex_collection(
            tenant(),
            request.name,
            PROVIDER_FROM_PROTO.get(e.provider, ""),
            e.model,
            e.dimensions,
            [EvalQueryIn(q.query, tuple(q.relevant), q.id) for q in request.eval_queries],
            request.min_ratio,
            vector_precision=precision_of(request.vector_precision),
        )
        return collection_to_proto(row)

    @grpc_errors
    async def CancelReindex(
        self, request: document_service_pb2.CancelReindexRequest, context: grpc.aio.ServicerContext
    ) -> collection_pb2.Collection:
        require_visible(request.name)
        return collection_to_proto(await self.collections.cancel_reindex(tenant(), request.name))


__all__ = ["CollectionCalls", "tenant"]
