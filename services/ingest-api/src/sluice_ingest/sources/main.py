"""`sluice-sources`: the sources runner process (docs/sources.md).

It claims sync runs (leased, like ingestion jobs) and carries them out (runner.py) with its own
connection pool and the same document use cases as ingest-api's UploadDocument and
DeleteDocument, so a synced item is uploaded exactly as a client's upload is. Several may run;
one that dies leaves its run to another once the lease expires. It serves grpc.health.v1 on
SLUICE_SOURCES_BIND. SIGTERM or SIGINT: health goes NOT_SERVING and the run in progress is
handed back (PENDING, resumed from its checkpoint by the next runner).

Settings are ingest-api's (IngestSettings: SLUICE_DATABASE_URL and the SLUICE_SOURCE_* ones).
"""

from __future__ import annotations

import asyncio
import logging

from sluice_common.db import open_pool
from sluice_common.logs import configure_logging
from sluice_common.metrics import start_metrics_server
from sluice_common.serving import create_server, run_until_signal, set_serving

from ..service.documents import DocumentUseCases
from ..settings import IngestSettings
from ..store import CollectionStore, DocumentStore
from .runner import Runner
from .store import RunStore

log = logging.getLogger("sluice.sources")

SERVICE_NAMES = ("sluice.sources",)


class SourcesApp:
    def __init__(self, settings: IngestSettings) -> None:
        self.settings = settings
        self.port = 0

    async def start(self) -> None:
        s = self.settings
        self.pool = await open_pool(s.database_url, max_size=8, name="sluice-sources")  # uploads, lease renewals, checkpoints
        documents = DocumentUseCases(DocumentStore(self.pool), CollectionStore(self.pool), s)
        self.runner = Runner(s, RunStore(self.pool, s.source_lease_seconds), documents)
        self.stopping = asyncio.Event()
        self.task = asyncio.create_task(self.runner.run_forever(self.stopping), name="sources-runner")
        self.server, self.health, self.port = create_server(
            SERVICE_NAMES, s.sources_bind, tls=s.server_tls(), allow_plaintext=s.allow_plaintext
        )

    async def serve(self) -> None:
        await self.server.start()
        await set_serving(self.health, SERVICE_NAMES, True)

    async def release(self) -> None:
        """Stop claiming; a run in progress is cancelled and handed back by `carry_out`."""
        self.stopping.set()
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    async def close(self) -> None:
        await self.release()
        await self.server.stop(0)
        await self.pool.close()


async def serve(settings: IngestSettings) -> None:
    app = SourcesApp(settings)
    await app.start()
    log.info("sluice-sources serving", extra={"bind": settings.sources_bind, "port": app.port})
    await run_until_signal(app.server, app.health, SERVICE_NAMES, 0.0, on_stop=app.release)
    await app.pool.close()
    log.info("sluice-sources stopped")


def main() -> None:
    settings = IngestSettings()
    configure_logging("sources", settings.log_level, settings.log_json)
    start_metrics_server(settings, settings.sources_bind)  # SLUICE_METRICS_PORT; 0 (the default): none
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
