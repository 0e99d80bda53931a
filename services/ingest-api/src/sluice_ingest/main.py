"""Composition root of ingest-api: settings → pool, notifications, the stores (one per area, over
the one pool), the use cases, the gRPC servicers and server."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool
from sluice.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    document_service_pb2,
    document_service_pb2_grpc,
    job_service_pb2,
    job_service_pb2_grpc,
    source_service_pb2,
    source_service_pb2_grpc,
    webhook_service_pb2,
    webhook_service_pb2_grpc,
)
from sluice_common import gctune
from sluice_common.auth import AuthInterceptor, KeyDirectory, RateLimiter
from sluice_common.db import open_pool
from sluice_common.logs import configure_logging
from sluice_common.metrics import start_metrics_server
from sluice_common.serving import create_server, run_until_signal, set_serving
from sluice_common.tasks import end_if_cancelled, pause
from sluice_common.tracing import configure_tracing

from . import metrics
from .api import AdminServicer, DocumentServicer, JobServicer
from .bundle_spool import sweep_stale
from .notify import NotificationHub
from .retention import EventRetention
from .service import AdminUseCases, ChunkUseCases, CollectionUseCases, DocumentUseCases, JobUseCases, WatchUseCases
from .service.bundles import BundleUseCases
from .settings import IngestSettings
from .sources.api import SourceServicer
from .sources.service import SourceService
from .sources.store import SourceStore
from .store import (
    ChunkStore,
    CollectionStore,
    DocumentStore,
    EventStore,
    GenerationStore,
    JobPolicy,
    QueueStore,
    RetentionStore,
    TenantStore,
)
from .store.bundles import BundleStore
from .webhooks.api import WebhookServicer
from .webhooks.dispatcher import Dispatcher
from .webhooks.service import WebhookService
from .webhooks.store import WebhookStore

log = logging.getLogger("sluice.ingest")

SERVICE_NAMES = (
    document_service_pb2.DESCRIPTOR.services_by_name["DocumentService"].full_name,
    job_service_pb2.DESCRIPTOR.services_by_name["JobService"].full_name,
    admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
    webhook_service_pb2.DESCRIPTOR.services_by_name["WebhookService"].full_name,
    source_service_pb2.DESCRIPTOR.services_by_name["SourceService"].full_name,
)


@dataclass(frozen=True)
class Stores:
    """Every store of ingest-api, each over the one pool. The queue is given the generation
    store's switch (an EMBED commit may complete a reindex); nothing else is shared."""

    collections: CollectionStore
    documents: DocumentStore
    generations: GenerationStore
    queue: QueueStore
    events: EventStore
    retention: RetentionStore
    tenants: TenantStore
    chunks: ChunkStore

    @classmethod
    def over(cls, pool: AsyncConnectionPool, policy: JobPolicy, *, inline_index_max_chunks: int = 20000) -> Stores:
        generations = GenerationStore(pool, inline_index_max_chunks=inline_index_max_chunks)
        return cls(
            collections=CollectionStore(pool),
            documents=DocumentStore(pool),
            generations=generations,
            queue=QueueStore(pool, policy, generations),
            events=EventStore(pool),
            retention=RetentionStore(pool),
            tenants=TenantStore(pool),
            chunks=ChunkStore(pool),
        )


class IngestApp:
    """ingest-api wired from settings; `start()` binds and serves, `stop()` drains."""

    def __init__(self, settings: IngestSettings) -> None:
        self.settings = settings
        self.port = 0

    async def start(self) -> None:
        s = self.settings
        self.pool = await open_pool(s.database_url, max_size=s.pool_max_size, name="ingest-api")
        self.hub = NotificationHub(s.database_url)
        # Webhook deliveries run in `sluice-webhooks` (webhooks/main.py); SLUICE_WEBHOOKS_ENABLED=true
        # also runs them here, as background tasks with their own pool (the smallest set-ups). They
        # listen on the hub's connection, so they are built before it starts.
        self.dispatcher = Dispatcher(s, self.hub) if s.webhooks_enabled else None
        await self.hub.start()
        stores = self.stores = Stores.over(
            self.pool,
            JobPolicy(s.lease_seconds, s.retry_delay_seconds, s.max_retry_delay_seconds),
            inline_index_max_chunks=s.reindex_inline_index_max_chunks,
        )
        self.store = stores.queue  # bench/ drives the queue in process through app.store
        self.keys = KeyDirectory(self.pool, cache_seconds=s.auth_cache_seconds)
        self.collections = CollectionUseCases(stores.collections, stores.generations, s)
        self.documents = DocumentUseCases(stores.documents, stores.collections, s)
        self.watches = WatchUseCases(stores.documents, stores.events, self.hub, s)
        self.jobs = JobUseCases(stores.queue, self.hub, s)
        self.admin = AdminUseCases(stores.tenants, self.keys.forget)
        self.chunks = ChunkUseCases(stores.chunks)
        self.bundles = BundleUseCases(BundleStore(self.pool), self.collections, s)
        # What killed exports and imports left behind (docs/bundles.md, "Import").
        await asyncio.to_thread(sweep_stale, self.bundles.spool, s.bundle_spool_stale_seconds)
        auth = AuthInterceptor(
            self.keys, RateLimiter(s.rate_limit_per_second, s.rate_limit_burst), reflection=s.reflection_enabled
        )
        self.server, self.health, self.port = create_server(
            SERVICE_NAMES, s.bind, interceptors=[auth], tls=s.server_tls(), allow_plaintext=s.allow_plaintext
        )
        document_service_pb2_grpc.add_DocumentServiceServicer_to_server(
            DocumentServicer(self.collections, self.documents, self.watches, self.chunks, self.bundles), self.server
        )
        job_service_pb2_grpc.add_JobServiceServicer_to_server(JobServicer(self.jobs, s.lease_seconds), self.server)
        admin_service_pb2_grpc.add_AdminServiceServicer_to_server(AdminServicer(self.admin), self.server)
        webhook_service_pb2_grpc.add_WebhookServiceServicer_to_server(
            WebhookServicer(WebhookService(WebhookStore(self.pool), s)), self.server
        )
        # Sources: managed here; their sync runs are carried out by `sluice-sources` (docs/sources.md).
        source_service_pb2_grpc.add_SourceServiceServicer_to_server(
            SourceServicer(SourceService(SourceStore(self.pool), s)), self.server
        )
        if self.dispatcher is not None:
            await self.dispatcher.start()
        self._gauges = asyncio.create_task(self._update_gauges(), name="queue-gauges")
        self.retention = EventRetention(stores.retention, s)
        self._retention = asyncio.create_task(self.retention.run(), name="event-retention")
        self._sweeper = asyncio.create_task(self._sweep_generations(), name="generation-sweeper")
        # jieba loads its dictionary on first use (~1 s): pay it now, not inside the first commit.
        from sluice_common.textsearch import search_terms

        await asyncio.to_thread(search_terms, "预热 warm-up")

    async def serve(self) -> None:
        await self.server.start()
        await set_serving(self.health, SERVICE_NAMES, True)
        log.info("ingest-api serving", extra={"port": self.port})

    async def stop(self, grace: float | None = None) -> None:
        await set_serving(self.health, SERVICE_NAMES, False)
        await self.end_streams()
        await self.server.stop(self.settings.shutdown_grace_seconds if grace is None else grace)
        await self.close()

    async def end_streams(self) -> None:
        """Shutting down: WatchCollection streams end at once with UNAVAILABLE (clients resume
        elsewhere with their cursor) instead of holding the drain until the grace runs out."""
        self.hub.end_streams()

    async def close(self) -> None:
        try:
            if self.dispatcher is not None:
                await self.dispatcher.stop()
        except Exception as exc:  # the rest must close all the same
            log.warning("webhook dispatcher did not stop cleanly", extra={"error": str(exc)})
        tasks = (self._gauges, self._retention, self._sweeper)
        for task in tasks:
            task.cancel()
        _, running = await asyncio.wait(tasks, timeout=10)
        for task in running:  # a loop that ignored its cancellation must not hold the shutdown
            log.warning("background task did not stop", extra={"task": task.get_name()})
        await self.hub.stop()
        await self.pool.close()

    async def _sweep_generations(self) -> None:
        """Index generations: switch complete ones, drop retired ones after their grace period."""
        while True:
            try:
                switched, dropped = await self.collections.sweep_generations()
                if switched or dropped:
                    log.info("generations swept", extra={"switched": switched, "dropped": dropped})
            except Exception as exc:  # the next sweep tries again
                end_if_cancelled(exc)
                log.warning("generation sweep failed", extra={"error": str(exc)})
            await pause(self.settings.generation_sweep_seconds)

    async def _update_gauges(self) -> None:
        while True:
            try:
                depth = await self.stores.queue.queue_depth()
                for status in ("PENDING", "RUNNING", "SUCCEEDED", "FAILED"):
                    metrics.QUEUE_DEPTH.labels(status=status).set(depth.get(status, 0))
            except Exception as exc:  # metrics must never take the server down
                end_if_cancelled(exc)
                log.warning("queue depth update failed", extra={"error": str(exc)})
            await pause(15)


async def serve(settings: IngestSettings) -> None:
    app = IngestApp(settings)
    await app.start()
    gctune.tune()
    log.info("ingest-api listening", extra={"bind": settings.bind, "port": app.port})
    await run_until_signal(app.server, app.health, SERVICE_NAMES, settings.shutdown_grace_seconds, on_stop=app.end_streams)
    await app.close()


def main() -> None:
    settings = IngestSettings()
    configure_logging("ingest-api", settings.log_level, settings.log_json)
    configure_tracing("ingest-api")  # OTLP export only when OTEL_EXPORTER_OTLP_ENDPOINT is set
    start_metrics_server(settings, settings.bind)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
