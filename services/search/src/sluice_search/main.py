"""Composition root: settings → read-only pool → repository → service → gRPC server."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health
from psycopg_pool import AsyncConnectionPool
from sluice.v1 import search_service_pb2, search_service_pb2_grpc
from sluice_common import gctune, serving
from sluice_common.auth import AuthInterceptor, KeyDirectory, RateLimiter
from sluice_common.embedders import get_embedder
from sluice_common.logs import configure_logging
from sluice_common.metrics import start_metrics_server
from sluice_common.reranking import RerankSettings
from sluice_common.tasks import end_if_cancelled, pause
from sluice_common.tracing import configure_tracing

from .api import SearchServicer
from .collection_cache import CollectionListener
from .consistency import GatedPool, ReplayWaiter
from .db import check_unprivileged, open_read_pool
from .domain import Limits
from .eval_gate import EvalGate
from .repository import SearchRepository
from .rerank import Rerankers
from .service import EmbedderFactory, SearchService
from .settings import SearchSettings

log = logging.getLogger("sluice.search")

SERVICE_NAMES = [search_service_pb2.DESCRIPTOR.services_by_name["SearchService"].full_name]


@dataclass
class SearchServer:
    """A wired, bound, not yet started search server; `port` is the one actually bound."""

    server: grpc.aio.Server
    health: health.aio.HealthServicer
    pool: AsyncConnectionPool
    port: int
    service: SearchService
    repository: SearchRepository
    # Drops the repository's cached collections as they change (collection_cache.py).
    listener: CollectionListener
    # The reindex quality gate (eval_gate.py); None when SLUICE_SEARCH_EVAL_GATE_ENABLED is off.
    gate: EvalGate | None = None

    async def start(self) -> None:
        await self.server.start()
        await serving.set_serving(self.health, SERVICE_NAMES, True)
        if self.gate is not None:
            self.gate.start()

    async def stop(self, grace: float | None = None) -> None:
        await serving.set_serving(self.health, SERVICE_NAMES, False)
        if self.gate is not None:
            await self.gate.stop()
        await self.server.stop(grace)
        await self.listener.stop()
        await self.service.close()
        await self.pool.close()


async def create_server(settings: SearchSettings, *, embedder_factory: EmbedderFactory = get_embedder) -> SearchServer:
    pool = await open_read_pool(
        settings.read_database_url,
        min_size=settings.search_pool_min_size,
        max_size=settings.search_pool_max_size,
        ef_search=settings.search_hnsw_ef_search,
        max_scan_tuples=settings.search_hnsw_max_scan_tuples,
        statement_timeout_ms=settings.search_statement_timeout_ms,
    )
    try:
        await check_unprivileged(pool)
    except SystemExit:
        await pool.close()
        raise
    # Each connection a search with a consistency token uses is checked against it first.
    replay = ReplayWaiter(max_wait_seconds=settings.search_consistency_max_wait_seconds)
    repository = SearchRepository(
        GatedPool(pool, replay),
        collection_cache_seconds=settings.search_collection_cache_seconds,
        exact_filter_max_chunks=settings.search_exact_filter_max_chunks,
        exact_filter_walk_cost=settings.search_exact_filter_walk_cost,
        binary_rescore_candidates=settings.search_binary_rescore_candidates,
    )
    listener = CollectionListener(repository.collections)
    if await _reads_a_standby(pool):
        # LISTEN is refused during recovery: the collection cache expires by age alone there
        # (SLUICE_SEARCH_COLLECTION_CACHE_SECONDS), and a search with a consistency token reads
        # its collection afresh (consistency.py).
        log.info("search reads a standby: no collection notifications; cached collections expire by age")
    else:
        await listener.start(settings.read_database_url)
    service = SearchService(
        repository,
        embedder_factory=embedder_factory,
        hybrid_candidates=settings.search_hybrid_candidates,
        rrf_k=settings.search_rrf_k,
        fusion_method=settings.search_fusion,
        vector_weight=settings.search_hybrid_vector_weight,
        document_weight=settings.search_hybrid_document_weight,
        document_depth=settings.search_hybrid_document_depth,
        foreign_vector_weight=settings.search_hybrid_foreign_vector_weight,
        rerankers=Rerankers(RerankSettings()),
        replay=replay,
    )
    limits = Limits(
        max_top_k=settings.search_max_top_k,
        max_query_characters=settings.search_max_query_characters,
        max_filter_keys=settings.search_max_filter_keys,
        max_filter_values=settings.search_max_filter_values,
        max_filter_depth=settings.search_max_filter_depth,
        max_filter_conditions=settings.search_max_filter_conditions,
    )
    try:
        auth = AuthInterceptor(
            KeyDirectory(pool, cache_seconds=settings.auth_cache_seconds),
            RateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst),
            reflection=settings.reflection_enabled,
        )
        server, health_servicer, port = serving.create_server(
            SERVICE_NAMES,
            settings.bind,
            interceptors=[auth],
            tls=settings.server_tls(),
            allow_plaintext=settings.allow_plaintext,
        )
    except Exception:
        await listener.stop()
        await pool.close()
        raise
    search_service_pb2_grpc.add_SearchServiceServicer_to_server(SearchServicer(service, limits), server)
    gate = None
    if settings.search_eval_gate_enabled:
        gate = EvalGate(
            service, repository, listener, settings.eval_gate_database_url, poll_seconds=settings.search_eval_gate_poll_seconds
        )
    return SearchServer(server, health_servicer, pool, port, service, repository, listener, gate)


async def _reads_a_standby(pool: AsyncConnectionPool) -> bool:
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT pg_is_in_recovery()")).fetchone()
    return row is not None and bool(row[0])


async def serve(settings: SearchSettings) -> None:
    search = await create_server(settings)
    gctune.tune()
    log.info("search serving", extra={"bind": settings.bind, "port": search.port})
    warm = asyncio.create_task(_warm_up(search.service))
    if search.gate is not None:
        search.gate.start()
    await serving.run_until_signal(
        search.server,
        search.health,
        SERVICE_NAMES,
        settings.shutdown_grace_seconds,
        on_stop=search.gate.stop if search.gate is not None else None,
    )
    warm.cancel()
    await search.listener.stop()
    await search.service.close()
    await search.pool.close()


async def _warm_up(service: SearchService, interval: float = 5.0) -> None:
    """Warm at start, then pick up the embedders of collections created since (cheap: one
    small query; a model is loaded once)."""
    while True:
        try:
            loaded = await service.warm_up()
            if loaded:
                log.info("embedders warmed up", extra={"embedders": loaded})
        except Exception as exc:  # warming is an optimisation; queries load lazily anyway
            end_if_cancelled(exc)
            log.warning("embedder warm-up failed", extra={"error": str(exc)})
        await pause(interval)


def main() -> None:
    settings = SearchSettings()
    configure_logging("search", settings.log_level, settings.log_json)
    configure_tracing("search")  # OTLP export only when OTEL_EXPORTER_OTLP_ENDPOINT is set
    start_metrics_server(settings, settings.bind)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
