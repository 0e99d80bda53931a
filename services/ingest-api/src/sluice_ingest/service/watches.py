"""Use cases of the watches (WatchDocument, WatchCollection): a document's changes until it ends,
and a collection's events log, resumable from a cursor, with keep-alives on a quiet stream."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sluice_common.errors import InvalidArgument, NotFound, OutOfRange, Unavailable
from sluice_common.reasons import Reason

from .. import metrics
from ..arguments import parse_id
from ..domain import DocumentStatus, EventCursor, SourceRunEvents
from ..notify import NotificationHub
from ..ports import CollectionLogPort, DocumentLogPort
from ..settings import IngestSettings
from ..store import DocumentRow, LogEvent

TERMINAL = {DocumentStatus.READY, DocumentStatus.FAILED}
WATCH_WINDOW = 500  # log rows one WatchCollection read looks at
FIRST_RECHECK_SECONDS = 1.0  # WatchDocument's first re-read, then one every RECHECK_SECONDS without news
RECHECK_SECONDS = 30.0


@dataclass(frozen=True)
class KeepAlive:
    """Nothing to send up to `cursor` (nothing happened, or nothing matched the filters)."""

    cursor: EventCursor


class WatchUseCases:
    def __init__(
        self, documents: DocumentLogPort, log: CollectionLogPort, hub: NotificationHub, settings: IngestSettings
    ) -> None:
        self.documents = documents
        self.log = log
        self.hub = hub
        self.settings = settings

    async def watch_document(self, tenant_id: int, document_id: str) -> AsyncIterator[DocumentRow]:
        """The document now, then its state after each committed change, until READY or FAILED."""
        doc_id = parse_id(document_id)
        async with self.hub.watch_document(str(doc_id)) as signal:
            changed = signal.current()
            last_event = await self.documents.latest_event_id(doc_id)
            document = await self.documents.get_document(tenant_id, doc_id)
            yield document
            status = document.status
            # The first re-check comes soon: a transaction that was committing while this watch
            # registered may not have notified it (notify.py). Later ones are a safety net only.
            recheck = FIRST_RECHECK_SECONDS
            while status not in TERMINAL:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout=recheck)
                recheck = RECHECK_SECONDS
                changed = signal.current()
                events = await self.documents.document_events_after(doc_id, last_event)
                if not events:
                    await self.documents.get_document(tenant_id, doc_id)  # raises NOT_FOUND once deleted
                    continue
                base = await self.documents.get_document(tenant_id, doc_id)
                for event in events:
                    last_event = event.id
                    merged = event.applied_to(base)
                    yield merged
                    status = merged.status
                    if status in TERMINAL:
                        break

    async def _watch_start(
        self, tenant_id: int, collection: str, after_cursor: str, start_from_oldest: bool
    ) -> tuple[int, EventCursor]:
        """The collection's id and the cursor a watch starts after, once the request is checked."""
        if not collection:
            raise InvalidArgument("collection is required", reason=Reason.MISSING_COLLECTION)
        if after_cursor and start_from_oldest:
            raise InvalidArgument("give after_cursor or start_from_oldest, not both", reason=Reason.INVALID_WATCH_START)
        start = EventCursor.parse(after_cursor) if after_cursor else None
        collection_id = await self.log.collection_id(tenant_id, collection)
        head = await self.log.events_head()
        if start is not None and start > head:
            # Every cursor handed out is at or below the head: this one was made up (or belongs to
            # another database), and following it would skip every event until the log reached it.
            raise InvalidArgument(
                f"cursor {after_cursor!r} is ahead of the events log: not a cursor this server returned",
                reason=Reason.INVALID_CURSOR,
            )
        return collection_id, start or (EventCursor(0, 0) if start_from_oldest else head)

    async def watch_collection(
        self,
        tenant_id: int,
        collection: str,
        after_cursor: str,
        start_from_oldest: bool,
        statuses: list[DocumentStatus],
        terminal_only: bool,
        source_runs: SourceRunEvents = SourceRunEvents.NONE,
    ) -> AsyncIterator[LogEvent | KeepAlive]:
        """Every event of the collection after the cursor, in log order, for as long as the caller
        listens; a KeepAlive when the first read or a quiet spell has nothing to send. The
        statuses and terminal_only filters apply to document events; `source_runs` says whether
        the sync-run events of the collection's sources come too (or alone).

        The cursor moves past every row read, sent or filtered out, and KeepAlives carry it, so a
        narrow filter never reads the same rows twice in one stream. Exactly once across
        reconnects holds because the log is read only below every running writer (store/events.py)
        and a cursor older than what retention pruned is refused rather than silently short."""
        collection_id, cursor = await self._watch_start(tenant_id, collection, after_cursor, start_from_oldest)
        status_names = sorted({str(status) for status in statuses}) or None
        # A replay starts below the horizon on purpose (it asks for what is retained); it is cut
        # short only if pruning moves on while it reads.
        replay_floor: EventCursor | None = None
        loop = asyncio.get_running_loop()
        s = self.settings
        first = True
        async with self.hub.watch_collection(collection_id) as signal:
            with metrics.COLLECTION_WATCHERS.track_inprogress():
                last_sent = loop.time()
                while True:
                    if self.hub.stopping.is_set():
                        raise Unavailable(
                            "the server is shutting down; reconnect with the last cursor",
                            reason=Reason.SERVER_SHUTTING_DOWN,
                            cursor=cursor.encode(),
                        )
                    woken = signal.current()
                    page = await self.log.watch_page(
                        tenant_id, collection_id, cursor, WATCH_WINDOW, status_names, terminal_only, source_runs=source_runs
                    )
                    if not page.exists:
                        raise NotFound(
                            f"collection {collection!r} was deleted", reason=Reason.COLLECTION_NOT_FOUND, collection=collection
                        )
                    if page.horizon is not None and cursor < page.horizon:
                        if start_from_oldest and replay_floor in (None, page.horizon):
                            replay_floor = page.horizon
                        else:
                            oldest = page.horizon.encode()
                            raise OutOfRange(
                                f"cursor {cursor.encode()} is older than the retained events of collection {collection!r};"
                                f" the oldest cursor to resume from is {oldest} (or start from now)",
                                reason=Reason.EVENTS_CURSOR_EXPIRED,
                                oldest_cursor=oldest,
                                collection=collection,
                            )
                    for row in page.events:
                        yield row
                    metrics.COLLECTION_EVENTS_SENT.inc(len(page.events))
                    if page.read_to is not None:
                        cursor = page.read_to
                    if page.events:
                        last_sent = loop.time()
                    elif first:
                        yield KeepAlive(cursor)  # the stream is open: here is where it starts
                        last_sent = loop.time()
                    first = False
                    if page.full:
                        continue
                    quiet_until = last_sent + s.watch_heartbeat_seconds
                    timeout = max(quiet_until - loop.time(), 0.0)
                    if page.waiting:
                        timeout = min(timeout, s.watch_recheck_seconds)
                    stop = asyncio.ensure_future(self.hub.stopping.wait())
                    wake = asyncio.ensure_future(woken.wait())
                    try:
                        await asyncio.wait((stop, wake), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        stop.cancel()
                        wake.cancel()
                    if loop.time() >= quiet_until:
                        yield KeepAlive(cursor)
                        last_sent = loop.time()


__all__ = ["KeepAlive", "WatchUseCases"]
