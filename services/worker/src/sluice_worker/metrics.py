"""Prometheus metrics of the worker (stable names; served when SLUICE_METRICS_PORT is set)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

JOBS_CLAIMED = Counter("sluice_worker_jobs_claimed_total", "Jobs claimed from ingest-api.")
JOBS_SUCCEEDED = Counter("sluice_worker_jobs_succeeded_total", "Jobs completed (document READY).")
JOBS_FAILED = Counter("sluice_worker_jobs_failed_total", "Attempts reported failed through FailJob.", ["error_code", "retryable"])
JOBS_ABANDONED = Counter(
    "sluice_worker_jobs_abandoned_total", "Jobs stopped without writing more (lease lost, cancelled).", ["reason"]
)
JOBS_RELEASED = Counter("sluice_worker_jobs_released_total", "Jobs handed back at shutdown.")
JOBS_IN_FLIGHT = Gauge("sluice_worker_jobs_in_flight", "Jobs this process holds right now.")
SNAPSHOTS_REUSED = Counter("sluice_worker_snapshots_reused_total", "Jobs that resumed from a chunk snapshot.")
STAGE_SECONDS = Histogram(
    "sluice_worker_stage_duration_seconds",
    "Time spent in each pipeline stage.",
    ["stage"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
CHUNKS_PER_DOCUMENT = Histogram(
    "sluice_worker_chunks_per_document",
    "Chunks per completed document.",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000),
)
EMBED_BATCH_SIZE = Histogram(
    "sluice_worker_embed_batch_size", "Texts per embedding call.", ["provider"], buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
)
EMBED_BATCH_SECONDS = Histogram(
    "sluice_worker_embed_batch_seconds",
    "Latency of one embedding call.",
    ["provider"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
