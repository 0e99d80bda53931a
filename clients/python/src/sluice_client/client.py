"""The synchronous client: `Client`, with `collections`, `documents`, `webhooks`, `sources`, `admin` and `search`.

    client = Client("localhost:50051", search_address="localhost:50052", api_key=KEY)
    client.collections.create("docs")
    doc = client.documents.wait(client.documents.upload("docs", "report.pdf").id)
    for hit in client.search("docs", "how do leases expire", top_k=5):
        print(hit.filename, hit.text)

Every call retries what can heal (retry.py) within its deadline (`timeout`, 30 s unless given)
and raises a SluiceError (errors.py) otherwise. A Client is safe to share between threads;
close it (or use it as a context manager) to close its connections. docs/clients.md.
"""

from __future__ import annotations

import builtins
import os
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar, overload

import grpc

from . import _core, bundles, downloads, sync, uploads
from .errors import (
    AlreadyExists,
    DeadlineExceeded,
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
    document_service_pb2,
    document_service_pb2_grpc,
    search_service_pb2_grpc,
    source_service_pb2_grpc,
    webhook_service_pb2,
    webhook_service_pb2_grpc,
)
from .retry import RetryPolicy
from .sources import Sources
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
INGEST, SEARCH = "ingest-api", "search"
ROLES = {
    "admin": admin_service_pb2.API_KEY_ROLE_ADMIN,
    "client": admin_service_pb2.API_KEY_ROLE_CLIENT,
    "reader": admin_service_pb2.API_KEY_ROLE_READER,
    "worker": admin_service_pb2.API_KEY_ROLE_WORKER,
}
# A watch that has connected once reconnects until the server has been away this long.
RECONNECT_WINDOW_SECONDS = 300.0


class Client:
    """A connection to Sluice's ingest-api and search (config.py: where each setting comes from).

    `timeout` is each call's deadline in seconds, retries included; `max_calls_per_second`
    paces the client from the start (otherwise it paces itself once the server reports its
    limit); `wrap_channel` may wrap each channel (e.g. with interceptors for tracing)."""

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
        wrap_channel: Callable[[grpc.Channel], grpc.Channel] | None = None,
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
        self._wrap = wrap_channel
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, Any] = {}
        self.collections = Collections(self)
        self.documents = Documents(self)
        self.webhooks = Webhooks(self)
        self.sources = Sources(self)
        self.admin = Admin(self)

    # ------------------------------------------------------------------ plumbing

    @property
    def ingest_address(self) -> str:
        return self.settings.ingest_address

    @property
    def search_address(self) -> str:
        return self.settings.search_address

    def _channel(self, address: str) -> grpc.Channel:
        channel = self._channels.get(address)
        if channel is None:
            with self._lock:
                channel = self._channels.get(address)
                if channel is None:
                    options = self.settings.channel_options(address)
                    tls = self.settings.tls
                    channel = (
                        grpc.secure_channel(address, tls.credentials(), options=options)
                        if tls.enabled
                        else grpc.insecure_channel(address, options=options)
                    )
                    if self._wrap is not None:
                        channel = self._wrap(channel)
                    self._channels[address] = channel
        return channel

    def _stub(self, name: str) -> Any:
        stub = self._stubs.get(name)
        if stub is None:
            if name == SEARCH:
                stub = search_service_pb2_grpc.SearchServiceStub(self._channel(self.search_address))
            elif name == "admin":
                stub = admin_service_pb2_grpc.AdminServiceStub(self._channel(self.ingest_address))
            elif name == "sources":
                stub = source_service_pb2_grpc.SourceServiceStub(self._channel(self.ingest_address))
            elif name == "webhooks":
                stub = webhook_service_pb2_grpc.WebhookServiceStub(self._channel(self.ingest_address))
            else:
                stub = document_service_pb2_grpc.DocumentServiceStub(self._channel(self.ingest_address))
            self._stubs[name] = stub
        return stub

    def _error(self, error: grpc.RpcError, service: str) -> SluiceError:
        address = self.search_address if service == SEARCH else self.ingest_address
        return from_rpc_error(error, service=service, address=address, tls=self.settings.tls.enabled)

    def _invoke(
        self,
        attempt: Callable[[float], T],
        *,
        service: str = INGEST,
        timeout: float | None = None,
        translate: Callable[[SluiceError], SluiceError] | None = None,
    ) -> T:
        """Run `attempt(seconds_left)` until it succeeds, retrying as RetryPolicy says, within the deadline."""
        policy, pacer = self.settings.policy, self.settings.pacer
        deadline = time.monotonic() + (timeout or policy.timeout)
        failures = 0
        while True:
            delay = pacer.reserve()
            if delay > 0:
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            try:
                return attempt(max(0.001, deadline - time.monotonic()))
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
            time.sleep(wait)

    def _unary(self, service: str, method: str, request: Any, *, timeout: float | None = None, admin: bool = False) -> Any:
        stub_name = "admin" if admin else service
        call = getattr(self._stub(stub_name), method)
        metadata = self.settings.admin_metadata if admin else self.settings.metadata
        return self._invoke(
            lambda seconds: call(request, timeout=seconds, metadata=metadata),
            service=INGEST if service in ("admin", "webhooks", "sources") else service,
            timeout=timeout,
        )

    # ------------------------------------------------------------------ search

    def search(
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
        """The chunks of READY documents that best match `query`, best first.

        `mode`: "hybrid" (the default for text), "vector" or "keyword". `filter`: metadata that
        must be equal; `where`: typed conditions ("year>=2024", "lang in en,de"; filters.py);
        `neighbors`: join N chunks around each hit into `hit.context`; `rerank=False`: skip the
        collection's reranker. `consistency_token`: a Document's `consistency_token`; a search
        served by a replica then sees at least what that answer showed (it waits for the replica,
        within `timeout`; docs/scaling.md#read-replicas-and-the-consistency-token).
        `explain`: each hit's `explanation` says why it ranked there (keyword and vector scores and
        ranks, the fused parts, the reranker's score); it changes no hit and no order.
        `generation`: search this index generation (the BUILDING one of a reindex, to compare it)
        instead of the ACTIVE one."""
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
        return SearchResults(self._unary(SEARCH, "Search", request, timeout=timeout))

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Close the connections; calls still running end with CANCELLED."""
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
            self._stubs.clear()
        for channel in channels:
            channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.ingest_address!r}, search_address={self.search_address!r})"


# ---------------------------------------------------------------------- collections


class Collections:
    """Create, read, list, reindex, delete and watch collections."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(
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
        """A new collection; its embedder is fixed at creation (change it later with `reindex`).
        `embedder`: "local" (offline, the default), "hashing" (tests) or "openai"; model and
        dimensions default to the server's. `vector_precision`: "float4" (the default), "halfvec"
        or "binary", its vector index's (docs/search.md, "Vector precision"). AlreadyExists when
        the name is taken, unless `exist_ok` (then the existing collection, whatever its settings)."""
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
            return Collection.from_proto(self._client._unary(INGEST, "CreateCollection", request, timeout=timeout))
        except AlreadyExists:
            if not exist_ok:
                raise
            return self.get(name, timeout=timeout)

    def get(self, name: str, *, timeout: float | None = None) -> Collection:
        request = document_service_pb2.GetCollectionRequest(name=name)
        return Collection.from_proto(self._client._unary(INGEST, "GetCollection", request, timeout=timeout))

    def list(self, *, page_size: int = _core.PAGE_SIZE) -> Iterator[Collection]:
        """Every collection, in name order, fetched a page at a time as you iterate."""
        token = ""
        while True:
            page = self._client._unary(
                INGEST, "ListCollections", document_service_pb2.ListCollectionsRequest(page_size=page_size, page_token=token)
            )
            for collection in page.collections:
                yield Collection.from_proto(collection)
            token = page.next_page_token
            if not token:
                return

    def delete(self, name: str, *, force: bool = False, timeout: float | None = None) -> int:
        """Delete a collection (with `force`, also its documents); returns the documents deleted."""
        request = document_service_pb2.DeleteCollectionRequest(name=name, force=force)
        return int(self._client._unary(INGEST, "DeleteCollection", request, timeout=timeout).deleted_documents)

    def reindex(
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
        """Start building a new index generation with another embedder (search keeps answering
        from the current one until the switch); `get(name).generations` shows its progress.

        With `eval_queries` ({"query": ..., "relevant": [...], "id": ...} each, as in a query
        set file) the new generation switches only if search measures its MRR@10 at least
        `min_ratio` (default 1.0) times the current one's; otherwise it is cancelled and its
        `evaluation` says both scores (docs/search.md, "Reindexing with a quality gate")."""
        request = _core.reindex_collection_request(name, embedder, model, dimensions, eval_queries, min_ratio)
        return Collection.from_proto(self._client._unary(INGEST, "ReindexCollection", request, timeout=timeout))

    def cancel_reindex(self, name: str, *, timeout: float | None = None) -> Collection:
        request = document_service_pb2.CancelReindexRequest(name=name)
        return Collection.from_proto(self._client._unary(INGEST, "CancelReindex", request, timeout=timeout))

    def export_collection(
        self, name: str, path_or_file: bundles.BundleFile, *, timeout: float | None = None
    ) -> bundles.ExportedBundle:
        """The collection as a bundle (docs/bundles.md), streamed to a path or a binary file object a
        piece at a time and checked against the trailer's size and SHA-256 (DownloadError
        SIZE_MISMATCH / CHECKSUM_MISMATCH otherwise). A path is written beside itself and renamed
        into place only then. FailedPrecondition (REINDEX_IN_PROGRESS) during a reindex. No
        deadline without `timeout`."""
        client = self._client
        receiver = bundles.BundleReceiver(name, path_or_file)
        try:
            call = client._stub(INGEST).ExportCollection(
                document_service_pb2.ExportCollectionRequest(name=name), timeout=timeout, metadata=client.settings.metadata
            )
            try:
                for message in call:
                    receiver.take(message)
            except grpc.RpcError as rpc_error:
                raise client._error(rpc_error, INGEST) from None
            return receiver.finish()
        except BaseException:
            receiver.discard()
            raise

    def import_collection(
        self, path_or_file: bundles.BundleFile, as_name: str, reembed: bool = False, *, timeout: float | None = None
    ) -> Collection:
        """A bundle (a path or a binary file object) imported as the collection `as_name` in the
        caller's tenant, streamed a piece at a time; nothing is stored unless the whole bundle
        arrived and checks out (docs/bundles.md, "Import"). `reembed`: let the workers embed every
        document again with this deployment's embedder instead of keeping the bundle's vectors
        (FailedPrecondition EMBEDDER_MISMATCH otherwise when they differ). No deadline without `timeout`."""
        client = self._client
        with bundles.opened(path_or_file) as file:
            try:
                created = client._stub(INGEST).ImportCollection(
                    bundles.import_messages(file, as_name, reembed), timeout=timeout, metadata=client.settings.metadata
                )
            except grpc.RpcError as rpc_error:
                raise client._error(rpc_error, INGEST) from None
        return Collection.from_proto(created)

    def watch(
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
    ) -> CollectionWatch:
        """Every document event of the collection, as an iterator that resumes by itself.

        It starts now (or after `cursor`, or with the oldest retained event); when the
        connection drops it reconnects after the last cursor received, so nothing is missed or
        seen twice (`on_reconnect(cursor, error)` hears of it). `.cursor` is where to resume
        later; `.close()` ends it. `source_runs="included"` adds the events of the collection's
        sync runs (`event.source_run`: started, progress, finished; `statuses` and
        `terminal_only` do not filter them), `"only"` gives those alone."""
        return CollectionWatch(
            self._client,
            name,
            cursor=cursor,
            from_start=from_start,
            statuses=statuses,
            terminal_only=terminal_only,
            heartbeats=heartbeats,
            on_reconnect=on_reconnect,
            source_runs=source_runs,
        )


class CollectionWatch(Iterator[CollectionEvent]):
    """The iterator of `Collections.watch`."""

    def __init__(
        self,
        client: Client,
        collection: str,
        *,
        cursor: str,
        from_start: bool,
        statuses: Iterable[DocumentStatus | str],
        terminal_only: bool,
        heartbeats: bool,
        on_reconnect: Callable[[str, SluiceError], None] | None,
        source_runs: str = "none",
    ) -> None:
        self._client = client
        self._request = document_service_pb2.WatchCollectionRequest(
            collection=collection,
            after_cursor=cursor,
            start_from_oldest=from_start and not cursor,
            terminal_only=terminal_only,
            source_runs=source_run_events(source_runs),  # type: ignore[arg-type]
            statuses=[DocumentStatus.of(s).value for s in statuses],  # type: ignore[misc]
        )
        self.cursor = cursor
        self._heartbeats = heartbeats
        self._on_reconnect = on_reconnect
        self._call: Any = None
        self._closed = False
        self._events = self._run()

    def __next__(self) -> CollectionEvent:
        return next(self._events)

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()

    def __enter__(self) -> CollectionWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> Iterator[CollectionEvent]:
        client = self._client
        policy = client.settings.policy
        stub = client._stub(INGEST)
        connected = False
        failures = 0
        away_since: float | None = None
        while not self._closed:
            if self.cursor:  # every connection after a message resumes where the last one ended
                self._request.after_cursor, self._request.start_from_oldest = self.cursor, False
            time.sleep(client.settings.pacer.reserve())
            try:
                self._call = stub.WatchCollection(self._request, metadata=client.settings.metadata)
                for message in self._call:
                    connected, failures, away_since = True, 0, None
                    self.cursor = message.cursor
                    if message.type == document_service_pb2.COLLECTION_EVENT_TYPE_HEARTBEAT and not self._heartbeats:
                        continue
                    yield CollectionEvent.from_proto(message)
                if not connected:
                    raise Unavailable("ingest-api ended the stream before sending anything", reason="STREAM_ENDED")
                time.sleep(0.2)  # ended without an error (a proxy closed it): reconnect, not too fast
                continue
            except grpc.RpcError as rpc_error:
                if self._closed:
                    return
                error = client._error(rpc_error, INGEST)
            if isinstance(error, RateLimited) and error.retry_after is not None:
                client.settings.pacer.refused(error)
                time.sleep(error.retry_after)
                continue
            if not isinstance(error, Unavailable) or isinstance(error, TLSError):
                raise error from None
            away_since = away_since or time.monotonic()
            if (not connected and failures + 1 >= policy.attempts) or time.monotonic() - away_since > RECONNECT_WINDOW_SECONDS:
                raise error from None
            if connected and self._on_reconnect is not None:
                self._on_reconnect(self.cursor, error)
            time.sleep(policy.backoff(failures))
            failures += 1


# ---------------------------------------------------------------------- documents


@dataclass
class UploadResult:
    """One source of `upload_many` / `upload_folder`: its document, or why it has none."""

    source: Any
    document: Document | None = None
    error: SluiceError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.document is not None and not self.document.failed


class Documents:
    """Upload, read, list, retry, delete and follow documents."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def upload(
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
        """Upload a file (path, bytes or binary file object) into a collection; returns the
        document, PENDING (or the existing one, when the collection already holds these bytes).

        The size and SHA-256 go first and the trailer last, so the server stores the bytes only
        if they arrived whole; `request_id` (by default stable for collection, file and
        content) makes a retried upload return the same document, never a second one.
        `typed_metadata` values keep their Python type (numbers, booleans, datetimes, lists).
        `priority` is "interactive" (the server's default) or "bulk": bulk work waits behind the
        collection's interactive uploads (docs/tenancy.md, "Priorities"); sync_folder sends bulk."""
        prepared = uploads.prepare(source, filename)
        client = self._client
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
        metadata_ = client.settings.metadata

        def translate(error: SluiceError) -> SluiceError:
            if prepared.read_failure:  # our side failed: nothing was stored, and a retry would fail the same way
                return UploadSourceError(prepared.read_failure[0], reason="SOURCE_CHANGED")
            return error

        response = client._invoke(
            lambda seconds: call(prepared.messages(message), timeout=seconds, metadata=metadata_),
            timeout=timeout or max(60.0, prepared.size / (1024 * 1024)),
            translate=translate,
        )
        return Document.from_proto(response)

    def upload_many(
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
    ) -> Generator[UploadResult, None, None]:
        """Upload sources `concurrency` at a time; yields each result as it finishes (not in order).
        A source that fails is a result with `error`; the others go on. Close the generator to
        stop early: the uploads not yet started are cancelled. `source_uri_of(source)` names each
        upload's document in its source (a new version when its content changed)."""
        sources = list(sources)
        if not sources:
            return

        def one(source: Any) -> UploadResult:
            if on_start is not None:
                on_start(source)
            try:
                return UploadResult(
                    source,
                    self.upload(
                        collection,
                        source,
                        metadata=metadata,
                        typed_metadata=typed_metadata,
                        source_uri=source_uri_of(source) if source_uri_of else None,
                        priority=priority,
                    ),
                )
            except SluiceError as error:
                return UploadResult(source, error=error)

        pool = ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(sources))), thread_name_prefix="sluice-upload")
        try:
            futures = [pool.submit(one, source) for source in sources]
            for future in as_completed(futures):
                yield future.result()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def upload_folder(
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
        """Upload files and folders (recursively, hidden files skipped), `concurrency` at a time,
        and with `wait` follow every document to READY or FAILED through one watch of the
        collection (not one per file). Results are in file order; after `timeout` seconds the
        documents still processing are returned as they are (check `.document.done`)."""
        files = uploads.find_files(list(paths))
        results: dict[Any, UploadResult] = {}
        tracker = self.tracker(collection, on_change=on_change) if wait else None
        try:
            if tracker is not None:
                tracker.start()
            for result in self.upload_many(
                collection, files, concurrency=concurrency, metadata=metadata, typed_metadata=typed_metadata
            ):
                results[result.source] = result
                if tracker is not None and result.document is not None:
                    result.document = tracker.track(result.document)
            if tracker is not None:
                from .errors import WaitTimeout

                try:
                    final = {d.id: d for d in tracker.wait(timeout)}
                except WaitTimeout as error:
                    final = {d.id: d for d in error.documents}
                for result in results.values():
                    if result.document is not None:
                        result.document = final.get(result.document.id, result.document)
        finally:
            if tracker is not None:
                tracker.close()
        return [results[f] for f in files]

    def sync_folder(  # noqa: C901 (one pass: plan, guard, upload, wait, delete; each step short)
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
        """Bring a collection up to date with a local folder, once (sync.py): each file's
        source_uri is its path relative to the folder; a file whose SHA-256 is its source's newest
        live version is unchanged and not sent; new and changed files are uploaded `concurrency`
        at a time (a changed one becomes a new version, swapped in at READY) and, with `wait`,
        followed to READY or FAILED; then, with `delete`, the collection's sources that have no
        file any more are deleted (every version). Documents without a source_uri are never
        touched. MassDeleteRefused, before anything is sent, when that would delete more than
        `max_delete_share` of the collection's sources, unless `allow_mass_delete`. Hidden files
        are skipped unless `include_hidden`. The hooks hear of the plan, of each upload as it
        starts and ends, and of each change of an uploaded document (from other threads)."""
        folder = Path(folder)
        files = sync.folder_files(folder, include_hidden=include_hidden)
        listed = builtins.list(self.list(collection))
        with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="sluice-hash") as pool:
            hashes = {uri: (sha256, error) for uri, sha256, error in pool.map(sync.hash_file, files.keys(), files.values())}
        plan = sync.plan(files, hashes, listed)
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
                tracker.start()  # before the first upload, so that no event is missed
            results = self.upload_many(
                collection,
                builtins.list(by_path),
                concurrency=concurrency,
                on_start=on_start,
                source_uri_of=lambda path: by_path[path].source_uri,
                priority="bulk",  # a sync is bulk work (docs/tenancy.md, "Priorities")
            )
            try:
                for result in results:
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
            finally:
                results.close()
            if tracker is not None:
                try:
                    final = tracker.wait(timeout)
                except WaitTimeout as error:
                    final = error.documents
                for document in final:
                    if document.id in uploaded:
                        uploaded[document.id] = (uploaded[document.id][0], document)
        finally:
            if tracker is not None:
                tracker.close()
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
            self._delete_sources(collection, plan.gone, report, concurrency)
        else:
            report.kept = plan.gone
        return report

    def _delete_sources(
        self, collection: str, source_uris: builtins.list[str], report: sync.SyncReport, concurrency: int
    ) -> None:
        """Delete every version of each source; one already gone counts as deleted."""

        def one(source_uri: str) -> tuple[str, SluiceError | None]:
            try:
                self.delete(collection=collection, source_uri=source_uri)
            except NotFound:
                pass
            except SluiceError as error:
                return source_uri, error
            return source_uri, None

        with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="sluice-delete") as pool:
            for source_uri, error in pool.map(one, source_uris):
                if error is None:
                    report.deleted.append(source_uri)
                else:
                    report.failed.append(sync.SyncFailure(source_uri, f"could not delete it: {error.message}"))

    def get(
        self,
        document_id: str | None = None,
        *,
        collection: str | None = None,
        source_uri: str | None = None,
        timeout: float | None = None,
    ) -> Document:
        """One document, with its attempt history; by collection and source_uri, the source's
        current version (its `raw.versions` shows the pending or failed one and the history)."""
        request = document_service_pb2.GetDocumentRequest(**_core.document_key(document_id, collection, source_uri))
        return Document.from_proto(self._client._unary(INGEST, "GetDocument", request, timeout=timeout))

    def list(
        self,
        collection: str | None = None,
        *,
        status: DocumentStatus | str | None = None,
        page_size: int = _core.PAGE_SIZE,
        limit: int | None = None,
        source_uri: str | None = None,
    ) -> Iterator[Document]:
        """Documents, newest first, optionally of one collection and status; fetched a page at a
        time as you iterate, at most `limit`."""
        token, count = "", 0
        while True:
            size = page_size if not limit else min(page_size, limit - count)
            page = self._client._unary(
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

    def delete(
        self,
        document_id: str | None = None,
        *,
        collection: str | None = None,
        source_uri: str | None = None,
        timeout: float | None = None,
    ) -> bool:
        """Delete a document, its content and chunks (by collection and source_uri: every version of
        the source); True when a running job was cancelled."""
        request = document_service_pb2.DeleteDocumentRequest(**_core.document_key(document_id, collection, source_uri))
        return bool(self._client._unary(INGEST, "DeleteDocument", request, timeout=timeout).cancelled_running_job)

    def retry(self, document_id: str, *, timeout: float | None = None) -> Document:
        """Process a FAILED document again (PENDING, with fresh attempts)."""
        request = document_service_pb2.RetryDocumentRequest(id=document_id)
        return Document.from_proto(self._client._unary(INGEST, "RetryDocument", request, timeout=timeout))

    def reprocess(self, document_id: str, *, timeout: float | None = None) -> Document:
        """Process a READY document again; it leaves search until READY again."""
        request = document_service_pb2.ReprocessDocumentRequest(id=document_id)
        return Document.from_proto(self._client._unary(INGEST, "ReprocessDocument", request, timeout=timeout))

    # -------------------------------------------------------------- chunks (docs/clients.md#chunks-and-the-original-file)

    def list_chunks(
        self,
        document_id: str,
        *,
        page_size: int = 100,
        page_token: str = "",
        generation: int = 0,
        timeout: float | None = None,
    ) -> ChunkPage:
        """One page of a document's chunks in chunk_index order (`page_size` 1 to 1,000), as the
        ACTIVE index generation holds them, or `generation` (the BUILDING one of a reindex). Pass
        the page's `next_page_token` for the next; a document that is not READY has none."""
        request = document_service_pb2.ListChunksRequest(
            document_id=document_id, page_size=page_size, page_token=page_token, generation=generation
        )
        return ChunkPage.from_proto(self._client._unary(INGEST, "ListChunks", request, timeout=timeout))

    def iter_chunks(self, document_id: str, *, generation: int = 0, page_size: int = _core.PAGE_SIZE) -> Iterator[Chunk]:
        """Every chunk of a document in chunk_index order, fetched a page at a time as you iterate."""
        token = ""
        while True:
            page = self.list_chunks(document_id, page_size=page_size, page_token=token, generation=generation)
            yield from page.chunks
            token = page.next_page_token
            if not token:
                return

    def disable_chunk(self, chunk_id: str, *, etag: str | None = None, timeout: float | None = None) -> Chunk:
        """Take a chunk out of search (in every generation that holds it) from this call's commit;
        nothing is re-embedded. `etag` (a Chunk's): refused with Aborted (CHUNK_CHANGED) when the
        chunk changed since it was read."""
        return self._update_chunk(_core.update_chunk_request(chunk_id, enabled=False, etag=etag), timeout)

    def enable_chunk(self, chunk_id: str, *, etag: str | None = None, timeout: float | None = None) -> Chunk:
        """Put a disabled chunk back into search (see disable_chunk)."""
        return self._update_chunk(_core.update_chunk_request(chunk_id, enabled=True, etag=etag), timeout)

    def edit_chunk(self, chunk_id: str, text: str, *, etag: str | None = None, timeout: float | None = None) -> Chunk:
        """Replace a chunk's text: its vector (embedded again, this chunk alone) and keyword terms
        change with it in one transaction; `original_text` keeps the parser's. InvalidArgument for
        empty or over-long text (over 100,000 characters); Aborted (CHUNK_CHANGED) on a stale `etag`."""
        return self._update_chunk(_core.update_chunk_request(chunk_id, text=text, etag=etag), timeout)

    def _update_chunk(self, request: document_service_pb2.UpdateChunkRequest, timeout: float | None) -> Chunk:
        return Chunk.from_proto(self._client._unary(INGEST, "UpdateChunk", request, timeout=timeout))

    # -------------------------------------------------------------- the original bytes

    @overload
    def download(self, document_id: str, destination: None = None, *, timeout: float | None = None) -> bytes: ...

    @overload
    def download(
        self, document_id: str, destination: str | os.PathLike[str] | IO[bytes], *, timeout: float | None = None
    ) -> DownloadedDocument: ...

    def download(
        self, document_id: str, destination: downloads.Destination = None, *, timeout: float | None = None
    ) -> bytes | DownloadedDocument:
        """A document's original bytes, streamed: returned without a `destination`; else written to
        a path (a folder: the document's file name in it), or to a binary file object, and
        described (`DownloadedDocument`: file name, media type, size, SHA-256, path).

        What arrives is counted and hashed and must be what the header announced, or DownloadError
        (SIZE_MISMATCH, CHECKSUM_MISMATCH); a path is written beside itself and renamed into place
        only then, so a failed download leaves no partial file. A dropped connection starts the
        download again (a file object: when nothing was written yet or it can seek back). Without
        `timeout`, the header must come within the client's timeout and the bytes within 60 s and
        a second per MiB after it."""
        client = self._client
        policy = client.settings.policy
        stub = client._stub(INGEST)
        request = document_service_pb2.DownloadDocumentRequest(id=document_id)
        sink = downloads.sink_for(destination)
        deadline = time.monotonic() + timeout if timeout else None
        failures = 0
        try:
            while True:
                time.sleep(client.settings.pacer.reserve())
                receiver = downloads.Receiver(document_id, sink)
                try:
                    self._receive(stub, request, receiver, deadline)
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
                time.sleep(wait)
        except BaseException:
            sink.discard()
            raise

    def _receive(self, stub: Any, request: Any, receiver: downloads.Receiver, deadline: float | None) -> None:
        """One attempt: every message of the stream into `receiver`. With a deadline, gRPC's; without
        one, a timer that cancels the call when the header or the bytes are late (see download)."""
        client = self._client
        remaining = None if deadline is None else max(0.001, deadline - time.monotonic())
        call = stub.DownloadDocument(request, timeout=remaining, metadata=client.settings.metadata)
        late = threading.Event()

        def expire() -> None:
            late.set()
            call.cancel()

        timer = None if deadline is not None else threading.Timer(client.settings.policy.timeout, expire)
        try:
            if timer is not None:
                timer.daemon = True
                timer.start()
            for message in call:
                had_header = receiver.header is not None
                receiver.take(message)
                if timer is not None and not had_header and receiver.header is not None:
                    timer.cancel()
                    timer = threading.Timer(downloads.transfer_seconds(receiver.header.size_bytes), expire)
                    timer.daemon = True
                    timer.start()
        except grpc.RpcError:
            if late.is_set():
                raise DeadlineExceeded(
                    f"ingest-api at {client.ingest_address} did not send {request.id} in time",
                    reason="DEADLINE_EXCEEDED",
                    service=INGEST,
                    address=client.ingest_address,
                ) from None
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def watch(self, document_id: str, *, timeout: float | None = None) -> Iterator[Document]:
        """The document now, then each change, until READY or FAILED (pushed by the server).
        A dropped connection is reopened and the watch goes on; after `timeout` seconds,
        WaitTimeout (its `documents` hold the last state)."""
        client = self._client
        policy = client.settings.policy
        stub = client._stub(INGEST)
        deadline = time.monotonic() + timeout if timeout else None
        last: Document | None = None
        failures = 0
        while last is None or not last.done:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise _core.timeout_error([last] if last else [_unknown(document_id)]) from None
            time.sleep(client.settings.pacer.reserve())
            try:
                for event in stub.WatchDocument(
                    document_service_pb2.WatchDocumentRequest(id=document_id),
                    timeout=remaining,
                    metadata=client.settings.metadata,
                ):
                    failures = 0
                    state = Document.from_proto(event.document)
                    if last is None or state.raw != last.raw:
                        last = state
                        yield state
                    if state.done:
                        return
                time.sleep(0.2)  # ended before READY or FAILED (a proxy closed it): reconnect, not in a busy loop
                continue
            except grpc.RpcError as rpc_error:
                if rpc_error.code() == grpc.StatusCode.DEADLINE_EXCEEDED and deadline is not None:
                    continue  # the loop reports the timeout
                error = client._error(rpc_error, INGEST)
            wait = policy.next_wait(error, failures, (deadline - time.monotonic()) if deadline else RECONNECT_WINDOW_SECONDS)
            if wait is None:
                raise error from None
            if isinstance(error, RateLimited):
                client.settings.pacer.refused(error)
            else:
                failures += 1
            time.sleep(wait)

    def wait(
        self, document_id: str, *, timeout: float | None = None, on_change: Callable[[Document], None] | None = None
    ) -> Document:
        """The document once READY or FAILED (WaitTimeout after `timeout` seconds)."""
        last = None
        for state in self.watch(document_id, timeout=timeout):
            last = state
            if on_change is not None:
                on_change(state)
        assert last is not None
        return last

    def wait_all(
        self,
        documents: Iterable[Document | str],
        *,
        timeout: float | None = None,
        on_change: Callable[[Document], None] | None = None,
    ) -> builtins.list[Document]:
        """Many documents (Documents, or ids: each read once) once each is READY or FAILED, in
        the order given, followed through one watch per collection rather than one per document;
        WaitTimeout after `timeout` seconds (its `documents` hold every state then). Once each
        watch is open, the documents still processing are read once (DocumentTracker.refresh):
        one that finished before it opened returns at once, its events are not replayed."""
        known = [self.get(d) if isinstance(d, str) else d for d in documents]
        by_collection: dict[str, list[Document]] = {}
        for document in known:
            by_collection.setdefault(document.collection, []).append(document)
        deadline = time.monotonic() + timeout if timeout else None
        final: dict[str, Document] = {}
        trackers: list[DocumentTracker] = []
        try:
            for collection, members in by_collection.items():  # every watch open before any wait
                if all(d.done for d in members):
                    final.update((d.id, d) for d in members)
                    continue
                tracker = self.tracker(collection, on_change=on_change)
                trackers.append(tracker)
                tracker.start()
                for document in members:
                    tracker.track(document)
                tracker.refresh()
            for tracker in trackers:
                # Never 0: a tracker reads a timeout of 0 as none.
                remaining = None if deadline is None else max(0.001, deadline - time.monotonic())
                try:
                    final.update((d.id, d) for d in tracker.wait(remaining))
                except WaitTimeout:
                    for other in trackers:
                        final.update((d.id, d) for d in other.documents)
                    raise _core.timeout_error([final.get(d.id, d) for d in known]) from None
        finally:
            for tracker in trackers:
                tracker.close()
        return [final.get(d.id, d) for d in known]

    def tracker(self, collection: str, *, on_change: Callable[[Document], None] | None = None) -> DocumentTracker:
        """A follower of many documents of one collection through one WatchCollection stream
        (see DocumentTracker); use it as a context manager."""
        return DocumentTracker(self._client, collection, on_change=on_change)


def _unknown(document_id: str) -> Document:
    from .protos import document_pb2

    return Document.from_proto(document_pb2.Document(id=document_id))


class DocumentTracker:
    """Follows many documents of one collection to READY or FAILED through one WatchCollection
    stream, so a bulk job costs one call however many documents it waits for.

    Open it (`start()`, or `with`) before uploading, so that no event is missed; `track()` each
    uploaded document; `wait()` returns them once every one is READY or FAILED. The stream
    resumes after its last cursor when the connection drops; when the server no longer holds
    that cursor, or nothing has moved for a while, a listing of the collection (one call per
    1,000 documents) brings every state up to date. `on_change(document)` hears of every change
    of a tracked document (from the tracker's thread)."""

    QUIET_RELIST_SECONDS = 60.0
    # refresh(): up to this many documents are read one GetDocument each (REFRESH_CONCURRENCY at
    # a time), more by one listing of the collection (a call per 1,000), as the TypeScript SDK does.
    REFRESH_BY_GET = 100
    REFRESH_CONCURRENCY = 8

    def __init__(self, client: Client, collection: str, *, on_change: Callable[[Document], None] | None = None) -> None:
        self._client = client
        self.collection = collection
        self._on_change = on_change
        self._state = _core.TrackedDocuments()
        self._lock = threading.Condition()
        self._opened = threading.Event()
        self._stopping = threading.Event()
        self._error: SluiceError | None = None
        self._call: Any = None
        self._thread: threading.Thread | None = None
        self._needs_relist = False
        self._last_change = time.monotonic()

    def start(self) -> DocumentTracker:
        """Open the stream; returns once the server has confirmed where it starts."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._follow, name="sluice-tracker", daemon=True)
            self._thread.start()
        while not self._opened.wait(0.1):
            if self._error is not None:
                raise self._error
        return self

    def track(self, document: Document) -> Document:
        """Follow this document too; returns its newest known state."""
        with self._lock:
            state = self._state.track(document)
            self._lock.notify_all()
        return state

    @property
    def documents(self) -> builtins.list[Document]:
        with self._lock:
            return list(self._state.documents.values())

    def refresh(self) -> None:
        """Read each tracked document still processing once, for what changed before the stream
        opened (its events are not replayed): up to REFRESH_BY_GET by GetDocument, more by one
        listing of the collection. One that is gone ends as deleted."""
        with self._lock:
            pending = self._state.pending()
        if len(pending) > self.REFRESH_BY_GET:
            self._relist()
            return

        def read(document: Document) -> tuple[Document, Document | None]:
            try:
                return document, self._client.documents.get(document.id)
            except NotFound:
                return document, None

        with ThreadPoolExecutor(
            max_workers=max(1, min(self.REFRESH_CONCURRENCY, len(pending))), thread_name_prefix="sluice-refresh"
        ) as pool:
            for document, fresh in pool.map(read, pending):
                with self._lock:
                    state = self._state.remove(document) if fresh is None else self._state.apply(fresh)
                    self._changed([state] if state else [])
                if state is not None:
                    self._notify([state])

    def wait(self, timeout: float | None = None) -> builtins.list[Document]:
        """Every tracked document once READY or FAILED, in the order they were tracked.
        WaitTimeout after `timeout` seconds (with their states then); the stream's error if it failed for good."""
        deadline = time.monotonic() + timeout if timeout else None
        with self._lock:
            while not self._state.all_done:
                if self._error is not None:
                    raise self._error
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise _core.timeout_error(list(self._state.documents.values()))
                quiet = time.monotonic() - self._last_change
                if self._needs_relist or quiet > self.QUIET_RELIST_SECONDS:
                    self._needs_relist = False
                    self._last_change = time.monotonic()
                    self._lock.release()
                    try:
                        self._relist()
                    finally:
                        self._lock.acquire()
                    continue
                self._lock.wait(min(1.0, remaining) if remaining is not None else 1.0)
            return list(self._state.documents.values())

    def close(self) -> None:
        self._stopping.set()
        if self._call is not None:
            self._call.cancel()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> DocumentTracker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ inside

    def _changed(self, states: list[Document]) -> None:
        if states:
            self._last_change = time.monotonic()
            self._lock.notify_all()

    def _relist(self) -> None:
        """Bring every tracked state up to date from a listing of the collection."""
        changed = []
        for document in self._client.documents.list(self.collection):
            with self._lock:
                state = self._state.apply(document)
                if state is not None:
                    changed.append(state)
                    self._changed([state])
        self._notify(changed)

    def _notify(self, states: list[Document]) -> None:
        if self._on_change is not None:
            for state in states:
                self._on_change(state)

    def _follow(self) -> None:
        client = self._client
        policy = client.settings.policy
        stub = client._stub(INGEST)
        cursor = ""
        failures = 0
        away_since: float | None = None
        while not self._stopping.is_set():
            request = document_service_pb2.WatchCollectionRequest(collection=self.collection, after_cursor=cursor)
            time.sleep(client.settings.pacer.reserve())
            try:
                self._call = stub.WatchCollection(request, metadata=client.settings.metadata)
                for event in self._call:
                    failures, away_since = 0, None
                    cursor = event.cursor
                    self._opened.set()
                    if event.type == document_service_pb2.COLLECTION_EVENT_TYPE_HEARTBEAT:
                        continue
                    document = Document.from_proto(event.document)
                    with self._lock:
                        if event.type == document_service_pb2.COLLECTION_EVENT_TYPE_DELETED:
                            state = self._state.remove(document)
                        else:
                            state = self._state.apply(document)
                        self._changed([state] if state else [])
                    if state is not None:
                        self._notify([state])
                time.sleep(0.2)  # ended without an error (a proxy closed it): reconnect after the cursor
                continue
            except grpc.RpcError as rpc_error:
                if self._stopping.is_set():
                    return
                error = client._error(rpc_error, INGEST)
            if isinstance(error, OutOfRange):  # the cursor is older than the retained events: start over, relist
                cursor = ""
                with self._lock:
                    self._needs_relist = True
                    self._lock.notify_all()
                continue
            if isinstance(error, RateLimited) and error.retry_after is not None:
                client.settings.pacer.refused(error)
                time.sleep(error.retry_after)
                continue
            away_since = away_since or time.monotonic()
            opened = self._opened.is_set()
            if (
                not isinstance(error, Unavailable)
                or isinstance(error, TLSError)
                or (not opened and failures + 1 >= policy.attempts)
                or time.monotonic() - away_since > RECONNECT_WINDOW_SECONDS
            ):
                with self._lock:
                    self._error = error
                    self._lock.notify_all()
                return
            time.sleep(policy.backoff(failures))
            failures += 1


# ---------------------------------------------------------------------- webhooks and administration


class Webhooks:
    """Signed POSTs of a collection's document events to a URL (docs/webhooks.md)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def _call(self, method: str, request: Any) -> Any:
        return self._client._unary("webhooks", method, request)

    def create(self, collection: str, url: str, *, event_types: Iterable[str] = (), description: str = "") -> NewWebhook:
        """Subscribe `url` to the collection's events (all, or `event_types` such as "document.ready");
        the signing secret is returned this once."""
        unknown = [t for t in event_types if t not in WEBHOOK_EVENT_TYPES]
        if unknown:
            raise ValueError(f"unknown event type {unknown[0]!r}; choose from {', '.join(WEBHOOK_EVENT_TYPES)}")
        webhook = webhook_service_pb2.Webhook(
            collection=collection, url=url, description=description, event_types=[WEBHOOK_EVENT_TYPES[t] for t in event_types]
        )
        response = self._call("CreateWebhook", webhook_service_pb2.CreateWebhookRequest(webhook=webhook))
        return NewWebhook(Webhook.from_proto(response.webhook), response.secret)

    def get(self, webhook_id: str) -> Webhook:
        return Webhook.from_proto(self._call("GetWebhook", webhook_service_pb2.GetWebhookRequest(id=webhook_id)))

    def list(self, collection: str | None = None) -> Iterator[Webhook]:
        token = ""
        while True:
            page = self._call(
                "ListWebhooks",
                webhook_service_pb2.ListWebhooksRequest(collection=collection or "", page_size=200, page_token=token),
            )
            yield from (Webhook.from_proto(w) for w in page.webhooks)
            token = page.next_page_token
            if not token:
                return

    def delete(self, webhook_id: str) -> int:
        """Delete a webhook; returns the pending deliveries dropped with it."""
        reply = self._call("DeleteWebhook", webhook_service_pb2.DeleteWebhookRequest(id=webhook_id))
        return int(reply.dropped_pending_deliveries)

    def rotate_secret(self, webhook_id: str) -> NewWebhook:
        response = self._call("RotateWebhookSecret", webhook_service_pb2.RotateWebhookSecretRequest(id=webhook_id))
        return NewWebhook(Webhook.from_proto(response.webhook), response.secret)

    def deliveries(self, webhook_id: str, *, failed: bool = False, limit: int = 50) -> builtins.list[WebhookDelivery]:
        """A webhook's deliveries, newest first (with `failed`, only those given up)."""
        state = (
            webhook_service_pb2.WEBHOOK_DELIVERY_STATE_FAILED
            if failed
            else webhook_service_pb2.WEBHOOK_DELIVERY_STATE_UNSPECIFIED
        )
        rows: list[WebhookDelivery] = []
        token = ""
        while len(rows) < limit:
            page = self._call(
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


class Admin:
    """Tenants and API keys (an admin key: the credentials file's, or `api_key`)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def _call(self, method: str, request: Any) -> Any:
        return self._client._unary("admin", method, request, admin=True)

    def create_tenant(self, name: str, *, max_documents: int = 0, max_stored_bytes: int = 0, max_collections: int = 0) -> Tenant:
        """A tenant with quotas (0 = unlimited)."""
        quota = admin_service_pb2.TenantQuota(
            max_documents=max_documents, max_stored_bytes=max_stored_bytes, max_collections=max_collections
        )
        tenant = admin_service_pb2.Tenant(name=name, quota=quota)
        return Tenant.from_proto(self._call("CreateTenant", admin_service_pb2.CreateTenantRequest(tenant=tenant)))

    def list_tenants(self) -> list[Tenant]:
        return [Tenant.from_proto(t) for t in self._call("ListTenants", admin_service_pb2.ListTenantsRequest()).tenants]

    def create_key(self, tenant: str, role: str, *, name: str = "", collections: Sequence[str] = ()) -> NewApiKey:
        """A key of `tenant` with `role` (admin, client, reader, worker), limited to `collections`
        when some are given (client and reader keys only); its secret is returned this once."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; choose from {', '.join(ROLES)}")
        response = self._call(
            "CreateApiKey",
            admin_service_pb2.CreateApiKeyRequest(tenant=tenant, role=ROLES[role], name=name, collections=list(collections)),
        )
        return NewApiKey(ApiKey.from_proto(response.api_key), response.secret)

    def list_keys(self, tenant: str = "") -> list[ApiKey]:
        return [
            ApiKey.from_proto(k) for k in self._call("ListApiKeys", admin_service_pb2.ListApiKeysRequest(tenant=tenant)).api_keys
        ]

    def revoke_key(self, key: str) -> ApiKey:
        """Revoke a key by id or prefix (slk_<id>_): refused by every process within a second."""
        return ApiKey.from_proto(self._call("RevokeApiKey", admin_service_pb2.RevokeApiKeyRequest(id=key)))


__all__ = ["Admin", "Client", "CollectionWatch", "Collections", "DocumentTracker", "Documents", "UploadResult", "Webhooks"]
