"""Prometheus metrics of ingest-api (stable names; see README)."""

from prometheus_client import Counter, Gauge

UPLOADS = Counter("sluice_uploads_total", "Documents created by UploadDocument")
CLAIMS = Counter("sluice_job_claims_total", "Jobs leased to workers")
COMPLETIONS = Counter("sluice_job_completions_total", "Jobs committed READY")
RETRIES = Counter("sluice_job_retries_total", "Failed attempts scheduled for a retry")
FAILURES = Counter("sluice_job_failures_total", "Jobs failed for good")
QUEUE_DEPTH = Gauge("sluice_jobs", "Ingestion jobs by status", ["status"])
