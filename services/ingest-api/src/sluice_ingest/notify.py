"""One LISTEN connection per ingest-api process, fanned out to waiting calls.

ClaimJob long-polls wait on `jobs_available`; WatchDocument streams wait on their document's
signal, WatchCollection streams on their collection's (`sluice_collection_events`, one per event
and one when the collection is deleted). `stopping` is set when the server shuts down, so that
long streams end at once instead of holding the drain. A waiter takes its signal *before* it checks the database, so a notification that
arrives between the check and the wait is never lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable

import psycopg
from sluice_common.tasks import end_if_cancelled, pause

log = logging.getLogger("sluice.ingest.notify")

JOBS_CHANNEL = "sluice_jobs_available"
DOCUMENTS_CHANNEL = "sluice_document_events"
COLLECTIONS_CHANNEL = "sluice_collection_events"


class Signal:
    """An edge-triggered broadcast: `current()` returns an event that the next fire() sets."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def current(self) -> asyncio.Event:
        return self._event

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()


class NotificationHub:
    def __init__(self, database_url: str, *, streams: bool = True) -> None:
        """`streams=False`: LISTEN only on the channels given to `listen()` (the sluice-webhooks
        process, which serves no ClaimJob or Watch* call and needs no job or document notes)."""
        self.database_url = database_url
        self._core = (JOBS_CHANNEL, DOCUMENTS_CHANNEL, COLLECTIONS_CHANNEL) if streams else ()
        self.jobs_available = Signal()
        self._documents: dict[str, Signal] = defaultdict(Signal)
        self._watchers: dict[str, int] = defaultdict(int)
        self._collections: dict[str, Signal] = defaultdict(Signal)
        self._collection_watchers: dict[str, int] = defaultdict(int)
        self.stopping = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._connected = asyncio.Event()
        # Other channels on the same connection (webhooks): callback(payload), or callback(None)
        # when notifications may have been missed (reconnect).
        self._listeners: dict[str, list[Callable[[str | None], None]]] = defaultdict(list)

    def listen(self, channel: str, callback: Callable[[str | None], None]) -> None:
        """Also LISTEN on `channel` (call before start())."""
        self._listeners[channel].append(callback)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="notification-hub")
        await asyncio.wait_for(self._connected.wait(), timeout=30)

    def end_streams(self) -> None:
        """Set `stopping` and wake every waiting stream (they check it and end)."""
        self.stopping.set()
        self._wake_all()

    async def stop(self) -> None:
        self.end_streams()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @contextlib.contextmanager
    def watch_document(self, document_id: str):
        self._watchers[document_id] += 1
        try:
            yield self._documents[document_id]
        finally:
            self._watchers[document_id] -= 1
            if self._watchers[document_id] <= 0:
                self._watchers.pop(document_id, None)
                self._documents.pop(document_id, None)

    @contextlib.contextmanager
    def watch_collection(self, collection_id: int):
        key = str(collection_id)
        self._collection_watchers[key] += 1
        try:
            yield self._collections[key]
        finally:
            self._collection_watchers[key] -= 1
            if self._collection_watchers[key] <= 0:
                self._collection_watchers.pop(key, None)
                self._collections.pop(key, None)

    def _wake_all(self) -> None:
        self.jobs_available.fire()
        for signal in [*self._documents.values(), *self._collections.values()]:
            signal.fire()
        for callbacks in list(self._listeners.values()):
            for callback in callbacks:
                callback(None)

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.database_url, autocommit=True) as conn:
                    for channel in dict.fromkeys([*self._core, *self._listeners]):
                        await conn.execute(f"LISTEN {channel}")
                    self._connected.set()
                    backoff = 0.1
                    # Anything may have changed while we were not listening.
                    self._wake_all()
                    async for note in conn.notifies():
                        for callback in self._listeners.get(note.channel, ()):
                            callback(note.payload)
                        if note.channel == JOBS_CHANNEL:
                            self.jobs_available.fire()
                        elif note.channel == COLLECTIONS_CHANNEL:
                            if note.payload in self._collections:
                                self._collections[note.payload].fire()
                        elif note.payload in self._documents:
                            self._documents[note.payload].fire()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - keep listening through database restarts
                end_if_cancelled(exc)
                log.warning("notification connection lost; reconnecting", extra={"error": str(exc)})
                self._wake_all()
                await pause(backoff)
                backoff = min(backoff * 2, 5.0)
