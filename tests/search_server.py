"""The real search service serving in a thread of its own (its own event loop), as its
read-only login (sluice_search) on a test's database."""

from __future__ import annotations

import asyncio
import threading

import auth_keys


class RunningSearch:
    def __init__(self, database_url: str, **overrides) -> None:
        from sluice_search.settings import SearchSettings

        values = dict(
            search_bind="127.0.0.1:0",
            search_database_url=auth_keys.search_url(database_url),
            search_collection_cache_seconds=0.5,
            search_pool_min_size=1,
            search_pool_max_size=4,
            log_json=False,
            log_level="WARNING",
        )
        self.settings = SearchSettings(**{**values, **overrides})
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="search", daemon=True)
        self.thread.start()
        self.server = self._call(self._start())
        self.address = f"127.0.0.1:{self.server.port}"

    async def _start(self):
        from sluice_search.main import create_server

        server = await create_server(self.settings)
        await server.start()
        return server

    def _call(self, coro, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        try:
            self._call(self.server.stop(0))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()
