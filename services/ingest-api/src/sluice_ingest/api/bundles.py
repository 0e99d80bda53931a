"""DocumentService's ExportCollection and ImportCollection: convert, call one use case
(service/bundles.py), convert back. Import streams are admitted and paced as uploads are."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc
from sluice.v1 import collection_pb2, document_service_pb2
from sluice_common.errors import InvalidArgument, grpc_errors
from sluice_common.reasons import Reason

from ..service.bundles import BundleUseCases, Embedder, ExportTrailer, ImportOptions
from ..uploads import Trailer
from .collections import tenant
from .converters import PROVIDER_FROM_PROTO, collection_to_proto


class BundleCalls:
    """The bundle half of DocumentServicer (documents.py), over the bundle use cases."""

    bundles: BundleUseCases

    @grpc_errors
    async def ExportCollection(
        self, request: document_service_pb2.ExportCollectionRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[document_service_pb2.ExportCollectionResponse]:
        header, pieces = await self.bundles.export_collection(tenant(), request.name)
        async with contextlib.aclosing(pieces):  # the temporary files go however the stream ends
            yield document_service_pb2.ExportCollectionResponse(
                header=document_service_pb2.ExportCollectionHeader(
                    format_version=header.format_version,
                    collection=header.collection,
                    document_count=header.documents,
                    chunk_count=header.chunks,
                )
            )
            async for piece in pieces:
                if isinstance(piece, ExportTrailer):
                    yield document_service_pb2.ExportCollectionResponse(
                        trailer=document_service_pb2.ExportCollectionTrailer(size_bytes=piece.size_bytes, sha256=piece.sha256)
                    )
                else:
                    yield document_service_pb2.ExportCollectionResponse(data=piece)

    @grpc_errors
    async def ImportCollection(
        self, request_iterator: AsyncIterator[document_service_pb2.ImportCollectionRequest], context: grpc.aio.ServicerContext
    ) -> collection_pb2.Collection:
        gate = self.bundles.uploads
        with gate.admit():
            async with contextlib.aclosing(gate.paced(request_iterator)) as messages:
                first = await anext(messages, None)
                if first is None or first.WhichOneof("payload") != "options":
                    raise InvalidArgument("the first message of an import must carry its options", reason=Reason.MISSING_METADATA)
                o = first.options
                embedder = (
                    Embedder(PROVIDER_FROM_PROTO.get(o.embedder.provider, ""), o.embedder.model, o.embedder.dimensions)
                    if o.HasField("embedder") and o.embedder.provider
                    else None
                )

                async def data() -> AsyncIterator[bytes | Trailer]:
                    async for message in messages:
                        kind = message.WhichOneof("payload")
                        if kind == "data":
                            yield message.data
                        elif kind == "trailer":
                            yield Trailer(message.trailer.size_bytes, message.trailer.sha256)
                        elif kind == "options":
                            raise InvalidArgument("only the first message may carry options", reason=Reason.DUPLICATE_METADATA)
                        else:
                            raise InvalidArgument("an import message must carry data or the trailer", reason=Reason.EMPTY_MESSAGE)

                row = await self.bundles.import_collection(tenant(), ImportOptions(o.name, embedder, o.reembed), data())
        return collection_to_proto(row)


__all__ = ["BundleCalls"]
