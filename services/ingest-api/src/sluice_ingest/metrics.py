"""Prometheus metrics of ingest-api (stable names; see README)."""

from prometheus_client import Counter, Gauge, Histogram

UPLOADS = Counter("sluice_uploads_total", "Documents created by UploadDocument")
CLAIMS = Counter("sluice_job_claims_total", "Jobs leased to workers")
COMPLETIONS = Counter("sluice_job_completions_total", "Jobs committed READY")
RETRIES = Counter("sluice_job_retries_total", "Failed attempts scheduled for a retry")
FAILURES = Counter("sluice_job_failures_total", "Jobs failed for good")
LEASE_EXPIRIES = Counter(
    "sluice_job_lease_expiries_total",
    "Expired leases found by claims: reclaimed by another worker, or ended by rule 8",
    ["outcome"],
)
QUEUE_DEPTH = Gauge("sluice_jobs", "Ingestion jobs by status", ["status"])
UPLOADS_ACTIVE = Gauge("sluice_uploads_in_progress", "Upload streams being received now")
UPLOADS_REFUSED = Counter("sluice_uploads_refused_total", "Upload streams refused before or while receiving", ["reason"])
CHUNK_UPDATES = Counter(
    "sluice_chunk_updates_total", "Chunks changed by UpdateChunk: disable, enable, edit (docs/chunks.md)", ["change"]
)
COLLECTION_WATCHERS = Gauge("sluice_collection_watchers", "WatchCollection streams open now")
COLLECTION_EVENTS_SENT = Counter("sluice_collection_events_sent_total", "Events sent on WatchCollection streams (no heartbeats)")
EVENTS_PRUNED = Counter("sluice_events_pruned_total", "Rows removed from the events log by retention", ["rule"])
WEBHOOK_DELIVERIES = Counter(
    "sluice_webhook_attempts_total",
    "Webhook delivery attempts by outcome: delivered, retried, failed (given up), disabled (410 Gone)",
    ["outcome"],
)
WEBHOOK_DELIVERY_LATENCY = Histogram(
    "sluice_webhook_delivery_latency_seconds",
    "From the event's transaction to the receiver's 2xx",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 86400),
)
WEBHOOK_ATTEMPT_SECONDS = Histogram("sluice_webhook_attempt_seconds", "Duration of one webhook request")
WEBHOOK_EVENT_GAPS = Counter(
    "sluice_webhook_event_gaps_total", "Times a subscription found events pruned from the log before it read them"
)
WEBHOOK_SUBSCRIPTIONS_HELD = Gauge(
    "sluice_webhook_subscriptions_held", "Webhook subscriptions this process holds the lease of and delivers"
)
