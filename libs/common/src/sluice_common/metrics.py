"""Prometheus metrics endpoint, started when SLUICE_METRICS_PORT is set."""

from __future__ import annotations

from prometheus_client import start_http_server


def start_metrics_server(port: int) -> None:
    if port:
        start_http_server(port)
