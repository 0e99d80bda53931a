"""The sources runner: claims sync runs and carries them out (docs/sources.md, "A sync run").

A run, under its lease (renewed every third of SLUICE_SOURCE_LEASE_SECONDS):

1. lists the source, sorted by source_uri;
2. the first time (not after a takeover): counts the documents of the source's items that the
   listing no longer has, and stops BLOCKED_MASS_DELETE, deleting and uploading nothing, when
   that is a mass deletion the sync did not allow (domain.is_mass_delete);
3. walks the items after its checkpoint, in order: an item whose fingerprint and uploaded
   content are unchanged is not read; otherwise it is read and hashed, and uploaded as a new
   document or version through the same use case as UploadDocument unless the collection
   already serves that content. Every few items one fenced transaction writes the counts, the
   checkpoint (the last source_uri done) and the items;
4. deletes, through DeleteDocument's use case (by collection and source_uri), the documents of
   the items no listing of this run saw, then ends SUCCEEDED.

Uploads and deletions carry the run's fence (their transaction checks the lease), so a runner
whose lease was taken over writes nothing. A runner that dies leaves a RUNNING run whose lease
expires; the next claim resumes it after its checkpoint, and since an upload of content the
source already serves returns the existing version, an item done just before the crash is not
duplicated.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from sluice_common.errors import LeaseNotHeld, NotFound, SluiceError, Unavailable
from sluice_common.tasks import end_if_cancelled

from .. import uploads
from ..domain import JobPriority
from ..service.documents import DocumentUseCases, UploadMeta
from ..settings import IngestSettings
from . import metrics
from .domain import ListedItem, RunState, is_mass_delete, unchanged_without_reading
from .kinds import reader_for
from .reader import ItemVanished, Reader, SourceUnavailable
from .store import ClaimedRun, Progress, RunStore

log = logging.getLogger("sluice.sources")

# A checkpoint is written after this many items or this many seconds, whichever comes first.
CHECKPOINT_ITEMS = 50
CHECKPOINT_SECONDS = 1.0
# A checkpoint (or a deletion) also writes a PROGRESS event to the collection's events log
# (WatchCollection, webhooks) when this long has passed since the run's last one; the checkpoint
# that ends the walk over the items always does.
PROGRESS_EVENT_SECONDS = 2.0
# Items read and uploaded at once (the upload limit and the pool bound what this costs).
ITEMS_AT_ONCE = 4
PIECE = 256 * 1024


async def pieces_of(data: bytes, sha256: str) -> AsyncIterator[bytes | uploads.Trailer]:
    for start in range(0, len(data), PIECE):
        yield data[start : start + PIECE]
    yield uploads.Trailer(len(data), sha256)


class Runner:
    def __init__(self, settings: IngestSettings, runs: RunStore, documents: DocumentUseCases) -> None:
        self.settings = settings
        self.runs = runs
        self.documents = documents

    async def run_forever(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            worked = False
            try:
                worked = await self.run_once()
            except Exception as exc:  # a database outage: the next round tries again
                end_if_cancelled(exc)
                log.warning("sources runner round failed", extra={"error": str(exc)})
            if not worked:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), self.settings.source_poll_seconds)

    async def run_once(self) -> bool:
        """Queue due schedules, then claim and carry out one run; False when there was none."""
        scheduled = await self.runs.schedule_due(self.settings.source_max_attempts)
        if scheduled:
            log.info("scheduled source syncs queued", extra={"count": scheduled})
        claimed = await self.runs.claim()
        if claimed is None:
            return False
        await self.carry_out(claimed)
        return True

    async def carry_out(self, claimed: ClaimedRun) -> None:
        extra = {"run_id": str(claimed.run.id), "source_id": str(claimed.source.id), "attempt": claimed.run.attempts}
        log.info("source sync run claimed", extra={**extra, "resuming_after": claimed.run.checkpoint.get("after")})
        started = time.monotonic()
        work = asyncio.create_task(self._sync(claimed), name=f"source-run-{claimed.run.id}")
        renewing = asyncio.create_task(self._renew_lease(claimed), name=f"source-lease-renewal-{claimed.run.id}")
        try:
            await asyncio.wait({work, renewing}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # Stopping (SIGTERM): hand the run back uncharged; the next runner resumes it.
            renewing.cancel()
            work.cancel()
            await asyncio.gather(work, renewing, return_exceptions=True)
            await asyncio.shield(self.runs.give_up(claimed, "", charge=False))
            log.info("source sync run handed back", extra=extra)
            raise
        renewing.cancel()
        if not work.done():
            work.cancel()
        await asyncio.gather(work, renewing, return_exceptions=True)
        metrics.RUN_SECONDS.observe(time.monotonic() - started)
        if work.cancelled() or isinstance(work.exception(), LeaseNotHeld):
            metrics.LEASES_LOST.inc()
            log.warning("source sync run lost its lease; another runner goes on", extra=extra)
            return
        error = work.exception()
        if error is not None:
            log.error("source sync run failed unexpectedly", extra={**extra, "error": repr(error)})
            await self.runs.give_up(claimed, "the sync stopped on an internal error (the runner's log has it)", charge=True)

    async def _finish(self, claimed: ClaimedRun, state: RunState, progress: Progress, checkpoint: dict[str, Any]) -> bool:
        finished = await self.runs.finish(claimed, state, progress, checkpoint)
        if finished:
            metrics.RUNS_ENDED.labels(state=str(state)).inc()
            for outcome in ("uploaded", "unchanged", "deleted", "failed"):
                metrics.RUN_ITEMS.labels(outcome=outcome).inc(getattr(progress, outcome))
        return finished

    async def _renew_lease(self, claimed: ClaimedRun) -> None:
        interval = self.settings.source_lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            try:
                await self.runs.renew(claimed)
            except LeaseNotHeld:
                raise  # ends the run: another runner holds it
            except Exception as exc:  # a database blip: the next renewal tries again
                end_if_cancelled(exc)
                log.warning("source run lease renewal failed", extra={"run_id": str(claimed.run.id), "error": str(exc)})

    async def _sync(self, claimed: ClaimedRun) -> None:
        reader = reader_for(claimed.source.kind, claimed.source.spec, self.settings)
        try:
            await self._sync_with(claimed, reader)
        finally:
            await reader.close()

    async def _sync_with(self, claimed: ClaimedRun, reader: Reader) -> None:
        run, source = claimed.run, claimed.source
        checkpoint: dict[str, Any] = dict(run.checkpoint)
        progress = Progress(run.listed, run.uploaded, run.unchanged, run.deleted, run.failed, run.would_delete, run.error_message)
        try:
            items = await reader.list_items()
        except SourceUnavailable as err:
            progress = replace(progress, error_message=f"the source could not be listed: {err}")
            await self._finish(claimed, RunState.FAILED, progress, checkpoint)
            log.info("source sync run failed", extra={"run_id": str(run.id), "error": str(err)})
            return
        progress = replace(progress, listed=len(items))
        if not checkpoint.get("checked"):
            listed = {i.source_uri for i in items}
            gone, source_items, collection_sources = await self.runs.gone_items(claimed, listed)
            progress = replace(progress, would_delete=len(gone))
            if not run.allow_mass_delete and is_mass_delete(len(gone), source_items, collection_sources, source.max_delete_share):
                share = len(gone) / max(collection_sources, 1)
                message = (
                    f"this sync would delete {len(gone)} of the collection's {collection_sources} documents"
                    f" ({share:.0%}; the source's limit is {source.max_delete_share:.0%}): nothing was uploaded"
                    " or deleted; if the items are really gone, sync again allowing it (allow_mass_delete,"
                    " `sluice sources sync --allow-mass-delete`)"
                )
                await self._finish(claimed, RunState.BLOCKED_MASS_DELETE, replace(progress, error_message=message), checkpoint)
                log.info("source sync run blocked", extra={"run_id": str(run.id), "would_delete": len(gone)})
                return
            checkpoint["checked"] = True
        await self._walk(claimed, reader, items, checkpoint, progress)

    async def _walk(
        self,
        claimed: ClaimedRun,
        reader: Reader,
        items: list[ListedItem],
        checkpoint: dict[str, Any],
        progress: Progress,
    ) -> None:
        known = await self.runs.known_items(claimed.source.id)
        live = await self.runs.live_shas(claimed.source.collection_id)
        after = checkpoint.get("after")
        done: list[tuple[str, str, str]] = []
        seen: list[str] = []
        last_flush = last_event = time.monotonic()
        fence = self.runs.fence(claimed)
        todo = [item for item in items if after is None or item.source_uri > after]
        # A few items at once (reads and uploads overlap); the checkpoint moves only past a whole
        # group, so every item before it is done.
        for start in range(0, len(todo), ITEMS_AT_ONCE):
            group = todo[start : start + ITEMS_AT_ONCE]
            outcomes = await asyncio.gather(
                *(
                    self._bring_up_to_date(
                        claimed, reader, item, known.get(item.source_uri), live.get(item.source_uri, set()), fence
                    )
                    for item in group
                )
            )
            for item, (record, failure) in zip(group, outcomes, strict=True):
                if record is not None:
                    done.append(record[0])
                    if record[1]:
                        progress = replace(progress, uploaded=progress.uploaded + 1)
                    else:
                        progress = replace(progress, unchanged=progress.unchanged + 1)
                elif failure is not None:
                    progress = replace(
                        progress,
                        failed=progress.failed + 1,
                        error_message=progress.error_message or f"{item.source_uri[:200]}: {failure}",
                    )
                    if item.source_uri in known:
                        seen.append(item.source_uri)  # not deleted for a failed read
            checkpoint["after"] = group[-1].source_uri
            if len(done) + len(seen) >= CHECKPOINT_ITEMS or time.monotonic() - last_flush >= CHECKPOINT_SECONDS:
                event = time.monotonic() - last_event >= PROGRESS_EVENT_SECONDS
                await self.runs.checkpoint(claimed, checkpoint, progress, done, seen, progress_event=event)
                done, seen, last_flush = [], [], time.monotonic()
                if event:
                    last_event = last_flush
        checkpoint["listing_done"] = True
        await self.runs.checkpoint(claimed, checkpoint, progress, done, seen, progress_event=True)
        await self._delete_gone(claimed, checkpoint, progress, fence)

    async def _bring_up_to_date(
        self,
        claimed: ClaimedRun,
        reader: Reader,
        item: ListedItem,
        known: Any,
        live_shas: set[str],
        fence: Any,
    ) -> tuple[tuple[tuple[str, str, str], bool] | None, str | None]:
        """((source_uri, fingerprint, sha256), uploaded) for the item's record, or a failure."""
        if unchanged_without_reading(item, known, live_shas):
            return ((item.source_uri, item.fingerprint, known.content_sha256), False), None
        try:
            data = await reader.read(item)
        except ItemVanished:
            return None, None  # gone since the listing: not seen, so deleted below like any gone item
        except SourceUnavailable as err:
            return None, str(err)
        if len(data) > self.settings.max_upload_bytes:
            return None, f"larger than the upload limit of {self.settings.max_upload_bytes} bytes"
        sha = hashlib.sha256(data).hexdigest()
        if sha in live_shas:
            return ((item.source_uri, item.fingerprint, sha), False), None
        mime_type = reader.mime_type_of(item) if hasattr(reader, "mime_type_of") else item.mime_type
        meta = UploadMeta(
            collection=claimed.source.collection,
            filename=item.filename,
            mime_type=mime_type,
            source_uri=item.source_uri,
            fence=fence,
            priority=JobPriority.BULK,  # a sync is bulk work (docs/tenancy.md, "Priorities")
        )
        try:
            _, created = await self.documents.upload_document(claimed.source.tenant_id, meta, pieces_of(data, sha))
        except (LeaseNotHeld, Unavailable, NotFound):
            raise  # the run's, not the item's: lease lost, database down, collection gone
        except SluiceError as err:
            return None, err.message  # this item refused (too large, empty, quota…): the run goes on
        return ((item.source_uri, item.fingerprint, sha), created), None

    async def _delete_gone(self, claimed: ClaimedRun, checkpoint: dict[str, Any], progress: Progress, fence: Any) -> None:
        gone = await self.runs.unseen_items(claimed)
        last_event = time.monotonic()
        for source_uri in gone:
            with contextlib.suppress(NotFound):  # deleted by hand already: only the record goes
                await self.documents.delete_document(
                    claimed.source.tenant_id, "", claimed.source.collection, source_uri, fence=fence
                )
            event = time.monotonic() - last_event >= PROGRESS_EVENT_SECONDS
            await self.runs.forget_item(claimed, source_uri, progress_event=event)
            if event:
                last_event = time.monotonic()
            progress = replace(progress, deleted=progress.deleted + 1)
        finished = await self._finish(claimed, RunState.SUCCEEDED, progress, checkpoint)
        log.info(
            "source sync run finished" if finished else "source sync run lost its lease at the end",
            extra={
                "run_id": str(claimed.run.id),
                "listed": progress.listed,
                "uploaded": progress.uploaded,
                "unchanged": progress.unchanged,
                "deleted": progress.deleted,
                "failed": progress.failed,
            },
        )


__all__ = ["Runner"]
