"""Prometheus metrics of the search service (stable names; registered once per process)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

SEARCH_LATENCY = Histogram(
    "sluice_search_latency_seconds",
    "Time to answer one Search call, embedding included.",
    ["mode"],
    buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0),
)
SEARCH_REQUESTS = Counter("sluice_search_requests_total", "Search calls by mode and outcome.", ["mode", "outcome"])
SEARCH_HITS = Counter("sluice_search_hits_total", "Hits returned by Search.", ["mode"])
EXACT_FALLBACKS = Counter(
    "sluice_search_exact_fallbacks_total",
    "Vector searches the HNSW scan answered short and an exact scan completed.",
)
FILTER_PLANS = Counter(
    "sluice_search_filter_plans_total",
    "Filtered vector searches by plan: exact (the filter's chunks scored one by one, few enough) or graph"
    " (the HNSW walk with the filter applied to the chunks it visits).",
    ["plan"],
)
CONSISTENCY_WAIT = Histogram(
    "sluice_search_consistency_wait_seconds",
    "Time a Search with a consistency_token waited for the database to replay it, by outcome: primary (no"
    " wait), replayed (the replica caught up), behind (REPLICA_BEHIND was answered).",
    ["outcome"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0),
)
CONSISTENCY_SKIPPED = Counter(
    "sluice_search_consistency_connections_skipped_total",
    "Connections a Search with a consistency_token took from the pool and handed back unused, their database"
    " not having replayed the token yet (another connection was tried).",
)
