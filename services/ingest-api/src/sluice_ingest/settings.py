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
    # The largest collection bundle ImportCollection accepts (docs/operations.md, "Moving a
    # collection"); it is spooled to upload_spool_dir before anything is written.
    max_bundle_bytes: int = 64 * 1024 * 1024 * 1024
    # Where exports and imports keep their working folders (docs/bundles.md, "Import"); empty for
    # `sluice-bundles` under upload_spool_dir (or the system temp directory). Each folder goes when
    # its call ends.
    bundle_spool_dir: str = ""
    # At start, ingest-api removes the bundle spool folders older than this that no process holds
    # (left by a killed process).
    bundle_spool_stale_seconds: float = 300.0
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
    # Connections to PostgreSQL. A waiting ClaimJob or Watch* call holds none (it waits for a
    # notification) and an upload holds one only for its commit, so a few per database core serve
    # many workers; more connections only make the busy ones contend (bench/cpu_split.py, 2 cores,
    # 32 concurrent workers: 36 connections 356 cycles/s, 20 432, 10 463).
    pool_max_size: int = 10
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
    # The EMBED commit that completes a reindex builds the new generation's HNSW index before it
    # answers when the generation holds at most this many chunks (seconds of work); a larger one's
    # build (minutes: about 2.5 at 100,000 chunks on 2 cores) runs in the background instead, so
    # that the worker's CompleteJob is not held for it, and the switch follows the build.
    reindex_inline_index_max_chunks: int = 20000

    # Webhooks (docs/webhooks.md): delivery runs in its own process, `sluice-webhooks` (it reads
    # these webhook_* settings too). True also runs the dispatcher inside ingest-api, sharing its
    # CPU and event loop: for the smallest set-ups only. Subscriptions are managed either way.
    webhooks_enabled: bool = False
    # sluice-webhooks: where its gRPC health service (grpc.health.v1, nothing else) listens.
    webhooks_bind: str = "localhost:50053"
    # Let webhook URLs reach private, loopback and link-local addresses (trusted networks, tests).
    webhook_allow_private_networks: bool = False
    # The most webhook subscriptions one collection may have.
    webhook_max_per_collection: int = 10
    # Seconds a webhook request may take to connect.
    webhook_connect_timeout_seconds: float = 5.0
    # Seconds a whole webhook request may take (resolution, connection, answer).
    webhook_timeout_seconds: float = 15.0
    # Attempts of one delivery before it is FAILED (with the retry defaults: about 20 hours).
    webhook_max_attempts: int = 10
    # The n-th retry of a delivery waits base x 4^(n-1) seconds (±20 % jitter): 5 s, 20 s, 80 s…
    webhook_retry_base_seconds: float = 5.0
    # ...capped at this many seconds.
    webhook_retry_max_delay_seconds: float = 6 * 3600.0
    # A replica serving a subscription renews its lease; another takes over once it expires.
    webhook_lease_seconds: float = 30.0
    # Fallback poll of the events log (the collection's NOTIFY wakes deliveries at once).
    webhook_poll_seconds: float = 2.0
    # After a collection's NOTIFY, wait this long for more events before reading the log (batches
    # a burst into one read per subscription).
    webhook_wake_coalesce_seconds: float = 0.005
    # CA certificates (PEM) that https webhook receivers must chain to; empty: the usual public CAs.
    webhook_tls_ca_file: str = ""
    # Webhook requests in flight in this process, over all subscriptions.
    webhook_max_concurrent_requests: int = 64
    # Webhook requests in flight per subscription (each for a different document).
    webhook_max_in_flight_per_subscription: int = 4
    # Subscriptions one replica serves at most.
    webhook_max_subscriptions_per_replica: int = 1000
    # Events read from the log per batch by a subscription.
    webhook_event_batch: int = 200
    # Connections of the dispatcher's own pool.
    webhook_pool_size: int = 4
    # Delivered and failed deliveries are deleted after this many days (pending ones never).
    webhook_delivery_retention_days: float = 7.0

    # Sources (docs/sources.md): the folders a LOCAL_FOLDER source (or a GIT source given as a
    # path) may name, absolute paths separated by ':' (like PATH); empty: no local source at all.
    source_local_roots: str = ""
    # Let S3, HTTP and GIT sources reach private, loopback and link-local addresses (trusted
    # networks, tests). Off: such a source is refused at creation and at every request.
    source_allow_private_networks: bool = False
    # A RUNNING sync run whose runner has not renewed its lease for this long is taken over.
    source_lease_seconds: float = 60.0
    # Claims of one run before it ends FAILED (a runner that keeps dying on it).
    source_max_attempts: int = 3
    # How often an idle runner looks for runs and due schedules.
    source_poll_seconds: float = 2.0
    # A run that would delete more than this share of its collection stops (BLOCKED_MASS_DELETE),
    # unless the source sets its own share or the sync allows it.
    source_default_max_delete_share: float = 0.2
    # HTTP sources: pages listed at most when the source does not say (at most 10,000).
    source_http_default_max_pages: int = 100
    # Seconds one request of a sync run (a page, an object, a listing, a git fetch) may take.
    source_request_timeout_seconds: float = 30.0
    # sluice-sources: where its gRPC health service listens.
    sources_bind: str = "localhost:50054"
