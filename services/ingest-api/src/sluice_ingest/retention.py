"""Pruning the events log: by age (recording each collection's horizon) and by count per document.

Runs in every ingest-api process, every `events_prune_interval_seconds`; one transaction deletes
at most `events_prune_batch` rows and takes a transaction-level advisory lock, so replicas never
prune at once and no lock is held for long. What is kept (store/events.py has the statements):
- by age: everything newer than `events_retention_seconds`, and each existing document's latest
  event whatever its age (WatchDocument and a later deletion's event build on it). The highest
  log position removed becomes the collection's horizon: WatchCollection refuses cursors below it.
- by count: each document's newest `events_per_document` events; its latest always stays, so a
  watcher that resumes sees every document's final state even if intermediate events are gone.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Protocol

from sluice_common.tasks import end_if_cancelled, pause

from . import metrics
from .settings import IngestSettings

log = logging.getLogger("sluice.ingest.retention")

DOCUMENTS_PER_BATCH = 500


class RetentionPort(Protocol):
    async def prune_events_by_age(self, age_seconds: float, batch: int) -> int | None: ...

    async def count_prune_candidates(self, since_id: int, limit: int) -> list[tuple[uuid.UUID, int]]: ...

    async def prune_events_by_count(self, documents: list[uuid.UUID], keep: int, batch: int) -> int | None: ...


class EventRetention:
    def __init__(self, store: RetentionPort, settings: IngestSettings) -> None:
        self.store = store
        self.settings = settings
        # Documents whose newest event is at or below this id were counted already (this process).
        self._counted_up_to = 0

    async def prune_once(self) -> tuple[int, int]:
        """One full pass; returns (pruned by age, pruned by count)."""
        by_age = await self.prune_by_age()
        metrics.EVENTS_PRUNED.labels(rule="age").inc(by_age)
        by_count = await self.prune_by_count()
        metrics.EVENTS_PRUNED.labels(rule="count").inc(by_count)
        return by_age, by_count

    async def prune_by_age(self) -> int:
        s = self.settings
        if s.events_retention_seconds <= 0:
            return 0
        total = 0
        while True:
            count = await self.store.prune_events_by_age(s.events_retention_seconds, s.events_prune_batch)
            if not count:  # None: another process is pruning right now
                return total
            total += count
            if count < s.events_prune_batch:
                return total
            await asyncio.sleep(0)

    async def prune_by_count(self) -> int:
        s = self.settings
        if s.events_per_document <= 0:
            return 0
        total = 0
        while True:
            candidates = await self.store.count_prune_candidates(self._counted_up_to, DOCUMENTS_PER_BATCH)
            if not candidates:
                return total
            documents = [document_id for document_id, _ in candidates]
            while True:
                count = await self.store.prune_events_by_count(documents, s.events_per_document, s.events_prune_batch)
                if count is None:
                    return total  # another process prunes; come back next time, from the same place
                total += count
                if count < s.events_prune_batch:
                    break
                await asyncio.sleep(0)
            self._counted_up_to = max(newest for _, newest in candidates)

    async def run(self) -> None:
        """Prune now and then every interval, until cancelled; a failed pass is retried next time."""
        while True:
            try:
                by_age, by_count = await self.prune_once()
                if by_age or by_count:
                    log.info("events pruned", extra={"by_age": by_age, "by_count": by_count})
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # pruning must never take the server down
                end_if_cancelled(exc)
                log.warning("events pruning failed", extra={"error": str(exc)})
            await pause(self.settings.events_prune_interval_seconds)
