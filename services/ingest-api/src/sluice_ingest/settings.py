"""ingest-api settings (SLUICE_* environment variables)."""

from __future__ import annotations

from sluice_common.settings import CommonSettings


class IngestSettings(CommonSettings):
    bind: str = "localhost:50051"
    # Upload limit; larger uploads are refused with RESOURCE_EXHAUSTED.
    max_upload_bytes: int = 100 * 1024 * 1024
    # An upload stream silent this long between two messages is cancelled (UPLOAD_IDLE_TIMEOUT).
    upload_idle_timeout_seconds: float = 30.0
    # Upload streams received at once by one process; more are refused (TOO_MANY_UPLOADS).
    max_concurrent_uploads: int = 64
    # Bytes of an upload held in memory before it is spooled to a temporary file.
    upload_spool_memory_bytes: int = 64 * 1024
    # Directory of the (already unlinked) upload spool files; empty for the system temp directory.
    upload_spool_dir: str = ""
    # Rule 6: a RUNNING job whose lease is older than this is reclaimable.
    lease_seconds: float = 60.0
    # Rule 7: the first retry waits this long, doubling each attempt, capped at 300 s.
    retry_delay_seconds: float = 5.0
    max_retry_delay_seconds: float = 300.0
    # Defaults of new collections.
    default_max_attempts: int = 3
    default_chunk_max_characters: int = 1500
    default_chunk_new_after_n_chars: int = 1000
    default_chunk_overlap: int = 150
    # Longest ClaimJob long-poll a worker may ask for.
    max_claim_wait_seconds: float = 60.0
    pool_max_size: int = 20
    # The events log (WatchCollection, webhooks): events older than this (7 days) are pruned,
    # except each existing document's latest; a WatchCollection cursor older than what was pruned gets
    # OUT_OF_RANGE (EVENTS_CURSOR_EXPIRED). 0 keeps events forever.
    events_retention_seconds: float = 604800.0
    # Events kept per document (its newest ones; the latest is always kept). 0 keeps them all.
    events_per_document: int = 100
    # How often the pruning runs.
    events_prune_interval_seconds: float = 300.0
    # Most events one pruning transaction deletes (short transactions, short locks).
    events_prune_batch: int = 1000
    # WatchCollection: a quiet stream gets a HEARTBEAT (with the cursor read up to) this often,
    # which also keeps proxies and load balancers from closing it.
    watch_heartbeat_seconds: float = 15.0
    # While committed events wait for an older writer to finish (not readable yet), a watcher
    # reads again this often; otherwise it sleeps until notified.
    watch_recheck_seconds: float = 0.5
    # Index generations (ReindexCollection): how often ingest-api looks for a complete BUILDING
    # generation to switch (a safety net: an EMBED commit switches at once) and for retired ones to drop.
    generation_sweep_seconds: float = 1.0
    # How long a RETIRED generation's chunks and HNSW index stay after the switch, so a search that
    # resolved it just before the switch still finds its rows.
    retired_generation_grace_seconds: float = 30.0
