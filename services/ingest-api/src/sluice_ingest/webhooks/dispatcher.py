"""The webhook dispatcher: background asyncio tasks of the `sluice-webhooks` process (main.py),
or of an ingest-api replica with SLUICE_WEBHOOKS_ENABLED=true.

A supervisor takes the leases of active subscriptions (FOR UPDATE SKIP LOCKED, see
store.claim), renews them, and runs one task per subscription it holds; a replica that dies
stops renewing and another takes its subscriptions once the lease expires (a replica that
stops cleanly hands them back at once). Each subscription task:

1. reads its collection's events log after its own cursor (EventStore.collection_events_after:
   (txid, id) order, only what every writer has finished with), turns the events it wants into
   delivery rows and moves its cursor past them, in one statement (the outbox); events that
   make no delivery move the cursor in memory, written at the latest CURSOR_WRITE_SECONDS later;
2. sends the first pending delivery of each document that is due, a few at a time, so a
   document's later event never goes before its earlier one was delivered or given up;
3. sleeps until its collection's NOTIFY (`sluice_collection_events`, sent because the task
   registers the collection as listened to), the next retry, or the fallback poll.

A slow or dead receiver only holds its own subscription's few requests: requests of all
subscriptions share a global bound, each subscription a small one of its own. The dispatcher
has its own connection pool and never touches document or job rows, so ingestion never waits
for it. Events pruned from the log (retention) before a subscription read them are counted
as a gap on the subscription and skipped: a lagging subscription never holds the log back.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import random
import socket
import time
import uuid

from google.protobuf import json_format
from psycopg_pool import AsyncConnectionPool
from sluice_common.db import open_pool
from sluice_common.tasks import end_if_cancelled, pause, wait_event

from .. import metrics
from ..api.converters import source_run_event_to_proto
from ..domain import EventCursor
from ..notify import NotificationHub, Signal
from ..settings import IngestSettings
from ..store.events import CollectionEventRow, EventStore, SourceRunEventRow
from .events import RUN_EVENT_TYPES, Description, EventType, payload, run_payload, types_of_change
from .sender import AttemptResult, Sender
from .store import DeliveryRow, LeasedSubscription, NewDelivery, SubscriptionLeaseLost, WebhookStore

log = logging.getLogger("sluice.ingest.webhooks")

EVENTS_CHANNEL = "sluice_collection_events"
CHANGED_CHANNEL = "sluice_webhooks_changed"
NO_EVENT = 2**63 - 1  # the event id of a cursor that is not an event (the log's head)
# A cursor whose event is younger than this cannot have been pruned (retention keeps far longer).
GAP_CHECK_AGE = 600.0
# Due deliveries a scan takes beyond the free request slots (started as requests end).
PREFETCH = 32
# A batch of events that makes no delivery moves the cursor in memory only; it is written with the
# next batch that makes deliveries, or after this many seconds. Events read again after a take-over
# make no delivery either (and a delivery row is unique per event and type), so nothing is lost
# or sent twice, and a subscription that wants only terminal events costs one read per wake-up
# instead of three statements.
CURSOR_WRITE_SECONDS = 1.0


def retry_delay(failed_attempts: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds before the next attempt after `failed_attempts` failures: base x 4^(n-1), capped,
    with ±20 % jitter so the retries of many deliveries do not arrive together."""
    delay = min(cap, base * 4 ** max(failed_attempts - 1, 0))
    return float(delay * (rng or random).uniform(0.8, 1.2))


def description_of(row: CollectionEventRow) -> Description:
    return Description(
        filename=row.filename or "",
        source_uri=row.source_uri or "",
        version=row.version or 0,
        content_sha256=row.content_sha256 or "",
    )


class Dispatcher:
    def __init__(self, settings: IngestSettings, hub: NotificationHub) -> None:
        """Build before `hub.start()`: the dispatcher listens on the hub's connection."""
        self.settings = settings
        self.hub = hub
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.workers: dict[uuid.UUID, SubscriptionWorker] = {}
        self._signals: dict[int, Signal] = {}
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._next_prune = 0.0
        hub.listen(EVENTS_CHANNEL, lambda payload: self._on_note(EVENTS_CHANNEL, payload))
        hub.listen(CHANGED_CHANNEL, lambda payload: self._on_note(CHANGED_CHANNEL, payload))

    async def start(self) -> None:
        s = self.settings
        self.pool: AsyncConnectionPool = await open_pool(
            s.database_url, min_size=1, max_size=s.webhook_pool_size, name="ingest-webhooks"
        )
        self.store = WebhookStore(self.pool)
        self.events = EventStore(self.pool)
        self.sender = Sender(
            allow_private=s.webhook_allow_private_networks,
            connect_timeout=s.webhook_connect_timeout_seconds,
            total_timeout=s.webhook_timeout_seconds,
            max_connections=s.webhook_max_concurrent_requests,
            ca_file=s.webhook_tls_ca_file,
        )
        self.requests = asyncio.Semaphore(s.webhook_max_concurrent_requests)
        self._tasks = [asyncio.create_task(self._supervise(), name="webhooks-supervise")]

    async def stop(self) -> None:
        for task in self._tasks:  # the supervisor first: it starts no worker after this
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        workers = list(self.workers.values())
        for worker in workers:
            worker.task.cancel()
        if workers:  # bounded: a request stuck in a library's shielded clean-up must not hold the shutdown
            await asyncio.wait([w.task for w in workers], timeout=5.0)
        try:
            await self.store.release(self.owner, list(self.workers))  # hand over at once, not after the lease
        except Exception as exc:  # the lease then expires by itself
            log.warning("webhook leases not released", extra={"error": str(exc)})
        finally:
            self.workers.clear()
            metrics.WEBHOOK_SUBSCRIPTIONS_HELD.set(0)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.sender.close(), timeout=5.0)
            await self.pool.close()

    def signal(self, collection_id: int) -> Signal:
        return self._signals.setdefault(collection_id, Signal())

    def _on_note(self, channel: str, payload: str | None) -> None:
        """A NOTIFY from the process's one LISTEN connection (notify.py); None: maybe missed some."""
        if payload is None:
            self._wake_all()
        elif channel == CHANGED_CHANNEL:
            self._changed.set()
        elif payload.isdigit() and int(payload) in self._signals:
            self._signals[int(payload)].fire()

    def _wake_all(self) -> None:
        self._changed.set()
        for signal in list(self._signals.values()):
            signal.fire()

    async def _supervise(self) -> None:
        s = self.settings
        tick = min(s.webhook_lease_seconds / 3, s.webhook_poll_seconds)
        while True:
            self._changed.clear()
            try:
                await self._tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the loop outlives a database outage
                end_if_cancelled(exc)
                log.warning("webhook supervisor tick failed", extra={"error": str(exc)})
            await wait_event(self._changed, tick)

    async def _tick(self) -> None:
        s = self.settings
        held = {row.id: row for row in await self.store.renew(self.owner, list(self.workers), s.webhook_lease_seconds)}
        for sub_id in [i for i in self.workers if i not in held]:
            # Deleted, disabled, or taken over after we failed to renew in time: stop serving it.
            self.workers.pop(sub_id).task.cancel()
        for sub_id, row in held.items():
            worker = self.workers[sub_id]
            if worker.task.done():  # ended on an error or a lost race: serve it afresh
                self.workers[sub_id] = SubscriptionWorker(self, row)
            else:
                worker.refresh(row)
        if time.monotonic() >= self._next_prune:
            retention = s.webhook_delivery_retention_days * 86400
            self._next_prune = time.monotonic() + min(60.0, retention)
            pruned = await self.store.prune_deliveries(retention)
            if pruned:
                log.info("old webhook deliveries deleted", extra={"count": pruned})
        room = s.webhook_max_subscriptions_per_replica - len(self.workers)
        for row in await self.store.claim(self.owner, s.webhook_lease_seconds, room):
            log.info("serving webhook", extra={"webhook_id": str(row.id), "collection": row.collection})
            self.workers[row.id] = SubscriptionWorker(self, row)
        metrics.WEBHOOK_SUBSCRIPTIONS_HELD.set(len(self.workers))


class SubscriptionWorker:
    """One subscription's outbox and delivery loop (one asyncio task)."""

    def __init__(self, dispatcher: Dispatcher, row: LeasedSubscription) -> None:
        self.d = dispatcher
        self.row = row
        self.cursor = row.cursor
        self.stored = row.cursor  # the cursor as written in the subscription's row
        self.stored_at = time.monotonic()
        self.cursor_time: dt.datetime | None = None  # when the cursor's event was written, once known
        self.wanted = {EventType(t) for t in row.event_types}
        # Requests in flight, by document: a document has at most one, and only its first pending delivery.
        self.in_flight: dict[uuid.UUID, asyncio.Task[None]] = {}
        self.finished = Signal()  # fired when a request ends: the document's next delivery may go
        self.ready: list[DeliveryRow] = []  # due first deliveries found by the last scan, not started yet
        self.next_due: float | None = None
        self.lease_lost = False
        self.task = asyncio.create_task(self.run(), name=f"webhook-{row.id}")

    def refresh(self, row: LeasedSubscription) -> None:
        self.row = row  # a rotated secret reaches the next attempt; the cursor is ours

    async def run(self) -> None:
        try:
            # The collection's events notify only while someone is registered as listening (notify.py).
            async with self.d.hub.interest(EVENTS_CHANNEL, str(self.row.collection_id)):
                await self._loop()
        finally:
            tasks = list(self.in_flight.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _loop(self) -> None:
        s = self.d.settings
        failures = 0
        woken = False
        recheck = 0.0
        need_due = True  # look for due deliveries: at start, after a request ended, or on time
        next_due_at: float | None = None
        while not self.lease_lost:
            wake = self.d.signal(self.row.collection_id).current()  # taken before the check: no lost wake-up
            finished = self.finished.current()
            try:
                pulled, added = await self.pull()
                if added or need_due or (next_due_at is not None and time.monotonic() >= next_due_at):
                    need_due = False
                    next_due = await self.send_due()
                    next_due_at = None if next_due is None else time.monotonic() + next_due
                failures = 0
            except SubscriptionLeaseLost:
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a database outage must not end the subscription
                end_if_cancelled(exc)
                failures += 1
                need_due = True
                self.ready = []
                log.warning("webhook dispatch failed; retrying", extra={"webhook_id": str(self.row.id), "error": str(exc)})
                await pause(min(0.1 * 2**failures, 5.0))
                continue
            # Notified but nothing readable: a transaction older than the event's still runs (the
            # log is read below the oldest running one). Look again soon, backing off to the poll.
            if pulled:
                recheck = 0.0
            elif woken:
                recheck = 0.02
            elif recheck:
                recheck = recheck * 2 if recheck * 2 < s.webhook_poll_seconds else 0.0
            timeout = s.webhook_poll_seconds
            if next_due_at is not None:
                timeout = min(timeout, max(next_due_at - time.monotonic(), 0.0))
            if recheck:
                timeout = min(timeout, recheck)
            waits = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(finished.wait())]
            try:
                done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waits:
                    waiter.cancel()
            woken = waits[0] in done
            if waits[1] in done or not done:
                need_due = True  # a request ended, or the poll: the next deliveries may be due
            if woken and s.webhook_wake_coalesce_seconds:
                await asyncio.sleep(s.webhook_wake_coalesce_seconds)  # let a burst of events gather
        log.info("webhook lease lost", extra={"webhook_id": str(self.row.id)})

    async def pull(self) -> tuple[int, int]:
        """Turn the subscription's new events into deliveries: (events read, deliveries added)."""
        batch_size = self.d.settings.webhook_event_batch
        total = added = 0
        while True:
            rows = await self.d.events.collection_events_after(
                self.row.tenant_id, self.row.collection_id, self.cursor, batch_size
            )
            if not rows:
                if self.stored != self.cursor and time.monotonic() - self.stored_at >= CURSOR_WRITE_SECONDS:
                    await self._store_cursor(self.cursor, [], 0)
                return total, added
            gaps = 0
            # Only a cursor that has not moved for a while can have fallen behind the retention.
            stale = self.cursor_time is None or (dt.datetime.now(dt.UTC) - self.cursor_time).total_seconds() > GAP_CHECK_AGE
            if stale and self.cursor.event_id != NO_EVENT and not await self.d.store.event_exists(self.cursor.event_id):
                # Retention pruned the event we stopped after: what followed it may be gone too.
                gaps = 1
                metrics.WEBHOOK_EVENT_GAPS.inc()
                log.warning(
                    "webhook cursor fell behind the events log's retention; events may be lost",
                    extra={"webhook_id": str(self.row.id), "cursor": self.cursor.encode()},
                )
            documents = [r for r in rows if isinstance(r, CollectionEventRow)]
            # Only rows that can stand for a wanted type need their previous status.
            candidates = [r.id for r in documents if self._may_want(r.status, r.deleted)]
            previous = await self.d.store.previous_statuses(candidates) if candidates else {}
            # The events read a document's description from its row, a deletion's from itself
            # (migration 0025). An event read after its row went, or a deletion written before
            # 0025, has none: keep what this subscription's earlier deliveries said of it.
            descriptions = {r.document_id: description_of(r) for r in documents if r.filename is not None}
            missing = {r.document_id for r in documents} - descriptions.keys()
            if missing:
                descriptions.update(await self.d.store.known_descriptions(self.row.id, list(missing)))
            deliveries = []
            for r in rows:
                if isinstance(r, SourceRunEventRow):
                    run_delivery = self._run_delivery(r)
                    if run_delivery is not None:
                        deliveries.append(run_delivery)
                    continue
                for event_type in types_of_change(r.status, previous.get(r.id), r.deleted):
                    if event_type not in self.wanted:
                        continue
                    deliveries.append(
                        NewDelivery(
                            event_id=r.id,
                            event_txid=r.txid,
                            document_id=r.document_id,
                            event_type=str(event_type),
                            event_time=r.created_at,
                            payload=payload(
                                event_type,
                                event_id=r.id,
                                cursor=r.cursor,
                                timestamp=r.created_at,
                                document_id=str(r.document_id),
                                collection=self.row.collection,
                                description=descriptions.get(r.document_id),
                                status=r.status,
                                error_code=r.error_code,
                                error_message=r.error_message,
                                chunk_count=r.chunk_count,
                            ),
                        )
                    )
            if deliveries or gaps or time.monotonic() - self.stored_at >= CURSOR_WRITE_SECONDS:
                await self._store_cursor(rows[-1].cursor, deliveries, gaps)
            self.cursor = rows[-1].cursor
            self.cursor_time = rows[-1].created_at
            total += len(rows)
            added += len(deliveries)
            if len(rows) < batch_size:
                return total, added

    def _run_delivery(self, r: SourceRunEventRow) -> NewDelivery | None:
        """A sync run's event as a delivery, if the subscription named its type. The run's id is
        the delivery's ordering key (in the column a document event keys by its document): a
        run's events go in order, like a document's."""
        event_type = RUN_EVENT_TYPES[r.kind]
        if event_type not in self.wanted:
            return None
        event = json_format.MessageToDict(
            source_run_event_to_proto(self.row.collection, r),
            preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True,
        )
        return NewDelivery(
            event_id=r.id,
            event_txid=r.txid,
            document_id=r.source_run_id,
            event_type=str(event_type),
            event_time=r.created_at,
            payload=run_payload(
                event_type,
                event_id=r.id,
                cursor=r.cursor,
                timestamp=r.created_at,
                collection=self.row.collection,
                source_run=event,
            ),
        )

    def _may_want(self, status: str, deleted: bool) -> bool:
        """Whether a log row can stand for an event type this subscription wants (types_of_change)."""
        if deleted:
            return EventType.DOCUMENT_DELETED in self.wanted
        if EventType.DOCUMENT_STATUS_CHANGED in self.wanted:
            return True
        return (status == "READY" and EventType.DOCUMENT_READY in self.wanted) or (
            status == "FAILED" and EventType.DOCUMENT_FAILED in self.wanted
        )

    async def _store_cursor(self, cursor: EventCursor, deliveries: list[NewDelivery], gaps: int) -> None:
        """Write the cursor and the deliveries of the events before it (one statement, fenced)."""
        await self.d.store.append(self.d.owner, self.row.id, self.stored, cursor, deliveries, gaps)
        self.stored = cursor
        self.stored_at = time.monotonic()

    async def send_due(self) -> float | None:
        """Start the due first deliveries of documents with nothing in flight (up to the
        subscription's bound); the seconds until the next one falls due. One scan finds a few
        more than there is room for; they start as requests end, without another scan."""
        room = self.d.settings.webhook_max_in_flight_per_subscription - len(self.in_flight)
        if room <= 0:
            return self.next_due
        if not self.ready:
            self.ready, self.next_due = await self.d.store.due(self.row.id, room + PREFETCH, list(self.in_flight))
        while self.ready and len(self.in_flight) < self.d.settings.webhook_max_in_flight_per_subscription:
            delivery = self.ready.pop(0)
            task = asyncio.create_task(self._attempt(delivery), name=f"webhook-delivery-{delivery.id}")
            self.in_flight[delivery.document_id] = task
        return self.next_due

    async def _attempt(self, delivery: DeliveryRow) -> None:
        try:
            await self.deliver(delivery)
        except SubscriptionLeaseLost:
            self.lease_lost = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # unrecorded: the delivery stays PENDING and goes again
            log.warning(
                "webhook attempt not recorded",
                extra={"webhook_id": str(self.row.id), "delivery_id": str(delivery.id), "error": str(exc)},
            )
            await asyncio.sleep(1.0)
        finally:
            self.in_flight.pop(delivery.document_id, None)
            self.finished.fire()

    async def deliver(self, delivery: DeliveryRow) -> None:
        s = self.d.settings
        row = self.row
        async with self.d.requests:
            started = time.monotonic()
            try:
                result = await self.d.sender.post(row.url, row.secret, str(delivery.id), delivery.payload.encode())
            except Exception as exc:  # a bug in one attempt is a failed attempt
                result = AttemptResult(None, f"{type(exc).__name__}: {exc}"[:500])
            metrics.WEBHOOK_ATTEMPT_SECONDS.observe(time.monotonic() - started)
        attempts = delivery.attempts + 1
        if result.delivered:
            outcome = "delivered"
            give_up = False
            latency = (dt.datetime.now(dt.UTC) - delivery.event_time).total_seconds()
            metrics.WEBHOOK_DELIVERY_LATENCY.observe(max(latency, 0.0))
        elif result.gone:
            outcome = "disabled"
            give_up = True
        else:
            give_up = attempts >= s.webhook_max_attempts
            outcome = "failed" if give_up else "retried"
        error = result.error
        if give_up and not result.gone:
            error = f"gave up after {attempts} attempts: {error}"
        recorded = await self.d.store.record_attempt(
            self.d.owner,
            delivery,
            delivered=result.delivered,
            status_code=result.status_code,
            error=error,
            give_up=give_up,
            retry_in=retry_delay(attempts, s.webhook_retry_base_seconds, s.webhook_retry_max_delay_seconds),
        )
        if not recorded:
            raise SubscriptionLeaseLost(str(row.id))
        metrics.WEBHOOK_DELIVERIES.labels(outcome=outcome).inc()
        log.log(
            logging.INFO if result.delivered else logging.WARNING,
            "webhook attempt",
            extra={
                "webhook_id": str(row.id),
                "delivery_id": str(delivery.id),
                "document_id": str(delivery.document_id),
                "outcome": outcome,
                "status_code": result.status_code,
                "error": result.error,
                "attempt": attempts,
            },
        )
        if result.gone:
            await self.d.store.disable(self.d.owner, row.id, "the receiver answered 410 Gone: the subscription was disabled")
            raise SubscriptionLeaseLost(str(row.id))
