"""The collections search resolved lately, and the LISTEN that drops them when they change.

Only the collection lookup is cached, briefly: never a hit (rule 3 of
docs/architecture.md#the-rules: a document that leaves READY is invisible to the very next query).
ingest-api's triggers NOTIFY `sluice_collections` with `tenant:name` when a collection is created,
deleted or switches generation (migration 0009); while the LISTEN connection is down (or on a
replica, where LISTEN is not possible) the cache's short lifetime is the fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import psycopg
from sluice_common.tasks import end_if_cancelled, pause

from .domain import Collection

log = logging.getLogger("sluice.search.collections")

COLLECTIONS_CHANNEL = "sluice_collections"
# More entries than this and the cache starts again empty (a bound, not an eviction policy).
MAX_ENTRIES = 10_000


class CollectionCache:
    """ACTIVE collections by (tenant, name), each for `seconds` after it was read."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._entries: dict[tuple[int, str], tuple[float, Collection]] = {}

    def get(self, key: tuple[int, str], now: float) -> Collection | None:
        cached = self._entries.get(key)
        if cached and now - cached[0] < self.seconds:
            return cached[1]
        return None

    def put(self, key: tuple[int, str], now: float, collection: Collection) -> None:
        if len(self._entries) > MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (now, collection)

    def drop(self, key: tuple[int, str]) -> None:
        self._entries.pop(key, None)

    def forget(self, payload: str) -> None:
        """Drop the cached collection named by a `tenant:name` notification (everything if unreadable)."""
        tenant, _, name = payload.partition(":")
        try:
            self._entries.pop((int(tenant), name), None)
        except ValueError:
            self._entries.clear()

    def clear(self) -> None:
        self._entries.clear()


class CollectionListener:
    """One LISTEN connection on `sluice_collections`, reconnected with backoff, that drops what
    each notification names from `cache` (everything while it was not listening) and calls the
    hooks added by on_notify."""

    def __init__(self, cache: CollectionCache) -> None:
        self._cache = cache
        self._task: asyncio.Task[None] | None = None
        self._hooks: list[Callable[[str], None]] = []

    async def start(self, url: str, *, timeout: float = 10.0) -> None:
        """Listen from now on; wait up to `timeout` for the first connection."""
        connected = asyncio.Event()
        self._task = asyncio.create_task(self._listen(url, connected), name="collections-listener")
        try:
            await asyncio.wait_for(connected.wait(), timeout=timeout)
        except TimeoutError:
            log.warning("collection notifications not available yet; the cache expires by age meanwhile")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def on_notify(self, hook: Callable[[str], None]) -> None:
        """Call `hook(payload)` on every `sluice_collections` notification too (the reindex
        quality gate wakes on them: eval_gate.py)."""
        self._hooks.append(hook)

    async def _listen(self, url: str, connected: asyncio.Event) -> None:
        backoff = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {COLLECTIONS_CHANNEL}")
                    self._cache.clear()  # anything may have changed while we were not listening
                    connected.set()
                    backoff = 0.1
                    async for note in conn.notifies():
                        self._cache.forget(note.payload)
                        for hook in self._hooks:
                            hook(note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep listening through database restarts
                end_if_cancelled(exc)
                log.warning("collection notification connection lost; reconnecting", extra={"error": str(exc)})
                self._cache.clear()
                await pause(backoff)
                backoff = min(backoff * 2, 5.0)
