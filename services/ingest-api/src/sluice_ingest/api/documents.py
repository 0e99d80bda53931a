"""DocumentService: the document calls and the watches here, the collection calls in
collections.py; each converts, calls one use case and converts back."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc
from sluice.v1 import collection_pb2, document_pb2, document_service_pb2, document_service_pb2_grpc
from sluice_common.auth import current_principal
from sluice_common.auth.scope import document_not_found, require_creatable, require_visible, scope
from sluice_common.errors import InvalidArgument, grpc_errors
from sluice_common.reasons import Reason

from ..service import ChunkUseCases, CollectionUseCases, DocumentUseCases, UploadMeta, WatchUseCases
from ..service.bundles import BundleUseCases
from ..uploads import Trailer
from .bundles import BundleCalls
from .collections import CollectionCalls, tenant
from .converters import (
    collection_event_to_proto,
    document_chunk_to_proto,
    document_status_from_proto,
    document_to_proto,
    fill_document_chunk,
    priority_of,
    source_run_events_from_proto,
    typed_metadata_of,
)


class DocumentServicer(CollectionCalls, BundleCalls, document_service_pb2_grpc.DocumentServiceServicer):
    def __init__(
        self,
        collections: CollectionUseCases,
        documents: DocumentUseCases,
        watches: WatchUseCases,
        chunks: ChunkUseCases,
        bundles: BundleUseCases,
    ) -> None:
        self.collections = collections
        self.bundles = bundles
        self.documents = documents
        self.watches = watches
        self.chunks = chunks

    @grpc_errors
    async def UploadDocument(
        self, request_iterator: AsyncIterator[document_service_pb2.UploadDocumentRequest], context: grpc.aio.ServicerContext
    ) -> document_pb2.Document:
        gate = self.documents.uploads
        # TOO_MANY_UPLOADS before a message is read; UPLOAD_IDLE_TIMEOUT between any two messages.
        with gate.admit():
            async with contextlib.aclosing(gate.paced(request_iterator)) as messages:
                first = await anext(messages, None)
                if first is None or first.WhichOneof("payload") != "metadata":
                    raise InvalidArgument("the first message of an upload must carry metadata", reason=Reason.MISSING_METADATA)
                m = first.metadata
                meta = UploadMeta(
                    m.collection,
                    m.filename,
                    m.mime_type,
                    dict(m.metadata),
                    m.request_id,
                    m.expected_size_bytes,
                    m.expected_sha256,
                    typed_metadata_of(m.typed_metadata),
                    m.source_uri,
                    priority=priority_of(m.priority),
                )

                async def data() -> AsyncIterator[bytes | Trailer]:
                    async for message in messages:
                        kind = message.WhichOneof("payload")
                        if kind == "data":
                            yield message.data
                        elif kind == "trailer":
                            yield Trailer(message.trailer.size_bytes, message.trailer.sha256)
                        elif kind == "metadata":
                            raise InvalidArgument("only the first message may carry metadata", reason=Reason.DUPLICATE_METADATA)
                        else:
                            raise InvalidArgument("an upload message must carry data or the trailer", reason=Reason.EMPTY_MESSAGE)

                require_visible(meta.collection)  # outside the key's scope: as a missing collection
                document, _ = await self.documents.upload_document(tenant(), meta, data())
        return document_to_proto(document)

    @grpc_errors
    async def GetDocument(
        self, request: document_service_pb2.GetDocumentRequest, context: grpc.aio.ServicerContext
    ) -> document_pb2.Document:
        if request.source_uri:
            require_visible(request.collection)
        document, history, versions = await self.documents.get_document(
            tenant(), request.id, request.collection, request.source_uri
        )
        if not current_principal().may_see(document.collection):  # checked after the read by id
            raise document_not_found(document.id)
        return document_to_proto(document, history, versions)

    @grpc_errors
    async def ListDocuments(
        self, request: document_service_pb2.ListDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> document_service_pb2.ListDocumentsResponse:
        status = document_status_from_proto(request.status)
        require_visible(request.collection)
        rows, token = await self.documents.list_documents(
            tenant(), request.collection, status, request.page_size, request.page_token, request.source_uri, scope()
        )
        return document_service_pb2.ListDocumentsResponse(documents=[document_to_proto(r) for r in rows], next_page_token=token)

    @grpc_errors
    async def DeleteDocument(
        self, request: document_service_pb2.DeleteDocumentRequest, context: grpc.aio.ServicerContext
    ) -> document_service_pb2.DeleteDocumentResponse:
        if request.source_uri:
            require_visible(request.collection)
        else:
            await self._require_document_visible(request.id)
        cancelled, deleted = await self.documents.delete_document(tenant(), request.id, request.collection, request.source_uri)
        return document_service_pb2.DeleteDocumentResponse(cancelled_running_job=cancelled, deleted_documents=deleted)

    @grpc_errors
    async def RetryDocument(
        self, request: document_service_pb2.RetryDocumentRequest, context: grpc.aio.ServicerContext
    ) -> document_pb2.Document:
        await self._require_document_visible(request.id)
        return document_to_proto(await self.documents.retry_document(tenant(), request.id))

    @grpc_errors
    async def ReprocessDocument(
        self, request: document_service_pb2.ReprocessDocumentRequest, context: grpc.aio.ServicerContext
    ) -> document_pb2.Document:
        await self._require_document_visible(request.id)
        return document_to_proto(await self.documents.reprocess_document(tenant(), request.id))

    @grpc_errors
    async def WatchDocument(
        self, request: document_service_pb2.WatchDocumentRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[document_pb2.DocumentEvent]:
        await self._require_document_visible(request.id)
        sequence = 0
        last = None
        async for row in self.watches.watch_document(tenant(), request.id):
            document = document_to_proto(row)
            comparable = document_pb2.Document()
            comparable.CopyFrom(document)
            comparable.ClearField("update_time")
            comparable.ClearField("consistency_token")  # read anew with every event
            if comparable == last:
                continue
            last = comparable
            sequence += 1
            yield document_pb2.DocumentEvent(document=document, sequence=sequence)

    @grpc_errors
    async def WatchCollection(
        self, request: document_service_pb2.WatchCollectionRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[document_service_pb2.CollectionEvent]:
        require_visible(request.collection)
        statuses = [status for status in map(document_status_from_proto, request.statuses) if status is not None]
        async for row in self.watches.watch_collection(
            tenant(),
            request.collection,
            request.after_cursor,
            request.start_from_oldest,
            statuses,
            request.terminal_only,
            source_runs=source_run_events_from_proto(request.source_runs),
        ):
            yield collection_event_to_proto(request.collection, row)

    @grpc_errors
    async def ListChunks(
        self, request: document_service_pb2.ListChunksRequest, context: grpc.aio.ServicerContext
    ) -> document_service_pb2.ListChunksResponse:
        if request.generation >= 0:  # else refused as INVALID_ARGUMENT first, as for a missing document
            await self._require_document_visible(request.document_id)
        rows, token, total, generation = await self.chunks.list_chunks(
            tenant(), request.document_id, request.page_size, request.page_token, request.generation
        )
        response = document_service_pb2.ListChunksResponse(next_page_token=token, total_size=total, generation=generation)
        document_id = str(rows[0].document_id) if rows else ""
        for row in rows:
            fill_document_chunk(response.chunks.add(), row, document_id)
        return response

    @grpc_errors
    async def UpdateChunk(
        self, request: document_service_pb2.UpdateChunkRequest, context: grpc.aio.ServicerContext
    ) -> document_service_pb2.DocumentChunk:
        enabled = request.enabled if request.HasField("enabled") else None
        text = request.text if request.HasField("text") else None
        row = await self.chunks.update_chunk(
            tenant(), request.chunk_id, enabled, text, request.etag, scope=current_principal().collections
        )
        return document_chunk_to_proto(row)

    @grpc_errors
    async def DownloadDocument(
        self, request: document_service_pb2.DownloadDocumentRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[document_service_pb2.DownloadDocumentResponse]:
        await self._require_document_visible(request.id)
        document, pieces = await self.chunks.download(tenant(), request.id)
        yield document_service_pb2.DownloadDocumentResponse(
            header=document_service_pb2.DownloadDocumentHeader(
                filename=document.filename,
                mime_type=document.mime_type,
                size_bytes=document.size_bytes,
                content_sha256=document.content_sha256,
            )
        )
        async for piece in pieces:
            yield document_service_pb2.DownloadDocumentResponse(data=piece)

    # The bundle calls (bundles.py) behind the key's scope: an export names a collection to read, an
    # import one to create (docs/tenancy.md, "Scoped keys").
    @grpc_errors
    async def ExportCollection(
        self, request: document_service_pb2.ExportCollectionRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[document_service_pb2.ExportCollectionResponse]:
        require_visible(request.name)
        async for response in BundleCalls.ExportCollection(self, request, context):
            yield response

    @grpc_errors
    async def ImportCollection(
        self, request_iterator: AsyncIterator[document_service_pb2.ImportCollectionRequest], context: grpc.aio.ServicerContext
    ) -> collection_pb2.Collection:
        async def checked() -> AsyncIterator[document_service_pb2.ImportCollectionRequest]:
            first = True
            async for message in request_iterator:
                if first and message.WhichOneof("payload") == "options":
                    require_creatable(message.options.name)
                first = False
                yield message

        return await BundleCalls.ImportCollection(self, checked(), context)

    async def _require_document_visible(self, document_id: str) -> None:
        """A document outside the key's scope answers as a missing one (a read by id, then the check)."""
        await self.documents.require_document_visible(tenant(), document_id, current_principal().collections)


__all__ = ["DocumentServicer"]
