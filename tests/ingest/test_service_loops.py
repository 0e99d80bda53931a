"""The service layer's loops on a fake store (no database): the ClaimJob long-poll and
WatchDocument. SKIP LOCKED, triggers and fencing keep their tests against PostgreSQL
(test_rules, test_concurrency); these pin down the waiting and waking logic, fast."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid

import pytest

from sluice_common.errors import NotFound
from sluice_ingest.notify import NotificationHub
from sluice_ingest.ports import IngestStore
from sluice_ingest.service import IngestService
from sluice_ingest.settings import IngestSettings
from sluice_ingest.store import ClaimedJob, DocumentRow, EventRow

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
DOC = uuid.uuid4()


def job() -> ClaimedJob:
    return ClaimedJob("claimed", uuid.uuid4(), uuid.uuid4(), 1, 3, None, uuid.uuid4(), "a.txt", "text/plain", "0" * 64, 1,
                      {}, "docs", "hashing", "hashing-v1", 8, 1000, 800, 0, None)


def document(status: str = "PENDING") -> DocumentRow:
    return DocumentRow(DOC, 1, "docs", "a.txt", "text/plain", status, None, None, None, 0, 0, "", "0" * 64, 1, {}, None,
                       0, NOW, NOW, uuid.uuid4(), "PENDING", 0, 3, NOW, NOW)


def event(event_id: int, status: str, job_status: str = "RUNNING") -> EventRow:
    return EventRow(event_id, status, None, None, status, 0, 0, "", 0, job_status, 1, 3, NOW, NOW, NOW)


class FakeStore:
    """The parts of IngestStore the loops use; everything is scripted by the test."""

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
    service = IngestService(store, hub, IngestSettings(max_claim_wait_seconds=60))  # type: ignore[arg-type]
    return store, hub, service


def test_the_fake_covers_what_the_loops_use():
    used = {"claim_job", "next_wakeup", "get_document", "latest_event_id", "document_events_after"}
    assert used <= set(dir(IngestStore)) and used <= set(dir(FakeStore))


async def test_a_claim_returns_at_once_when_a_job_is_due(loops):
    store, hub, service = loops
    store.jobs.append(job())
    assert await service.claim_job("w", 30) is not None
    assert store.claims == 1


async def test_a_claim_with_no_wait_returns_nothing(loops):
    store, hub, service = loops
    assert await service.claim_job("w", 0) is None and store.claims == 1


async def test_the_long_poll_is_woken_by_a_notification(loops):
    store, hub, service = loops
    waiting = asyncio.create_task(service.claim_job("w", 30))
    await asyncio.sleep(0.05)
    assert not waiting.done() and store.claims == 1  # nothing due: it waits
    store.jobs.append(job())
    hub.jobs_available.fire()
    claimed = await asyncio.wait_for(waiting, 10)  # far less than the 30 s it would otherwise wait
    assert claimed is not None and store.claims == 2


async def test_the_long_poll_wakes_itself_when_a_delayed_job_becomes_due(loops):
    store, hub, service = loops
    store.wakeup = dt.timedelta(seconds=0.05)  # a retry due soon: no notification will come

    async def due_later():
        await asyncio.sleep(0.03)
        store.jobs.append(job())

    asyncio.create_task(due_later())
    claimed = await asyncio.wait_for(service.claim_job("w", 30), 10)
    assert claimed is not None and store.claims >= 2


async def test_watch_yields_the_document_then_each_event_until_ready(loops):
    store, hub, service = loops
    seen = []

    async def watch():
        async for row in service.watch_document(1, str(DOC)):
            seen.append(row.status)

    watching = asyncio.create_task(watch())
    await asyncio.sleep(0.05)
    assert seen == ["PENDING"]
    store.events += [event(1, "PARSING"), event(2, "CHUNKING")]
    with hub.watch_document(str(DOC)) as signal:
        signal.fire()
    await asyncio.sleep(0.05)
    assert seen == ["PENDING", "PARSING", "CHUNKING"]
    store.events += [event(3, "EMBEDDING"), event(4, "INDEXING"), event(5, "READY", "SUCCEEDED"), event(6, "PENDING")]
    with hub.watch_document(str(DOC)) as signal:
        signal.fire()
    await asyncio.wait_for(watching, 10)
    assert seen == ["PENDING", "PARSING", "CHUNKING", "EMBEDDING", "INDEXING", "READY"]  # ends at READY


async def test_watch_of_a_document_deleted_meanwhile_ends_with_not_found(loops):
    store, hub, service = loops
    updates = service.watch_document(1, str(DOC))
    assert (await anext(updates)).status == "PENDING"
    store.document = None
    with hub.watch_document(str(DOC)) as signal:
        signal.fire()
    with pytest.raises(NotFound):
        await asyncio.wait_for(anext(updates), 10)
