"""One LISTEN connection per ingest-api process, fanned out to waiting calls.

ClaimJob long-polls wait on `jobs_available`; WatchDocument streams wait on their document's
signal, WatchCollection streams on their collection's (`sluice_collection_events`, one per event
and one when the collection is deleted). `stopping` is set when the server shuts down, so that
long streams end at once instead of holding the drain. A waiter takes its signal *before* it
checks the database, so a notification that arrives between the check and the wait is never lost.

The event triggers notify a document or a collection only when `event_listeners` says someone
listens (migration 0014: every notifying commit takes one database-wide lock, which made the
queue's transitions wait on each other). `Listeners` keeps this process's rows there: a watch
registers its document or collection before its first read and keeps it while it waits. A
transaction whose trigger ran just before a registration committed, and that commits just after
the watcher's first read, is not notified: WatchDocument re-reads once soon after it starts,
WatchCollection re-reads while writers older than its read are still running, and the webhook
dispatcher polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable

import psycopg
from sluice_common.tasks import end_if_cancelled, pause, wait_event

log = logging.getLogger("sluice.ingest.notify")

JOBS_CHANNEL = "sluice_jobs_available"
DOCUMENTS_CHANNEL = "sluice_document_events"
COLLECTIONS_CHANNEL = "sluice_collection_events"

LISTENER_TTL_SECONDS = 60  # a registration nobody renews for this long is deleted by any process
RENEW_SECONDS = 20.0
# A key stays registered this long after its last waiter left, so that a client that watches,
# stops and watches again (or one WatchDocument after another of a collection) registers once.
LINGER_SECONDS = 5.0
REGISTER_WAIT_SECONDS = 2.0  # a watch waits at most this long for its registration, then polls

UPSERT = f"""
    INSERT INTO event_listeners (channel, key, listener, expires_at)
    SELECT c, k, %s, now() + interval '{LISTENER_TTL_SECONDS} seconds' FROM unnest(%s::text[], %s::text[]) AS t(c, k)
    ON CONFLICT (channel, key, listener) DO UPDATE SET expires_at = EXCLUDED.expires_at
"""
DELETE = """
    DELETE FROM event_listeners
    WHERE listener = %s AND (channel, key) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
"""
DELETE_STALE = "DELETE FROM event_listeners WHERE expires_at < now() OR (listener = %s AND NOT (channel || ':' || key) = ANY(%s))"
DELETE_MINE = "DELETE FROM event_listeners WHERE listener = %s"

Key = tuple[str, str]


class Listeners:
    """This process's rows in `event_listeners`: what its waiters wait for.

    `hold(channel, key)` counts a waiter and, the first time, waits (briefly) until the key is
    registered. One task writes the rows: new keys as they come, in one statement, released
    keys after LINGER_SECONDS, and every RENEW_SECONDS all of them again (their expiry pushed
    back, the rows of dead processes deleted). If the database is unreachable waiters go on
    without (they poll) and the task registers everything again once it reconnects."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.id = uuid.uuid4()
        self._holders: Counter[Key] = Counter()
        self._released: dict[Key, float] = {}  # keys nobody holds any more, with when
        self._registered: set[Key] = set()
        self._done: asyncio.Future[None] | None = None  # resolved by the pass after it was created
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: psycopg.AsyncConnection | None = None
        self._renew_now = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="event-listeners")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None:
            with contextlib.suppress(Exception):  # the rows then expire by themselves
                await asyncio.wait_for(self._conn.execute(DELETE_MINE, (self.id,)), timeout=2)
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None

    def refresh(self) -> None:
        """Write every key again now (the database may have restarted: crash recovery empties an
        unlogged table)."""
        self._renew_now = True
        self._wake.set()

    @contextlib.asynccontextmanager
    async def hold(self, channel: str, key: str) -> AsyncIterator[None]:
        k = (channel, key)
        self._holders[k] += 1
        self._released.pop(k, None)
        try:
            if self._task is not None and not self._task.done() and k not in self._registered:
                if self._done is None or self._done.done():
                    self._done = asyncio.get_running_loop().create_future()
                done = self._done
                self._wake.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(done), REGISTER_WAIT_SECONDS)
            yield
        finally:
            self._holders[k] -= 1
            if self._holders[k] <= 0:
                del self._holders[k]
                self._released[k] = asyncio.get_running_loop().time()
                self._wake.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = 0.1
        next_renew = 0.0
        while True:
            self._wake.clear()
            done, self._done = self._done, None
            now = loop.time()
            for k, since in list(self._released.items()):
                if now - since >= LINGER_SECONDS:
                    del self._released[k]
            wanted = set(self._holders) | set(self._released)
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = await psycopg.AsyncConnection.connect(self.database_url, autocommit=True)
                    await self._conn.execute("SET synchronous_commit = off")
                    self._registered = set()
                    next_renew = 0.0
                if now >= next_renew or self._renew_now:
                    self._renew_now = False
                    async with self._conn.transaction():
                        await self._conn.execute(DELETE_STALE, (self.id, [f"{c}:{k}" for c, k in wanted]))
                        await self._upsert(wanted)
                    next_renew = now + RENEW_SECONDS
                else:
                    if added := wanted - self._registered:
                        await self._upsert(added)
                    if gone := self._registered - wanted:
                        await self._conn.execute(DELETE, (self.id, [c for c, _ in gone], [k for _, k in gone]))
                self._registered = wanted
                backoff = 0.1
            except Exception as exc:  # waiters poll meanwhile; everything is registered again
                end_if_cancelled(exc)
                log.warning("event listeners not registered; retrying", extra={"error": str(exc)})
                if self._conn is not None:
                    with contextlib.suppress(Exception):
                        await self._conn.close()
                self._conn = None
                self._registered = set()
                self._resolve(done)
                await pause(backoff)
                backoff = min(backoff * 2, 5.0)
                self._wake.set()
                continue
            self._resolve(done)
            timeout = next_renew - loop.time()
            if self._released:
                timeout = min(timeout, min(self._released.values()) + LINGER_SECONDS - loop.time())
            await wait_event(self._wake, max(timeout, 0.0))

    async def _upsert(self, keys: set[Key]) -> None:
        assert self._conn is not None
        if keys:
            await self._conn.execute(UPSERT, (self.id, [c for c, _ in keys], [k for _, k in keys]))

    @staticmethod
    def _resolve(done: asyncio.Future[None] | None) -> None:
        if done is not None and not done.done():
            done.set_result(None)


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
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        # Other channels on the same connection (webhooks): callback(payload), or callback(None)
        # when notifications may have been missed (reconnect).
        self._callbacks: dict[str, list[Callable[[str | None], None]]] = defaultdict(list)
        self.listeners = Listeners(database_url)

    def listen(self, channel: str, callback: Callable[[str | None], None]) -> None:
        """Also LISTEN on `channel` (call before start())."""
        self._callbacks[channel].append(callback)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="notification-hub")
        await asyncio.wait_for(self._connected.wait(), timeout=30)
        self.listeners.start()

    def end_streams(self) -> None:
        """Set `stopping` and wake every waiting stream (they check it and end)."""
        self.stopping.set()
        self._wake_all()

    async def stop(self) -> None:
        self.end_streams()
        await self.listeners.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def watch_document(self, document_id: str) -> contextlib.AbstractAsyncContextManager[Signal]:
        """The document's signal, its events registered as listened to while the block runs."""
        return self._watch(self._documents, self._watchers, DOCUMENTS_CHANNEL, document_id)

    def watch_collection(self, collection_id: int) -> contextlib.AbstractAsyncContextManager[Signal]:
        """The collection's signal, its events registered as listened to while the block runs."""
        return self._watch(self._collections, self._collection_watchers, COLLECTIONS_CHANNEL, str(collection_id))

    @contextlib.asynccontextmanager
    async def _watch(self, signals: dict[str, Signal], watchers: dict[str, int], channel: str, key: str) -> AsyncIterator[Signal]:
        watchers[key] += 1
        try:
            async with self.listeners.hold(channel, key):
                yield signals[key]
        finally:
            watchers[key] -= 1
            if watchers[key] <= 0:
                watchers.pop(key, None)
                signals.pop(key, None)

    def interest(self, channel: str, key: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Register `key`'s notifications on `channel` as listened to while the block runs (the
        webhook dispatcher's subscriptions; it receives them through `listen()`)."""
        return self.listeners.hold(channel, key)

    def deliver(self, channel: str, payload: str) -> None:
        """A notification arrived: wake whoever waits for it."""
        for callback in self._callbacks.get(channel, ()):
            callback(payload)
        if channel == JOBS_CHANNEL:
            self.jobs_available.fire()
        elif channel == COLLECTIONS_CHANNEL:
            if payload in self._collections:
                self._collections[payload].fire()
        elif channel == DOCUMENTS_CHANNEL and payload in self._documents:
            self._documents[payload].fire()

    def _wake_all(self) -> None:
        self.jobs_available.fire()
        for signal in [*self._documents.values(), *self._collections.values()]:
            signal.fire()
        for callbacks in list(self._callbacks.values()):
            for callback in callbacks:
                callback(None)

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.database_url, autocommit=True) as conn:
                    for channel in dict.fromkeys([*self._core, *self._callbacks]):
                        await conn.execute(f"LISTEN {channel}")
                    self._connected.set()
                    backoff = 0.1
                    # Anything may have changed while we were not listening.
                    self.listeners.refresh()
                    self._wake_all()
                    async for note in conn.notifies():
                        self.deliver(note.channel, note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # keep listening through database restarts
                end_if_cancelled(exc)
                log.warning("notification connection lost; reconnecting", extra={"error": str(exc)})
                self._wake_all()
                await pause(backoff)
                backoff = min(backoff * 2, 5.0)
