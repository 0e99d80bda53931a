"""Prometheus metrics of `sluice-sources` (stable names; docs/sources.md)."""

from prometheus_client import Counter, Histogram

RUNS_ENDED = Counter("sluice_source_runs_total", "Sync runs ended by this runner, by final state", ["state"])
RUN_ITEMS = Counter("sluice_source_items_total", "Items of the sync runs ended by this runner, by outcome", ["outcome"])
RUN_SECONDS = Histogram(
    "sluice_source_run_seconds",
    "Wall time of one attempt of a sync run, claim to end",
    buckets=(0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 14400),
)
LEASES_LOST = Counter("sluice_source_leases_lost_total", "Sync runs this runner stopped because another took them over")
