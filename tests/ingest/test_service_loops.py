"""The service layer's loops on a fake store (no database): the ClaimJob long-poll,
WatchDocument and WatchCollection. SKIP LOCKED, triggers and fencing keep their tests against PostgreSQL
(test_rules, test_concurrency); these pin down the waiting and waking logic, fast."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid

import pytest
from sluice_common.errors import NotFound, OutOfRange
from sluice_ingest.domain import EventCursor
from sluice_ingest.notify import COLLECTIONS_CHANNEL, DOCUMENTS_CHANNEL, NotificationHub
from sluice_ingest.ports import CollectionLogPort, DocumentLogPort, QueuePort
from sluice_ingest.service import JobUseCases, WatchUseCases
from sluice_ingest.settings import IngestSettings
from sluice_ingest.store import ClaimedJob, CollectionEventRow, DocumentRow, EventRow, WatchPage

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
DOC = uuid.uuid4()


def job() -> ClaimedJob:
    return ClaimedJob(
        "claimed",
        uuid.uuid4(),
        uuid.uuid4(),
        1,
        3,
        None,
        uuid.uuid4(),
        "a.txt",
        "text/plain",
        "0" * 64,
        1,
        {},
        "docs",
        "hashing",
        "hashing-v1",
        8,
        1000,
        800,
        0,
        None,
    )


def document(status: str = "PENDING") -> DocumentRow:
    return DocumentRow(
        DOC,
        1,
        "docs",
        "a.txt",
        "text/plain",
        status,
        None,
        None,
        None,
        0,
        0,
        "",
        "0" * 64,
        1,
        {},
        None,
        0,
        NOW,
        NOW,
        uuid.uuid4(),
        "PENDING",
        0,
        3,
        NOW,
        NOW,
    )


def event(event_id: int, status: str, job_status: str = "RUNNING") -> EventRow:
    return EventRow(event_id, status, None, None, status, 0, 0, "", 0, job_status, 1, 3, NOW, NOW, NOW)


class FakeStore:
    """The parts of the queue and of the document store the loops use; everything is scripted by the test."""

    def __init__(self) -> None:
        self.jobs: list[ClaimedJob] = []
        self.claims = 0
        self.wakeup: dt.timedelta | None = None
        self.document: DocumentRow | None = document()
        self.events: list[EventRow] = []

    async def claim_job(self, worker_id: str) -> ClaimedJob | None:
        self.claims += 1
        return self.jobs.pop(0) if self.jobs else None

    async def next_wakeup(self) -> dt.timedelta | None:
        return self.wakeup

    async def get_document(self, tenant_id: int, document_id: uuid.UUID) -> DocumentRow:
        if self.document is None:
            raise NotFound("gone", reason="DOCUMENT_NOT_FOUND")
        return self.document

    async def latest_event_id(self, document_id: uuid.UUID) -> int:
        return 0

    async def document_events_after(self, document_id: uuid.UUID, after_id: int) -> list[EventRow]:
        return [e for e in self.events if e.id > after_id]


@pytest.fixture
def loops():
    store = FakeStore()
    hub = NotificationHub("postgresql://unused")  # not started: its signals work without a database
    settings = IngestSettings(max_claim_wait_seconds=60)
    jobs = JobUseCases(store, hub, settings)  # type: ignore[arg-type]
    watches = WatchUseCases(store, FakeLog(), hub, settings)  # type: ignore[arg-type]
    return store, hub, jobs, watches


def test_the_fake_covers_what_the_loops_use():
    claims = {"claim_job", "next_wakeup"}
    watches = {"get_document", "latest_event_id", "document_events_after"}
    assert claims <= set(dir(QueuePort)) and watches <= set(dir(DocumentLogPort))
    assert claims | watches <= set(dir(FakeStore))


async def test_a_claim_returns_at_once_when_a_job_is_due(loops):
    store, _hub, jobs, _watches = loops
    store.jobs.append(job())
    assert await jobs.claim_job("w", 30) is not None
    assert store.claims == 1


async def test_a_claim_with_no_wait_returns_nothing(loops):
    store, _hub, jobs, _watches = loops
    assert await jobs.claim_job("w", 0) is None and store.claims == 1


async def test_the_long_poll_is_woken_by_a_notification(loops):
    store, hub, jobs, _watches = loops
    waiting = asyncio.create_task(jobs.claim_job("w", 30))
    await asyncio.sleep(0.05)
    assert not waiting.done() and store.claims == 1  # nothing due: it waits
    store.jobs.append(job())
    hub.jobs_available.fire()
    claimed = await asyncio.wait_for(waiting, 10)  # far less than the 30 s it would otherwise wait
    assert claimed is not None and store.claims == 2


async def test_the_long_poll_wakes_itself_when_a_delayed_job_becomes_due(loops):
    store, _hub, jobs, _watches = loops
    store.wakeup = dt.timedelta(seconds=0.05)  # a retry due soon: no notification will come

    async def due_later():
        await asyncio.sleep(0.03)
        store.jobs.append(job())

    due = asyncio.create_task(due_later())
    claimed = await asyncio.wait_for(jobs.claim_job("w", 30), 10)
    await due
    assert claimed is not None and store.claims >= 2


async def test_watch_yields_the_document_then_each_event_until_ready(loops):
    store, hub, _jobs, watches = loops
    seen = []

    async def watch():
        async for row in watches.watch_document(1, str(DOC)):
            seen.append(row.status)

    watching = asyncio.create_task(watch())
    await asyncio.sleep(0.05)
    assert seen == ["PENDING"]
    store.events += [event(1, "PARSING"), event(2, "CHUNKING")]
    hub.deliver(DOCUMENTS_CHANNEL, str(DOC))
    await asyncio.sleep(0.05)
    assert seen == ["PENDING", "PARSING", "CHUNKING"]
    store.events += [event(3, "EMBEDDING"), event(4, "INDEXING"), event(5, "READY", "SUCCEEDED"), event(6, "PENDING")]
    hub.deliver(DOCUMENTS_CHANNEL, str(DOC))
    await asyncio.wait_for(watching, 10)
    assert seen == ["PENDING", "PARSING", "CHUNKING", "EMBEDDING", "INDEXING", "READY"]  # ends at READY


async def test_watch_of_a_document_deleted_meanwhile_ends_with_not_found(loops):
    store, hub, _jobs, watches = loops
    updates = watches.watch_document(1, str(DOC))
    assert (await anext(updates)).status == "PENDING"
    store.document = None
    hub.deliver(DOCUMENTS_CHANNEL, str(DOC))
    with pytest.raises(NotFound):
        await asyncio.wait_for(anext(updates), 10)


# --------------------------------------------------------------------------- WatchCollection


def collection_event(event_id: int, status: str = "PENDING") -> CollectionEventRow:
    return CollectionEventRow(
        event_id,
        500 + event_id,
        DOC,
        False,
        status,
        None,
        None,
        None,
        0,
        0,
        "",
        0,
        "PENDING",
        0,
        3,
        NOW,
        NOW,
        NOW,
        "a.txt",
        "text/plain",
    )


HEAD = EventCursor(1000, 0)  # every cursor below is in the fake log's past


class FakeLog:
    """watch_page scripted by the test: each read pops the next page (or repeats an empty one)."""

    def __init__(self) -> None:
        self.pages: list[WatchPage] = []
        self.reads: list[EventCursor] = []

    async def collection_id(self, tenant_id: int, name: str) -> int:
        return 7

    async def events_head(self) -> EventCursor:
        return HEAD

    async def watch_page(self, tenant_id, collection_id, after, limit, statuses, terminal_only, source_runs=None) -> WatchPage:
        self.reads.append(after)
        if self.pages:
            return self.pages.pop(0)
        return WatchPage([], None, False, None, False, True)


def test_the_fake_log_covers_what_the_watch_loop_uses():
    used = {"collection_id", "events_head", "watch_page"}
    assert used <= set(dir(CollectionLogPort)) and used <= set(dir(FakeLog))


def watch_loop(settings: IngestSettings):
    store = FakeLog()
    hub = NotificationHub("postgresql://unused")
    return store, hub, WatchUseCases(FakeStore(), store, hub, settings)  # type: ignore[arg-type]


async def test_filtered_out_rows_move_the_cursor_and_a_heartbeat_carries_it():
    store, hub, watches = watch_loop(IngestSettings(watch_heartbeat_seconds=60, watch_recheck_seconds=60))
    # The first window: one event sent, then rows up to (505, 5) read but filtered out.
    store.pages.append(WatchPage([collection_event(1)], EventCursor(505, 5), False, None, False, True))
    stream = watches.watch_collection(1, "docs", "", False, [], True)
    assert (await anext(stream)).id == 1
    reading = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.05)
    hub.deliver(COLLECTIONS_CHANNEL, "7")
    await asyncio.sleep(0.05)
    assert store.reads == [HEAD, EventCursor(505, 5)]  # the next read starts past the filtered rows
    hub.end_streams()
    with pytest.raises(Exception, match="shutting down"):
        await asyncio.wait_for(reading, 10)


async def test_committed_but_unreadable_events_are_read_again_without_a_notification():
    store, _hub, watches = watch_loop(IngestSettings(watch_heartbeat_seconds=60, watch_recheck_seconds=0.01))
    store.pages.append(WatchPage([], None, False, None, True, True))  # waiting: an older writer still runs
    store.pages.append(WatchPage([collection_event(2)], EventCursor(502, 2), False, None, False, True))
    stream = watches.watch_collection(1, "docs", "", False, [], False)
    first = await anext(stream)
    assert first.cursor == HEAD  # the opening heartbeat: nothing yet
    assert (await asyncio.wait_for(anext(stream), 10)).id == 2  # no signal fired: the re-check found it


async def test_a_full_window_is_followed_at_once_and_an_expired_cursor_is_refused():
    store, _hub, watches = watch_loop(IngestSettings(watch_heartbeat_seconds=60, watch_recheck_seconds=60))
    store.pages.append(WatchPage([collection_event(1)], EventCursor(501, 1), True, None, False, True))
    store.pages.append(WatchPage([collection_event(2)], EventCursor(502, 2), False, None, False, True))
    stream = watches.watch_collection(1, "docs", "500.0", False, [], False)
    assert [(await anext(stream)).id, (await asyncio.wait_for(anext(stream), 10)).id] == [1, 2]
    store.pages.append(WatchPage([], None, False, EventCursor(520, 9), False, True))
    with pytest.raises(OutOfRange) as err:
        await anext(watches.watch_collection(1, "docs", "510.3", False, [], False))
    assert err.value.metadata["oldest_cursor"] == "520.9"


async def test_a_replay_reads_below_the_horizon_until_pruning_moves_it():
    store, _hub, watches = watch_loop(IngestSettings(watch_heartbeat_seconds=60, watch_recheck_seconds=60))
    floor = EventCursor(510, 0)
    # Replaying from the start: below the horizon on purpose, and it stays put: fine.
    store.pages.append(WatchPage([collection_event(1)], EventCursor(501, 1), True, floor, False, True))
    store.pages.append(WatchPage([collection_event(2)], EventCursor(502, 2), True, floor, False, True))
    # Then pruning moves the horizon past where the replay is: events it has not read are gone.
    store.pages.append(WatchPage([], None, False, EventCursor(530, 0), False, True))
    stream = watches.watch_collection(1, "docs", "", True, [], False)
    assert [(await anext(stream)).id, (await anext(stream)).id] == [1, 2]
    with pytest.raises(OutOfRange) as err:
        await anext(stream)
    assert err.value.metadata["oldest_cursor"] == "530.0"
