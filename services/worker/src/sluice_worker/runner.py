"""The worker loop: claim jobs (long-poll), run N at once, renew each one's lease, shut down cleanly.

* A slot is taken before claiming, so a process never holds more leases than it can work on.
* Each job runs as its own task beside a task that renews its lease every lease_seconds / 3
  (lease_renewals_per_lease). When a renewal learns that the job was cancelled (document deleted)
  or that the lease is gone, it cancels the job's task at once: the job writes nothing more.
* Stop (SIGTERM): claiming stops; jobs in hand get `shutdown_grace_seconds` to finish; the
  rest are cancelled and handed back with ReleaseJob, which does not charge the attempt.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field

import structlog
from sluice_common import tracing

from sluice_worker import metrics
from sluice_worker.domain import IngestUnavailable, JobLeaseLost
from sluice_worker.jobs_client import JobClient
from sluice_worker.pipeline import Job, JobPipeline, JobResult
from sluice_worker.settings import WorkerSettings

log = logging.getLogger("sluice.worker")


@dataclass
class ActiveJob:
    job: Job
    task: asyncio.Task[JobResult] | None = None
    # Why the job's task was cancelled: "cancelled", "lease_lost", "lease_expired" or "released".
    stop_reason: str = ""
    result: JobResult | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Worker:
    def __init__(self, client: JobClient, pipeline: JobPipeline, settings: WorkerSettings) -> None:
        self.client = client
        self.pipeline = pipeline
        self.settings = settings
        self.active: dict[str, ActiveJob] = {}
        # The most recent outcomes (for tests and diagnostics); bounded for a long-running process.
        self.results: collections.deque[JobResult] = collections.deque(maxlen=1000)
        self._stop = asyncio.Event()
        self._stop_time: float | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def request_stop(self) -> None:
        if not self._stop.is_set():
            log.info("stop requested: no more claims, finishing the jobs in hand", extra={"jobs": len(self.active)})
            self._stop_time = time.monotonic()
            self._stop.set()

    async def run(self) -> None:
        slots = asyncio.Semaphore(max(1, self.settings.worker_concurrency))
        try:
            while not self.stopping:
                if not await self._wait_for(slots.acquire()):
                    break
                job = await self._claim()
                if job is None:
                    slots.release()
                    continue
                if self.stopping:
                    # Claimed while the stop came in: hand it straight back.
                    await self._release(job)
                    slots.release()
                    break
                handler = asyncio.create_task(self._handle(job, slots), name=f"job-{job.lease.job_id}")
                self._handlers.add(handler)
                handler.add_done_callback(self._handlers.discard)
        finally:
            await self._drain()

    async def _wait_for(self, awaitable: Awaitable[object]) -> bool:
        """Await `awaitable` unless a stop comes first; True when it completed."""
        task = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if task.done():
            return True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False

    async def _claim(self) -> Job | None:
        # A stop cancels the long-poll at once instead of waiting out claim_wait_seconds. In the
        # rare race where the server commits the claim just as the call is cancelled, the job's
        # lease simply expires and another worker takes it over.
        claim_started_ns = time.time_ns()
        claim = asyncio.ensure_future(self.client.claim_job(self.settings.worker_id, self.settings.claim_wait_seconds))
        try:
            if not await self._wait_for(claim):
                return None
            job = claim.result()
        except IngestUnavailable as exc:
            log.warning("cannot claim jobs, ingest-api unreachable", extra={"detail": str(exc)})
            await self._wait_for(asyncio.sleep(self.settings.claim_error_backoff_seconds))
            return None
        if job is not None:
            metrics.JOBS_CLAIMED.inc()
            # The claim is the first span of the job in the upload's trace (ClaimJob long-polls
            # themselves are not traced: most return nothing).
            tracing.record_span(
                "sluice.worker.claim",
                dict(job.trace_context),
                claim_started_ns,
                time.time_ns(),
                **{"sluice.job_id": job.lease.job_id, "sluice.worker_id": self.settings.worker_id},
            )
        return job

    async def _handle(self, job: Job, slots: asyncio.Semaphore) -> None:
        structlog.contextvars.bind_contextvars(
            job_id=job.lease.job_id, document_id=job.document_id, attempt=job.attempt, collection=job.collection
        )
        active = ActiveJob(job)
        self.active[job.lease.job_id] = active
        metrics.JOBS_IN_FLIGHT.inc()
        renewing: asyncio.Task[None] | None = None
        try:
            log.info("job claimed", extra={"file_name": job.filename, "max_attempts": job.max_attempts})
            active.task = asyncio.create_task(self.pipeline.run(job))
            renewing = asyncio.create_task(self._renew_lease(active))
            await asyncio.wait({active.task})
            if active.task.cancelled():
                if active.stop_reason == "released":
                    await self._release(job)
                else:
                    log.info("job stopped", extra={"reason": active.stop_reason})
                    metrics.JOBS_ABANDONED.labels(reason=active.stop_reason or "unknown").inc()
                active.result = JobResult("released" if active.stop_reason == "released" else "abandoned")
            else:
                active.result = active.task.result()
            self.results.append(active.result)
        except Exception:  # never lose a slot to a bug; the lease will expire
            log.exception("job handler failed")
        finally:
            if renewing is not None:
                renewing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewing
            del self.active[job.lease.job_id]
            metrics.JOBS_IN_FLIGHT.dec()
            active.done.set()
            slots.release()

    async def _renew_lease(self, active: ActiveJob) -> None:
        job = active.job
        lease_seconds = job.lease_seconds or 60.0
        interval = max(0.05, lease_seconds / self.settings.lease_renewals_per_lease)
        last_renewed = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            try:
                cancelled = await self.client.renew_lease(job.lease)
            except JobLeaseLost:
                self._stop_job(active, "lease_lost")
                return
            except IngestUnavailable as exc:
                # Keep trying while the lease may still be ours; past its end it is not.
                if time.monotonic() - last_renewed >= lease_seconds:
                    log.warning("lease could not be renewed before it expired", extra={"detail": str(exc)})
                    self._stop_job(active, "lease_expired")
                    return
                continue
            last_renewed = time.monotonic()
            if cancelled:
                self._stop_job(active, "cancelled")
                return

    def _stop_job(self, active: ActiveJob, reason: str) -> None:
        if active.task is not None and not active.task.done():
            active.stop_reason = active.stop_reason or reason
            active.task.cancel()

    async def _release(self, job: Job) -> None:
        try:
            await self.client.release_job(job.lease)
            metrics.JOBS_RELEASED.inc()
            log.info("job handed back", extra={"job_id": job.lease.job_id})
        except (JobLeaseLost, IngestUnavailable) as exc:
            log.info("could not hand the job back; its lease will expire", extra={"detail": str(exc)})

    async def _drain(self) -> None:
        handlers = set(self._handlers)
        if not handlers:
            return
        grace = self.settings.shutdown_grace_seconds
        remaining = grace - (time.monotonic() - (self._stop_time or time.monotonic()))
        if remaining > 0:
            await asyncio.wait(handlers, timeout=remaining)
        for active in list(self.active.values()):
            self._stop_job(active, "released")
        if handlers:
            await asyncio.gather(*handlers, return_exceptions=True)
