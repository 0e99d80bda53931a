"""The asyncio client: `AsyncClient`, the same surface as `Client` for collections, documents and
search, with coroutines and async iterators.

    async with AsyncClient() as client:
        doc = await client.documents.upload("docs", "report.pdf")
        doc = await client.documents.wait(doc.id)
        for hit in await client.search("docs", "how do leases expire", top_k=5):
            print(hit.filename, hit.text)

Retries, pacing, errors and the upload rules are those of the sync client (retry.py, errors.py,
uploads.py). Create and use it inside one event loop. `webhooks` and `admin` are those of the
sync client as coroutines, and `documents.sync_folder` its folder sync.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar, overload

import grpc

from . import _core, bundles, downloads, sync, uploads
from .client import INGEST, RECONNECT_WINDOW_SECONDS, ROLES, SEARCH, UploadResult
from .errors import (
    AlreadyExists,
    DeadlineExceeded,
    Internal,
    NotFound,
    OutOfRange,
    RateLimited,
    SluiceError,
    TLSError,
    Unavailable,
    UploadSourceError,
    WaitTimeout,
    from_rpc_error,
)
from .protos import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    collection_pb2,
    document_pb2,
    document_service_pb2,
    document_service_pb2_grpc,
    search_service_pb2_grpc,
    source_service_pb2_grpc,
    webhook_service_pb2,
    webhook_service_pb2_grpc,
)
from .retry import RetryPolicy
from .sources import AsyncSources
from .types import (
    WEBHOOK_EVENT_TYPES,
    ApiKey,
    Chunk,
    ChunkPage,
    Collection,
    CollectionEvent,
    Document,
    DocumentStatus,
    DownloadedDocument,
    Embedder,
    NewApiKey,
    NewWebhook,
    SearchMode,
    SearchResults,
    Tenant,
    Webhook,
    WebhookDelivery,
    source_run_events,
)

T = TypeVar("T")


class AsyncClient:
    """`Client` for asyncio (see `Client` for the arguments)."""

    def __init__(
        self,
        address: str | None = None,
        *,
        search_address: str | None = None,
        api_key: str | None = None,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        tls: Any = None,
        tenant: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        max_calls_per_second: float | None = None,
        channel_options: Iterable[tuple[str, Any]] | None = None,
        interceptors: Iterable[Any] | None = None,
        request_id_prefix: str = "py-",
    ) -> None:
        self.settings = _core.Settings(
            address,
            search_address=search_address,
            api_key=api_key,
            tls=tls,
            ca_file=ca_file,
            cert_file=cert_file,
            key_file=key_file,
            tenant=tenant,
            timeout=timeout,
            retry=retry,
            max_calls_per_second=max_calls_per_second,
            channel_options=channel_options,
            request_id_prefix=request_id_prefix,
        )
        self._interceptors = list(interceptors or ())
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, Any] = {}
        self.collections = AsyncCollections(self)
        self.documents = AsyncDocuments(self)
        self.webhooks = AsyncWebhooks(self)
        self.sources = AsyncSources(self)
        self.admin = AsyncAdmin(self)

    @property
    def ingest_address(self) -> str:
        return self.settings.ingest_address

    @property
    def search_address(self) -> str:
        return self.settings.search_address

    def _stub(self, service: str) -> Any:
        stub = self._stubs.get(service)
        if stub is None:
            address = self.search_address if service == SEARCH else self.ingest_address
            channel = self._channels.get(address)
            if channel is None:
                options, tls = self.settings.channel_options(address), self.settings.tls
                interceptors = self._interceptors or None
                channel = (
                    grpc.aio.secure_channel(address, tls.credentials(), options=options, interceptors=interceptors)
                    if tls.enabled
                    else grpc.aio.insecure_channel(address, options=options, interceptors=interceptors)
                )
                self._channels[address] = channel
            stub = {
                SEARCH: search_service_pb2_grpc.SearchServiceStub,
                "admin": admin_service_pb2_grpc.AdminServiceStub,
                "webhooks": webhook_service_pb2_grpc.WebhookServiceStub,
                "sources": source_service_pb2_grpc.SourceServiceStub,
            }.get(service, document_service_pb2_grpc.DocumentServiceStub)(channel)
            self._stubs[service] = stub
        return stub

    def _error(self, error: grpc.RpcError, service: str) -> SluiceError:
        address = self.search_address if service == SEARCH else self.ingest_address
        return from_rpc_error(error, service=service, address=address, tls=self.settings.tls.enabled)

    async def _invoke(
        self,
        attempt: Callable[[float], Awaitable[T]],
        *,
        service: str = INGEST,
        timeout: float | None = None,
        translate: Callable[[SluiceError], SluiceError] | None = None,
    ) -> T:
        policy, pacer = self.settings.policy, self.settings.pacer
        deadline = time.monotonic() + (timeout or policy.timeout)
        failures = 0
        while True:
            delay = pacer.reserve()
            if delay > 0:
                await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            try:
                return await attempt(max(0.001, deadline - time.monotonic()))
            except grpc.RpcError as rpc_error:
                error = self._error(rpc_error, service)
            if translate is not None:
                error = translate(error)
            wait = policy.next_wait(error, failures, deadline - time.monotonic())
            if wait is None:
                raise error from None
            if isinstance(error, RateLimited):
                pacer.refused(error)
            else:
                failures += 1
            await asyncio.sleep(wait)

    async def _unary(self, service: str, method: str, request: Any, *, timeout: float | None = None, admin: bool = False) -> Any:
        call = getattr(self._stub("admin" if admin else service), method)
        metadata = self.settings.admin_metadata if admin else self.settings.metadata
        return await self._invoke(
            lambda seconds: call(request, timeout=seconds, metadata=metadata),
            service=SEARCH if service == SEARCH else INGEST,
            timeout=timeout,
        )

    async def search(
        self,
        collection: str,
        query: str = "",
        *,
        top_k: int = 10,
        mode: SearchMode | str | None = None,
        filter: Mapping[str, str] | None = None,
        where: Any = None,
        filenames: Iterable[str] | None = None,
        document_ids: Iterable[str] | None = None,
        neighbors: int = 0,
        max_per_document: int = 0,
        min_score: float | None = None,
        rerank: bool | None = None,
        query_vector: Iterable[float] | None = None,
        consistency_token: str = "",
        explain: bool = False,
        generation: int = 0,
        timeout: float | None = None,
    ) -> SearchResults:
        """See Client.search."""
        request = _core.search_request(
            collection,
            query,
            top_k=top_k,
            mode=mode,
            filter=filter,
            where=where,
            filenames=filenames,
            document_ids=document_ids,
            neighbors=neighbors,
            max_per_document=max_per_document,
            min_score=min_score,
            rerank=rerank,
            query_vector=query_vector,
            consistency_token=consistency_token,
            explain=explain,
            generation=generation,
        )
        return SearchResults(await self._unary(SEARCH, "Search", request, timeout=timeout))

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        self._stubs.clear()
        for channel in channels:
            await channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncCollections:
    """See Collections."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(
        self,
        name: str,
        *,
        embedder: Embedder | str = Embedder.LOCAL,
        model: str = "",
        dimensions: int = 0,
        chunk_size: int | None = None,
        overlap: int | None = None,
        max_attempts: int | None = None,
        description: str = "",
        reranker: collection_pb2.RerankerConfig | None = None,
        vector_precision: str = "",
        exist_ok: bool = False,
        timeout: float | None = None,
    ) -> Collection:
        request = _core.create_collection_request(
            name,
            embedder=embedder,
            model=model,
            dimensions=dimensions,
            chunk_size=chunk_size,
            overlap=overlap,
            max_attempts=max_attempts,
            description=description,
            reranker=reranker,
            vector_precision=vector_precision,
        )
        try:
            return Collection.from_proto(await self._client._unary(INGEST, "CreateCollection", request, timeout=timeout))
        except AlreadyExists:
            if not exist_ok:
                raise
            return await self.get(name, timeout=timeout)

    async def get(self, name: str, *, timeout: float | None = None) -> Collection:
        request = document_service_pb2.GetCollectionRequest(name=name)
        return Collection.from_proto(await self._client._unary(INGEST, "GetCollection", request, timeout=timeout))

    async def list(self, *, page_size: int = _core.PAGE_SIZE) -> AsyncIterator[Collection]:
        token = ""
        while True:
            page = await self._client._unary(
                INGEST, "ListCollections", document_service_pb2.ListCollectionsRequest(page_size=page_size, page_token=token)
            )
            for collection in page.collections:
                yield Collection.from_proto(collection)
            token = page.next_page_token
            if not token:
                return

    async def delete(self, name: str, *, force: bool = False, timeout: float | None = None) -> int:
        request = document_service_pb2.DeleteCollectionRequest(name=name, force=force)
        return int((await self._client._unary(INGEST, "DeleteCollection", request, timeout=timeout)).deleted_documents)

    async def reindex(
        self,
        name: str,
        *,
        embedder: Embedder | str = Embedder.LOCAL,
        model: str = "",
        dimensions: int = 0,
        eval_queries: Iterable[Mapping[str, Any]] = (),
        min_ratio: float = 0.0,
        timeout: float | None = None,
    ) -> Collection:
        """See Collections.reindex: a new index generation with another embedder, search answering
        from the current one until the switch."""
        request = _core.reindex_collection_request(name, embedder, model, dimensions, eval_queries, min_ratio)
        return Collection.from_proto(await self._client._unary(INGEST, "ReindexCollection", request, timeout=timeout))

    async def cancel_reindex(self, name: str, *, timeout: float | None = None) -> Collection:
        request = document_service_pb2.CancelReindexRequest(name=name)
        return Collection.from_proto(await self._client._unary(INGEST, "CancelReindex", request, timeout=timeout))

    async def export_collection(
        self, name: str, path_or_file: bundles.BundleFile, *, timeout: float | None = None
    ) -> bundles.ExportedBundle:
        """See Collections.export_collection (a file object is written from the event loop)."""
        client = self._client
        receiver = bundles.BundleReceiver(name, path_or_file)
        try:
            call = client._stub(INGEST).ExportCollection(
                document_service_pb2.ExportCollectionRequest(name=name), timeout=timeout, metadata=client.settings.metadata
            )
            try:
                async for message in call:
                    receiver.take(message)
            except grpc.RpcError as rpc_error:
                raise client._error(rpc_error, INGEST) from None
            return receiver.finish()
        except BaseException:
            receiver.discard()
            raise

    async def import_collection(
        self, path_or_file: bundles.BundleFile, as_name: str, reembed: bool = False, *, timeout: float | None = None
    ) -> Collection:
        """See Collections.import_collection (the bundle is read in a thread, a piece at a time)."""
        client = self._client
        with bundles.opened(path_or_file) as file:
            try:
                created = await client._stub(INGEST).ImportCollection(
                    bundles.import_messages_async(file, as_name, reembed), timeout=timeout, metadata=client.settings.metadata
                )
            except grpc.RpcError as rpc_error:
                raise client._error(rpc_error, INGEST) from None
        return Collection.from_proto(created)

    async def watch(
        self,
        name: str,
        *,
        cursor: str = "",
        from_start: bool = False,
        statuses: Iterable[DocumentStatus | str] = (),
        terminal_only: bool = False,
        heartbeats: bool = False,
        on_reconnect: Callable[[str, SluiceError], None] | None = None,
        source_runs: str = "none",
    ) -> AsyncIterator[CollectionEvent]:
        """See Collections.watch: resumes after the last cursor when the connection drops
        (`on_reconnect(cursor, error)` hears of it)."""
        client = self._client
        policy = client.settings.policy
        request = document_service_pb2.WatchCollectionRequest(
            collection=name,
            after_cursor=cursor,
            start_from_oldest=from_start and not cursor,
            terminal_only=terminal_only,
            source_runs=source_run_events(source_runs),  # type: ignore[arg-type]
            statuses=[DocumentStatus.of(s).value for s in statuses],  # type: ignore[misc]
        )
        connected, failures, away_since = False, 0, None
        while True:
            if cursor:
                request.after_cursor, request.start_from_oldest = cursor, False
            await asyncio.sleep(client.settings.pacer.reserve())
            call = client._stub(INGEST).WatchCollection(request, metadata=client.settings.metadata)
            try:
                async for message in call:
                    connected, failures, away_since = True, 0, None
                    cursor = message.cursor
                    if message.type == document_service_pb2.COLLECTION_EVENT_TYPE_HEARTBEAT and not heartbeats:
                        continue
                    yield CollectionEvent.from_proto(message)
                await asyncio.sleep(0.2)
                continue
            except grpc.RpcError as rpc_error:
                error = client._error(rpc_error, INGEST)
            finally:
                call.cancel()
            if isinstance(error, RateLimited) and error.retry_after is not None:
                client.settings.pacer.refused(error)
                await asyncio.sleep(error.retry_after)
                continue
            away_since = away_since or time.monotonic()
            if (
                not isinstance(error, Unavailable)
                or isinstance(error, TLSError)
                or (not connected and failures + 1 >= policy.attempts)
                or time.monotonic() - away_since > RECONNECT_WINDOW_SECONDS
            ):
                raise error from None
            if connected and on_reconnect is not None:
                on_reconnect(cursor, error)
            await asyncio.sleep(policy.backoff(failures))
            failures += 1


async def _messages(
    prepared: uploads.PreparedUpload, metadata: document_service_pb2.UploadDocumentMetadata
) -> AsyncIterator[document_service_pb2.UploadDocumentRequest]:
    """The upload stream, its file read in a thread so the event loop never waits on the disk.

    When the source cannot be read or has changed, the stream just ends without its trailer (an
    exception here would cancel the call from inside): the server stores nothing and answers
    UPLOAD_INCOMPLETE, which `upload` reports as the source's failure (prepared.read_failure)."""
    stream = prepared.messages(metadata)
    while True:
        try:
            message = await asyncio.to_thread(next, stream, None)
        except (OSError, UploadSourceError):
            return
        if message is None:
            return
        yield message


# The details grpc asyncio gives a call whose status it replaced after a failed write (grpc/grpc#36066).
LOST_STATUS = "Internal error from Core"


class AsyncDocuments:
    """See Documents."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def upload(
        self,
        collection: str,
        source: uploads.Source,
        *,
        filename: str | None = None,
        mime_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        typed_metadata: Mapping[str, Any] | None = None,
        request_id: str | None = None,
        timeout: float | None = None,
        source_uri: str | None = None,
        priority: str | None = None,
    ) -> Document:
        """See Documents.upload."""
        client = self._client
        prepared = await asyncio.to_thread(uploads.prepare, source, filename)
        message = uploads.metadata_message(
            collection,
            prepared,
            mime_type=mime_type,
            metadata=metadata,
            typed_metadata=typed_metadata,
            request_id_value=request_id
            or uploads.request_id(
                collection,
                _core.upload_identity(prepared.identity, source_uri),
                prepared.sha256,
                client.settings.request_id_prefix,
            ),
            source_uri=source_uri,
            priority=priority,
        )
        call = client._stub(INGEST).UploadDocument

        def translate(error: SluiceError) -> SluiceError:
            if prepared.read_failure:
                return UploadSourceError(prepared.read_failure[0], reason="SOURCE_CHANGED")
            if isinstance(error, Internal) and error.message == LOST_STATUS:
                # grpc asyncio (grpc/grpc#36066): when the server ends an upload early (a full
                # upload slot, TOO_MANY_UPLOADS) while this stream is still writing, the failed
                # write replaces the server's status with this INTERNAL. The server's answer is
                # lost, not an internal error: try again with backoff, like UNAVAILABLE (the
                # request_id makes a repeated upload the same document).
                return Unavailable(
                    f"the server ended the upload before it was sent and grpc asyncio lost its answer"
                    f" (grpc/grpc#36066); {error.message}",
                    reason="UPLOAD_ANSWER_LOST",
                    service=error.service,
                    address=error.address,
                )
            return error

        response = await client._invoke(
            lambda seconds: call(_messages(prepared, message), timeout=seconds, metadata=client.settings.metadata),
            timeout=timeout or max(60.0, prepared.size / (1024 * 1024)),
            translate=translate,
        )
        return Document.from_proto(response)

    async def upload_many(
        self,
        collection: str,
        sources: Iterable[uploads.Source],
        *,
        concurrency: int = 4,
        metadata: Mapping[str, str] | None = None,
        typed_metadata: Mapping[str, Any] | None = None,
        on_start: Callable[[Any], None] | None = None,
        source_uri_of: Callable[[Any], str | None] | None = None,
        priority: str | None = None,
    ) -> AsyncIterator[UploadResult]:
        """See Documents.upload_many: results as they finish, `concurrency` uploads at a time."""
        queue: asyncio.Queue[UploadResult] = asyncio.Queue()
        sources = list(sources)
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(source: Any) -> None:
            async with gate:
                if on_start is not None:
                    on_start(source)
                try:
                    result = UploadResult(
                        source,
                        await self.upload(
                            collection,
                            source,
                            metadata=metadata,
                            typed_metadata=typed_metadata,
                            source_uri=source_uri_of(source) if source_uri_of else None,
                            priority=priority,
                        ),
                    )
                except SluiceError as error:
                    result = UploadResult(source, error=error)
            await queue.put(result)

        tasks = [asyncio.ensure_future(one(source)) for source in sources]
        try:
            for _ in sources:
                yield await queue.get()
        finally:
            for task in tasks:
                task.cancel()

    async def upload_folder(
        self,
        collection: str,
        *paths: str | os.PathLike[str],
        concurrency: int = 4,
        wait: bool = True,
        timeout: float | None = None,
        metadata: Mapping[str, str] | None = None,
        typed_metadata: Mapping[str, Any] | None = None,
        on_change: Callable[[Document], None] | None = None,
    ) -> builtins.list[UploadResult]:
        """See Documents.upload_folder."""
        files = uploads.find_files(list(paths))
        results: dict[Any, UploadResult] = {}
        tracker = self.tracker(collection, on_change=on_change) if wait else None
        try:
            if tracker is not None:
                await tracker.start()
            async for result in self.upload_many(
                collection, files, concurrency=concurrency, metadata=metadata, typed_metadata=typed_metadata
            ):
                results[result.source] = result
                if tracker is not None and result.document is not None:
                    result.document = tracker.track(result.document)
            if tracker is not None:
                try:
                    final = {d.id: d for d in await tracker.wait(timeout)}
                except WaitTimeout as error:
                    final = {d.id: d for d in error.documents}
                for result in results.values():
                    if result.document is not None:
                        result.document = final.get(result.document.id, result.document)
        finally:
            if tracker is not None:
                await tracker.close()
        return [results[f] for f in files]

    async def sync_folder(  # noqa: C901 (Documents.sync_folder's one pass)
        self,
        collection: str,
        folder: str | os.PathLike[str],
        *,
        delete: bool = False,
        allow_mass_delete: bool = False,
        max_delete_share: float = sync.DEFAULT_MAX_DELETE_SHARE,
        concurrency: int = 4,
        include_hidden: bool = False,
        wait: bool = True,
        timeout: float | None = None,
        on_plan: Callable[[sync.SyncPlan], None] | None = None,
        on_start: Callable[[Any], None] | None = None,
        on_uploaded: Callable[[UploadResult], None] | None = None,
        on_change: Callable[[Document], None] | None = None,
    ) -> sync.SyncReport:
        """See Documents.sync_folder: the same plan, guard, uploads, wait and deletions; files are
        hashed in threads, so the event loop keeps serving meanwhile."""
        folder = Path(folder)
        files = await asyncio.to_thread(sync.folder_files, folder, include_hidden=include_hidden)
        listed = [document async for document in self.list(collection)]
        hashed = await asyncio.gather(*(asyncio.to_thread(sync.hash_file, uri, path) for uri, path in files.items()))
        plan = sync.plan(files, {uri: (sha256, error) for uri, sha256, error in hashed}, listed)
        if delete and not allow_mass_delete:
            sync.check_mass_delete(collection, plan, max_delete_share)
        if on_plan is not None:
            on_plan(plan)
        report = sync.SyncReport(collection, folder, unchanged=plan.unchanged, failed=plan.failed, waited=wait)
        uploaded: dict[str, tuple[sync.SyncUpload, Document]] = {}
        by_path = {item.path: item for item in plan.uploads}
        tracker = self.tracker(collection, on_change=on_change) if wait and plan.uploads else None
        try:
            if tracker is not None:
                await tracker.start()  # before the first upload, so that no event is missed
            async for result in self.upload_many(
                collection,
                builtins.list(by_path),
                concurrency=concurrency,
                on_start=on_start,
                source_uri_of=lambda path: by_path[path].source_uri,
                priority="bulk",  # a sync is bulk work (docs/tenancy.md, "Priorities")
            ):
                item = by_path[result.source]
                if result.document is None:
                    message = result.error.message if result.error is not None else "no document"
                    report.failed.append(sync.SyncFailure(item.source_uri, message, item.path))
                else:
                    if tracker is not None:
                        result.document = tracker.track(result.document)
                    uploaded[result.document.id] = (item, result.document)
                if on_uploaded is not None:
                    on_uploaded(result)
            if tracker is not None:
                try:
                    final = await tracker.wait(timeout)
                except WaitTimeout as error:
                    final = error.documents
                for document in final:
                    if document.id in uploaded:
                        uploaded[document.id] = (uploaded[document.id][0], document)
        finally:
            if tracker is not None:
                await tracker.close()
        for item, document in sorted(uploaded.values(), key=lambda pair: pair[0].source_uri):
            if document.failed:
                report.failed.append(
                    sync.SyncFailure(item.source_uri, document.error_message or "processing failed", item.path, document)
                )
            elif wait and not document.done:
                report.failed.append(
                    sync.SyncFailure(
                        item.source_uri, f"timed out waiting for it (still {document.status.name})", item.path, document
                    )
                )
            else:
                (report.new if item.new else report.updated).append(document)
        if delete:
            await self._delete_sources(collection, plan.gone, report, concurrency)
        else:
            report.kept = plan.gone
        return report

    async def _delete_sources(
        self, collection: str, source_uris: builtins.list[str], report: sync.SyncReport, concurrency: int
    ) -> None:
        """Delete every version of each source; one already gone counts as deleted."""
        gate = asyncio.Semaphore(max(1, concurrency))

        async def one(source_uri: str) -> SluiceError | None:
            async with gate:
                try:
                    await self.delete(collection=collection, source_uri=source_uri)
                except NotFound:
                    pass
                except SluiceError as error:
                    return error
                return None

        for source_uri, error in zip(source_uris, await asyncio.gather(*(one(uri) for uri in source_uris)), strict=True):
            if error is None:
                report.deleted.append(source_uri)
            else:
                report.failed.append(sync.SyncFailure(source_uri, f"could not delete it: {error.message}"))

    async def get(
        self,
        document_id: str | None = None,
        *,
        collection: str | None = None,
        source_uri: str | None = None,
        timeout: float | None = None,
    ) -> Document:
        request = document_service_pb2.GetDocumentRequest(**_core.document_key(document_id, collection, source_uri))
        return Document.from_proto(await self._client._unary(INGEST, "GetDocument", request, timeout=timeout))

    async def list(
        self,
        collection: str | None = None,
        *,
        status: DocumentStatus | str | None = None,
        page_size: int = _core.PAGE_SIZE,
        limit: int | None = None,
        source_uri: str | None = None,
    ) -> AsyncIterator[Document]:
        token, count = "", 0
        while True:
            size = page_size if not limit else min(page_size, limit - count)
            page = await self._client._unary(
                INGEST, "ListDocuments", _core.list_documents_request(collection, status, size, token, source_uri)
            )
            for document in page.documents:
                yield Document.from_proto(document)
                count += 1
                if limit and count >= limit:
                    return
            token = page.next_page_token
            if not token:
                return

    async def delete(
        self,
        document_id: str | None = None,
        *,
        collection: str | None = None,
        source_uri: str | None = None,
        timeout: float | None = None,
    ) -> bool:
        request = document_service_pb2.DeleteDocumentRequest(**_core.document_key(document_id, collection, source_uri))
        return bool((await self._client._unary(INGEST, "DeleteDocument", request, timeout=timeout)).cancelled_running_job)

    async def retry(self, document_id: str, *, timeout: float | None = None) -> Document:
        request = document_service_pb2.RetryDocumentRequest(id=document_id)
        return Document.from_proto(await self._client._unary(INGEST, "RetryDocument", request, timeout=timeout))

    async def reprocess(self, document_id: str, *, timeout: float | None = None) -> Document:
        request = document_service_pb2.ReprocessDocumentRequest(id=document_id)
        return Document.from_proto(await self._client._unary(INGEST, "ReprocessDocument", request, timeout=timeout))

    # -------------------------------------------------------------- chunks (docs/clients.md#chunks-and-the-original-file)

    async def list_chunks(
        self,
        document_id: str,
        *,
        page_size: int = 100,
        page_token: str = "",
        generation: int = 0,
        timeout: float | None = None,
    ) -> ChunkPage:
        """See Documents.list_chunks."""
        request = document_service_pb2.ListChunksRequest(
            document_id=document_id, page_size=page_size, page_token=page_token, generation=generation
        )
        return ChunkPage.from_proto(await self._client._unary(INGEST, "ListChunks", request, timeout=timeout))

    async def iter_chunks(
        self, document_id: str, *, generation: int = 0, page_size: int = _core.PAGE_SIZE
    ) -> AsyncIterator[Chunk]:
        """Every chunk of a document in chunk_index order, fetched a page at a time as you iterate."""
        token = ""
        while True:
            page = await self.list_chunks(document_id, page_size=page_size, page_token=token, generation=generation)
            for chunk in page.chunks:
                yield chunk
            token = page.next_page_token
            if not token:
                return

    async def disable_chunk(self, chunk_id: str, *, etag: str | None = None, timeout: float | None = None) -> Chunk:
        """See Documents.disable_chunk."""
        return await self._update_chunk(_core.update_chunk_request(chunk_id, enabled=False, etag=etag), timeout)

    async def enable_chunk(self, chunk_id: str, *, etag: str | None = None, timeout: float | None = None) -> Chunk:
        """See Documents.enable_chunk."""
        return await self._update_chunk(_core.update_chunk_request(chunk_id, enabled=True, etag=etag), timeout)

    async def edit_chunk(self, chunk_id: str, text: str, *, etag: str | None = None, timeout: float | None = None) -> Chunk:
        """See Documents.edit_chunk."""
        return await self._update_chunk(_core.update_chunk_request(chunk_id, text=text, etag=etag), timeout)

    async def _update_chunk(self, request: document_service_pb2.UpdateChunkRequest, timeout: float | None) -> Chunk:
        return Chunk.from_proto(await self._client._unary(INGEST, "UpdateChunk", request, timeout=timeout))

    @overload
    async def download(self, document_id: str, destination: None = None, *, timeout: float | None = None) -> bytes: ...

    @overload
    async def download(
        self, document_id: str, destination: str | os.PathLike[str] | IO[bytes], *, timeout: float | None = None
    ) -> DownloadedDocument: ...

    async def download(
        self, document_id: str, destination: downloads.Destination = None, *, timeout: float | None = None
    ) -> bytes | DownloadedDocument:
        """See Documents.download (a file object is written from the event loop: a blocking one blocks it)."""
        client = self._client
        policy = client.settings.policy
        request = document_service_pb2.DownloadDocumentRequest(id=document_id)
        sink = downloads.sink_for(destination)
        deadline = time.monotonic() + timeout if timeout else None
        failures = 0
        try:
            while True:
                await asyncio.sleep(client.settings.pacer.reserve())
                receiver = downloads.Receiver(document_id, sink)
                try:
                    await self._receive(request, receiver, deadline)
                    result: bytes | DownloadedDocument = receiver.result(destination)
                    return result
                except grpc.RpcError as rpc_error:
                    error = client._error(rpc_error, INGEST)
                remaining = (deadline - time.monotonic()) if deadline is not None else policy.timeout
                wait = policy.next_wait(error, failures, remaining)
                if wait is None or not sink.reset():
                    raise error from None
                if isinstance(error, RateLimited):
                    client.settings.pacer.refused(error)
                else:
                    failures += 1
                await asyncio.sleep(wait)
        except BaseException:
            sink.discard()
            raise

    async def _receive(self, request: Any, receiver: downloads.Receiver, deadline: float | None) -> None:
        """One attempt (see Documents._receive): each read waits at most until the header's or the
        bytes' time is up when no deadline was given."""
        client = self._client
        remaining = None if deadline is None else max(0.001, deadline - time.monotonic())
        call = client._stub(INGEST).DownloadDocument(request, timeout=remaining, metadata=client.settings.metadata)
        until = time.monotonic() + client.settings.policy.timeout
        try:
            while True:
                try:
                    message = await asyncio.wait_for(call.read(), None if deadline is not None else until - time.monotonic())
                except TimeoutError:
                    raise DeadlineExceeded(
                        f"ingest-api at {client.ingest_address} did not send {request.id} in time",
                        reason="DEADLINE_EXCEEDED",
                        service=INGEST,
                        address=client.ingest_address,
                    ) from None
                if message is grpc.aio.EOF:
                    return
                had_header = receiver.header is not None
                receiver.take(message)
                if not had_header and receiver.header is not None:
                    until = time.monotonic() + downloads.transfer_seconds(receiver.header.size_bytes)
        finally:
            call.cancel()

    async def watch(self, document_id: str, *, timeout: float | None = None) -> AsyncIterator[Document]:
        """See Documents.watch."""
        client = self._client
        policy = client.settings.policy
        deadline = time.monotonic() + timeout if timeout else None
        last: Document | None = None
        failures = 0
        while last is None or not last.done:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise _core.timeout_error([last or Document.from_proto(document_pb2.Document(id=document_id))])
            await asyncio.sleep(client.settings.pacer.reserve())
            call = client._stub(INGEST).WatchDocument(
                document_service_pb2.WatchDocumentRequest(id=document_id), timeout=remaining, metadata=client.settings.metadata
            )
            try:
                async for event in call:
                    failures = 0
                    state = Document.from_proto(event.document)
                    if last is None or state.raw != last.raw:
                        last = state
                        yield state
                    if state.done:
                        return
                await asyncio.sleep(0.2)
                continue
            except grpc.RpcError as rpc_error:
                if rpc_error.code() == grpc.StatusCode.DEADLINE_EXCEEDED and deadline is not None:
                    continue
                error = client._error(rpc_error, INGEST)
            finally:
                call.cancel()
            wait = policy.next_wait(error, failures, (deadline - time.monotonic()) if deadline else RECONNECT_WINDOW_SECONDS)
            if wait is None:
                raise error from None
            if isinstance(error, RateLimited):
                client.settings.pacer.refused(error)
            else:
                failures += 1
            await asyncio.sleep(wait)

    async def wait(
        self, document_id: str, *, timeout: float | None = None, on_change: Callable[[Document], None] | None = None
    ) -> Document:
        """The document once READY or FAILED (WaitTimeout after `timeout` seconds); `on_change`
        sees every state on the way."""
        last = None
        async for state in self.watch(document_id, timeout=timeout):
            last = state
            if on_change is not None:
                on_change(state)
        assert last is not None
        return last

    async def wait_all(
        self,
        documents: Iterable[Document | str],
        *,
        timeout: float | None = None,
        on_change: Callable[[Document], None] | None = None,
    ) -> builtins.list[Document]:
        """See Documents.wait_all: every collection followed at once, each watch's documents
        still processing read once when it opens (AsyncDocumentTracker.refresh)."""
        known = [await self.get(d) if isinstance(d, str) else d for d in documents]
        deadline = time.monotonic() + timeout if timeout else None
        final: dict[str, Document] = {}
        trackers: list[AsyncDocumentTracker] = []

        async def follow(collection: str, members: list[Document]) -> None:
            tracker = self.tracker(collection, on_change=on_change)
            trackers.append(tracker)
            await tracker.start()
            for document in members:
                tracker.track(document)
            await tracker.refresh()
            # Never 0: a tracker reads a timeout of 0 as none.
            remaining = None if deadline is None else max(0.001, deadline - time.monotonic())
            final.update((d.id, d) for d in await tracker.wait(remaining))

        by_collection: dict[str, list[Document]] = {}
        for document in known:
            by_collection.setdefault(document.collection, []).append(document)
        waiting = {c: m for c, m in by_collection.items() if not all(d.done for d in m)}
        final.update((d.id, d) for c, m in by_collection.items() if c not in waiting for d in m)
        try:
            # Settled, not raced: each follower ends by the same deadline, and none is left waiting.
            outcomes = await asyncio.gather(*(follow(c, m) for c, m in waiting.items()), return_exceptions=True)
            failure = next((o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, WaitTimeout)), None)
            if failure is not None:
                raise failure
            if any(isinstance(o, WaitTimeout) for o in outcomes):
                for tracker in trackers:
                    final.update((d.id, d) for d in tracker.documents)
                raise _core.timeout_error([final.get(d.id, d) for d in known])
        finally:
            for tracker in trackers:
                await tracker.close()
        return [final.get(d.id, d) for d in known]

    def tracker(self, collection: str, *, on_change: Callable[[Document], None] | None = None) -> AsyncDocumentTracker:
        return AsyncDocumentTracker(self._client, collection, on_change=on_change)


class AsyncDocumentTracker:
    """DocumentTracker for asyncio: one WatchCollection stream followed by a task."""

    QUIET_RELIST_SECONDS = 60.0
    REFRESH_BY_GET = 100  # DocumentTracker's
    REFRESH_CONCURRENCY = 8

    def __init__(self, client: AsyncClient, collection: str, *, on_change: Callable[[Document], None] | None = None) -> None:
        self._client = client
        self.collection = collection
        self._on_change = on_change
        self._state = _core.TrackedDocuments()
        self._changed = asyncio.Event()
        self._opened = asyncio.Event()
        self._error: SluiceError | None = None
        self._task: asyncio.Task[None] | None = None
        self._needs_relist = False
        self._last_change = time.monotonic()

    async def start(self) -> AsyncDocumentTracker:
        if self._task is None:
            self._task = asyncio.ensure_future(self._follow())
        while not self._opened.is_set():
            if self._error is not None:
                raise self._error
            await asyncio.sleep(0.02)
        return self

    def track(self, document: Document) -> Document:
        state = self._state.track(document)
        self._changed.set()
        return state

    @property
    def documents(self) -> builtins.list[Document]:
        return list(self._state.documents.values())

    async def refresh(self) -> None:
        """See DocumentTracker.refresh."""
        pending = self._state.pending()
        if len(pending) > self.REFRESH_BY_GET:
            async for listed in self._client.documents.list(self.collection):
                self._apply(self._state.apply(listed))
            return
        slots = asyncio.Semaphore(self.REFRESH_CONCURRENCY)

        async def read(document: Document) -> None:
            async with slots:
                try:
                    fresh = await self._client.documents.get(document.id)
                except NotFound:
                    self._apply(self._state.remove(document))
                    return
            self._apply(self._state.apply(fresh))

        await asyncio.gather(*(read(document) for document in pending))

    async def wait(self, timeout: float | None = None) -> builtins.list[Document]:
        deadline = time.monotonic() + timeout if timeout else None
        while not self._state.all_done:
            if self._error is not None:
                raise self._error
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise _core.timeout_error(list(self._state.documents.values()))
            if self._needs_relist or time.monotonic() - self._last_change > self.QUIET_RELIST_SECONDS:
                self._needs_relist = False
                self._last_change = time.monotonic()
                async for document in self._client.documents.list(self.collection):
                    self._apply(self._state.apply(document))
                continue
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(1.0, remaining) if remaining is not None else 1.0)
        return list(self._state.documents.values())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # closing: its outcome no longer matters
                await self._task

    async def __aenter__(self) -> AsyncDocumentTracker:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _apply(self, state: Document | None) -> None:
        if state is None:
            return
        self._last_change = time.monotonic()
        self._changed.set()
        if self._on_change is not None:
            self._on_change(state)

    async def _follow(self) -> None:
        client = self._client
        policy = client.settings.policy
        cursor, failures, away_since = "", 0, None
        while True:
            request = document_service_pb2.WatchCollectionRequest(collection=self.collection, after_cursor=cursor)
            await asyncio.sleep(client.settings.pacer.reserve())
            call = client._stub(INGEST).WatchCollection(request, metadata=client.settings.metadata)
            try:
                async for event in call:
                    failures, away_since = 0, None
                    cursor = event.cursor
                    self._opened.set()
                    if event.type == document_service_pb2.COLLECTION_EVENT_TYPE_HEARTBEAT:
                        continue
                    document = Document.from_proto(event.document)
                    if event.type == document_service_pb2.COLLECTION_EVENT_TYPE_DELETED:
                        self._apply(self._state.remove(document))
                    else:
                        self._apply(self._state.apply(document))
                await asyncio.sleep(0.2)
                continue
            except grpc.RpcError as rpc_error:
                error = client._error(rpc_error, INGEST)
            finally:
                call.cancel()
            if isinstance(error, OutOfRange):
                cursor, self._needs_relist = "", True
                self._changed.set()
                continue
            if isinstance(error, RateLimited) and error.retry_after is not None:
                client.settings.pacer.refused(error)
                await asyncio.sleep(error.retry_after)
                continue
            away_since = away_since or time.monotonic()
            if (
                not isinstance(error, Unavailable)
                or isinstance(error, TLSError)
                or (not self._opened.is_set() and failures + 1 >= policy.attempts)
                or time.monotonic() - away_since > RECONNECT_WINDOW_SECONDS
            ):
                self._error = error
                self._changed.set()
                return
            await asyncio.sleep(policy.backoff(failures))
            failures += 1


# ---------------------------------------------------------------------- webhooks and administration


class AsyncWebhooks:
    """Webhooks for asyncio (see Webhooks: signed POSTs of a collection's events, docs/webhooks.md)."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def _call(self, method: str, request: Any) -> Any:
        return await self._client._unary("webhooks", method, request)

    async def create(self, collection: str, url: str, *, event_types: Iterable[str] = (), description: str = "") -> NewWebhook:
        """See Webhooks.create: the signing secret is returned this once."""
        unknown = [t for t in event_types if t not in WEBHOOK_EVENT_TYPES]
        if unknown:
            raise ValueError(f"unknown event type {unknown[0]!r}; choose from {', '.join(WEBHOOK_EVENT_TYPES)}")
        webhook = webhook_service_pb2.Webhook(
            collection=collection, url=url, description=description, event_types=[WEBHOOK_EVENT_TYPES[t] for t in event_types]
        )
        response = await self._call("CreateWebhook", webhook_service_pb2.CreateWebhookRequest(webhook=webhook))
        return NewWebhook(Webhook.from_proto(response.webhook), response.secret)

    async def get(self, webhook_id: str) -> Webhook:
        return Webhook.from_proto(await self._call("GetWebhook", webhook_service_pb2.GetWebhookRequest(id=webhook_id)))

    async def list(self, collection: str | None = None) -> AsyncIterator[Webhook]:
        token = ""
        while True:
            page = await self._call(
                "ListWebhooks",
                webhook_service_pb2.ListWebhooksRequest(collection=collection or "", page_size=200, page_token=token),
            )
            for webhook in page.webhooks:
                yield Webhook.from_proto(webhook)
            token = page.next_page_token
            if not token:
                return

    async def delete(self, webhook_id: str) -> int:
        """Delete a webhook; returns the pending deliveries dropped with it."""
        reply = await self._call("DeleteWebhook", webhook_service_pb2.DeleteWebhookRequest(id=webhook_id))
        return int(reply.dropped_pending_deliveries)

    async def rotate_secret(self, webhook_id: str) -> NewWebhook:
        response = await self._call("RotateWebhookSecret", webhook_service_pb2.RotateWebhookSecretRequest(id=webhook_id))
        return NewWebhook(Webhook.from_proto(response.webhook), response.secret)

    async def deliveries(self, webhook_id: str, *, failed: bool = False, limit: int = 50) -> builtins.list[WebhookDelivery]:
        """A webhook's deliveries, newest first (with `failed`, only those given up)."""
        state = (
            webhook_service_pb2.WEBHOOK_DELIVERY_STATE_FAILED
            if failed
            else webhook_service_pb2.WEBHOOK_DELIVERY_STATE_UNSPECIFIED
        )
        rows: builtins.list[WebhookDelivery] = []
        token = ""
        while len(rows) < limit:
            page = await self._call(
                "ListWebhookDeliveries",
                webhook_service_pb2.ListWebhookDeliveriesRequest(
                    webhook_id=webhook_id, state=state, page_size=min(limit - len(rows), 1000), page_token=token
                ),
            )
            rows.extend(WebhookDelivery.from_proto(d) for d in page.deliveries)
            token = page.next_page_token
            if not token:
                break
        return rows


class AsyncAdmin:
    """Tenants and API keys for asyncio (see Admin: an admin key, the credentials file's or `api_key`)."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def _call(self, method: str, request: Any) -> Any:
        return await self._client._unary("admin", method, request, admin=True)

    async def create_tenant(
        self, name: str, *, max_documents: int = 0, max_stored_bytes: int = 0, max_collections: int = 0
    ) -> Tenant:
        """A tenant with quotas (0 = unlimited)."""
        quota = admin_service_pb2.TenantQuota(
            max_documents=max_documents, max_stored_bytes=max_stored_bytes, max_collections=max_collections
        )
        tenant = admin_service_pb2.Tenant(name=name, quota=quota)
        return Tenant.from_proto(await self._call("CreateTenant", admin_service_pb2.CreateTenantRequest(tenant=tenant)))

    async def list_tenants(self) -> builtins.list[Tenant]:
        reply = await self._call("ListTenants", admin_service_pb2.ListTenantsRequest())
        return [Tenant.from_proto(t) for t in reply.tenants]

    async def create_key(self, tenant: str, role: str, *, name: str = "", collections: Sequence[str] = ()) -> NewApiKey:
        """A key of `tenant` with `role` (admin, client, reader, worker), limited to `collections`
        when some are given (client and reader keys only); its secret is returned this once."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; choose from {', '.join(ROLES)}")
        response = await self._call(
            "CreateApiKey",
            admin_service_pb2.CreateApiKeyRequest(tenant=tenant, role=ROLES[role], name=name, collections=list(collections)),
        )
        return NewApiKey(ApiKey.from_proto(response.api_key), response.secret)

    async def list_keys(self, tenant: str = "") -> builtins.list[ApiKey]:
        reply = await self._call("ListApiKeys", admin_service_pb2.ListApiKeysRequest(tenant=tenant))
        return [ApiKey.from_proto(k) for k in reply.api_keys]

    async def revoke_key(self, key: str) -> ApiKey:
        """Revoke a key by id or prefix (slk_<id>_): refused by every process within a second."""
        return ApiKey.from_proto(await self._call("RevokeApiKey", admin_service_pb2.RevokeApiKeyRequest(id=key)))


__all__ = ["AsyncAdmin", "AsyncClient", "AsyncCollections", "AsyncDocumentTracker", "AsyncDocuments", "AsyncWebhooks"]
