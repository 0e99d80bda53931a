"""Prometheus metrics of the gateway (stable names; served on SLUICE_METRICS_PORT as the other
services do, docs/operations.md "Metrics" and docs/http.md "Metrics").

`method` is the RPC as `Service.Method` (`SearchService.Search`), or `upload` and `retrieval`
for the gateway's own paths; anything else is `unknown`, so a scan of random paths cannot grow
the label set. `code` is the Connect code of the answer (`ok`, `not_found`, …).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

REQUESTS = Counter(
    "sluice_gateway_requests_total", "HTTP calls answered by the gateway, by RPC and Connect code.", ["method", "code"]
)
LATENCY = Histogram(
    "sluice_gateway_request_latency_seconds",
    "Time from a unary call's arrival to its answer (backend call included); streams are not timed.",
    ["method"],
    buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0),
)
STREAMS_OPEN = Gauge("sluice_gateway_streams_open", "Server streams (SSE or Connect) being forwarded now.", ["method"])
STREAMS_CANCELLED = Counter(
    "sluice_gateway_streams_cancelled_total",
    "Server streams whose HTTP client went away; their backend call was cancelled.",
    ["method"],
)

UNKNOWN = "unknown"
