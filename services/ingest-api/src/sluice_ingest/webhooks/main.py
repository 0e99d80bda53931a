"""`sluice-webhooks`: the webhook delivery process, the dispatcher alone.

Webhook delivery used to run inside ingest-api, where it shared the event loop, the
interpreter and the CPU with the gRPC servicers, and ingestion slowed while it delivered
(bench/webhook_bench.py). This process runs only the dispatcher (dispatcher.py): its own
connection pool, its own LISTEN connection (the collections' events and subscription changes,
nothing else), and the leased subscriptions, so several replicas share the subscriptions
safely and one that dies is taken over when its leases expire. It serves grpc.health.v1 on
SLUICE_WEBHOOKS_BIND (SERVING once the dispatcher runs) and Prometheus metrics on
SLUICE_METRICS_PORT. SIGTERM or SIGINT: health goes NOT_SERVING, requests in flight are
cancelled (their deliveries stay PENDING and go again), and the leases are handed back at once.

Settings are ingest-api's (IngestSettings: SLUICE_DATABASE_URL and the SLUICE_WEBHOOK_* ones).
"""

from __future__ import annotations

import asyncio
import logging

import grpc
from grpc_health.v1 import health
from sluice_common import gctune
from sluice_common.logs import configure_logging
from sluice_common.metrics import start_metrics_server
from sluice_common.serving import create_server, run_until_signal, set_serving
from sluice_common.tracing import configure_tracing

from ..notify import NotificationHub
from ..settings import IngestSettings
from .dispatcher import Dispatcher

log = logging.getLogger("sluice.webhooks")

# Only the overall health ("") and this name; the process serves no API.
SERVICE_NAMES = ("sluice.webhooks",)


class WebhooksApp:
    """The dispatcher with its own LISTEN connection and a health server; `start()`, then
    `serve()`, and `stop()` hands the leases back."""

    def __init__(self, settings: IngestSettings) -> None:
        self.settings = settings
        self.port = 0
        self.server: grpc.aio.Server | None = None
        self.health: health.aio.HealthServicer | None = None

    async def start(self) -> None:
        s = self.settings
        self.hub = NotificationHub(s.database_url, streams=False)
        self.dispatcher = Dispatcher(s, self.hub)  # before hub.start(): it listens on the hub
        self.server, self.health, self.port = create_server(
            SERVICE_NAMES, s.webhooks_bind, tls=s.server_tls(), allow_plaintext=s.allow_plaintext
        )
        await self.hub.start()
        await self.dispatcher.start()
        log.info("webhook dispatcher started", extra={"owner": self.dispatcher.owner, "health_port": self.port})

    async def serve(self) -> None:
        """Start the health server and report SERVING (tests; `serve()` below waits for a signal)."""
        assert self.server is not None and self.health is not None
        await self.server.start()
        await set_serving(self.health, SERVICE_NAMES, True)

    async def release(self) -> None:
        """Stop delivering and hand every lease back (the other replicas take over at once)."""
        held = len(self.dispatcher.workers)
        await self.dispatcher.stop()
        log.info("webhook leases handed back", extra={"count": held})

    async def stop(self, grace: float = 0.0) -> None:
        if self.health is not None:
            await set_serving(self.health, SERVICE_NAMES, False)
        try:
            await self.release()
        finally:
            await self.close(grace)

    async def close(self, grace: float = 0.0) -> None:
        await self.hub.stop()
        if self.server is not None:
            await self.server.stop(grace)


async def serve(settings: IngestSettings) -> None:
    app = WebhooksApp(settings)
    await app.start()
    gctune.tune()
    assert app.server is not None and app.health is not None
    log.info("sluice-webhooks serving", extra={"bind": settings.webhooks_bind, "port": app.port})
    # SIGTERM/SIGINT: NOT_SERVING, then the leases are handed back, then the health server stops.
    await run_until_signal(app.server, app.health, SERVICE_NAMES, 0.0, on_stop=app.release)
    await app.hub.stop()
    log.info("sluice-webhooks stopped")


def main() -> None:
    settings = IngestSettings()
    configure_logging("webhooks", settings.log_level, settings.log_json)
    configure_tracing("webhooks")  # OTLP export only when OTEL_EXPORTER_OTLP_ENDPOINT is set
    start_metrics_server(settings, settings.webhooks_bind)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
