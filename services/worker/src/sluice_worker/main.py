"""Composition root: settings → gRPC client, parse sandboxes, pipeline, worker loop.

Run with `sluice-worker` or `python -m sluice_worker.main`. Configuration comes from SLUICE_*
environment variables (see settings.py); SIGTERM or SIGINT stops it cleanly (exit code 0).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from sluice_common import gctune
from sluice_common.logs import configure_logging
from sluice_common.metrics import start_metrics_server
from sluice_common.tracing import configure_tracing

from sluice_worker.jobs_client import JobClient
from sluice_worker.parsing.sandbox import SandboxPool
from sluice_worker.pipeline import JobPipeline
from sluice_worker.runner import Worker
from sluice_worker.settings import WorkerSettings

log = logging.getLogger("sluice.worker")


def build_worker(settings: WorkerSettings, *, pool: SandboxPool | None = None) -> tuple[Worker, SandboxPool, JobClient]:
    client = JobClient(
        settings.ingest_address,
        api_key=settings.worker_key(),
        tls=settings.client_tls(),
        rpc_timeout=settings.rpc_timeout_seconds,
    )
    pool = pool or SandboxPool(
        settings.worker_concurrency,
        memory_limit_mb=settings.parse_memory_limit_mb,
        max_documents=settings.sandbox_max_documents,
    )
    pipeline = JobPipeline(client, pool, settings)
    return Worker(client, pipeline, settings), pool, client


async def serve(settings: WorkerSettings) -> None:
    worker, pool, client = build_worker(settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.request_stop)
    log.info(
        "worker starting",
        extra={
            "worker_id": settings.worker_id,
            "ingest_address": settings.ingest_address,
            "concurrency": settings.worker_concurrency,
        },
    )
    await pool.warm()
    gctune.tune()
    log.info("worker started: claiming jobs")
    try:
        await worker.run()
    finally:
        await pool.close()
        await client.close()
    log.info("worker stopped")


def main() -> None:
    # The local model and the parsers must never reach for the network at run time.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("UNSTRUCTURED_DISABLE_NOTICE", "1")
    settings = WorkerSettings()
    configure_logging("worker", settings.log_level, settings.log_json)
    configure_tracing("worker")  # OTLP export only when OTEL_EXPORTER_OTLP_ENDPOINT is set
    start_metrics_server(settings)  # no gRPC bind: every interface unless SLUICE_METRICS_HOST
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
