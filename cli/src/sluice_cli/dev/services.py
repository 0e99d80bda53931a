"""What `sluice-dev` runs: ingest-api, search, the workers, sluice-webhooks and sluice-gateway
(HTTP/JSON, docs/http.md), each with the
settings it needs from sluice-dev (where to listen, the database, the worker key, the metrics
port and interface) on top of the operator's own SLUICE_* environment."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .ports import connect_host
from .supervisor import Child


@dataclass(frozen=True)
class Layout:
    """Where things listen (from the flags)."""

    host: str
    ingest_port: int
    search_port: int
    webhooks_port: int
    workers: int
    gateway_port: int = 0  # sluice-gateway's HTTP port; 0: no gateway
    sources_port: int = 0  # sluice-sources' health service (docs/sources.md); 0: no sources runner

    @property
    def ingest_address(self) -> str:
        """What the workers (and the banner) dial: a wildcard host becomes localhost."""
        return f"{connect_host(self.host)}:{self.ingest_port}"

    @property
    def search_address(self) -> str:
        return f"{connect_host(self.host)}:{self.search_port}"


def gateway_url(layout: Layout, env: Mapping[str, str]) -> str:
    """Where the gateway answers: https when it serves the services' certificate."""
    scheme = "https" if env.get("SLUICE_TLS_CERT_FILE") else "http"
    return f"{scheme}://{connect_host(layout.host)}:{layout.gateway_port}"


def child_base_env(environ: Mapping[str, str], database_url: str) -> dict[str, str]:
    """The environment every child starts from: the operator's, with the embedded run's musts."""
    base = dict(environ)
    base.update(
        {
            "SLUICE_DATABASE_URL": database_url,
            "SLUICE_LOG_JSON": base.get("SLUICE_LOG_JSON", "true"),
            "PYTHONUNBUFFERED": "1",
            # The local embedder and the parsers must never reach for a model hub.
            "HF_HUB_OFFLINE": base.get("HF_HUB_OFFLINE", "1"),
            "TRANSFORMERS_OFFLINE": base.get("TRANSFORMERS_OFFLINE", "1"),
            "TOKENIZERS_PARALLELISM": base.get("TOKENIZERS_PARALLELISM", "false"),
            "XDG_RUNTIME_DIR": base.get("XDG_RUNTIME_DIR", "/tmp"),
        }
    )
    return base


def plan_children(
    layout: Layout, base: dict[str, str], *, logs: Path, metrics_ports: list[int], search_database_url: str, worker_key: str
) -> list[Child]:
    """The children in start order; `metrics_ports` has one port per child (0: no metrics): ingest-api,
    search, the workers, webhooks, sources, gateway.
    Every /metrics endpoint listens on the services' interface (SLUICE_METRICS_HOST)."""
    host = layout.host

    def metrics(port: int) -> dict[str, str]:
        return {"SLUICE_METRICS_PORT": str(port), "SLUICE_METRICS_HOST": host}

    ingest_bind, search_bind, webhooks_bind = (
        f"{host}:{p}" for p in (layout.ingest_port, layout.search_port, layout.webhooks_port)
    )
    children = [
        Child(
            "ingest-api",
            "sluice_ingest.main",
            "sluice-ingest-api",
            {**base, "SLUICE_BIND": ingest_bind, **metrics(metrics_ports[0])},
            logs / "ingest-api.log",
            ingest_bind,
            metrics_ports[0],
        ),
        Child(
            "search",
            "sluice_search.main",
            "sluice-search",
            {
                **base,
                "SLUICE_SEARCH_BIND": search_bind,
                **metrics(metrics_ports[1]),
                "SLUICE_SEARCH_DATABASE_URL": search_database_url,
            },
            logs / "search.log",
            search_bind,
            metrics_ports[1],
        ),
    ]
    for n in range(1, layout.workers + 1):
        default_id = f"{socket.gethostname()}-dev-{n}"
        env = {
            **base,
            "SLUICE_INGEST_ADDRESS": layout.ingest_address,
            "SLUICE_API_KEY": worker_key,
            "SLUICE_WORKER_ID": base.get("SLUICE_WORKER_ID", default_id) if layout.workers == 1 else default_id,
            **metrics(metrics_ports[1 + n]),
        }
        children.append(
            Child(f"worker-{n}", "sluice_worker.main", "sluice-worker", env, logs / f"worker-{n}.log", "", metrics_ports[1 + n])
        )
    # Webhook delivery in a process of its own (ingest-api runs no dispatcher by default). Private
    # and loopback receivers stay refused unless SLUICE_WEBHOOK_ALLOW_PRIVATE_NETWORKS=true is set.
    webhooks_metrics = metrics_ports[2 + layout.workers]
    children.append(
        Child(
            "webhooks",
            "sluice_ingest.webhooks.main",
            "sluice-webhooks",
            {**base, "SLUICE_WEBHOOKS_BIND": webhooks_bind, **metrics(webhooks_metrics)},
            logs / "webhooks.log",
            webhooks_bind,
            webhooks_metrics,
        )
    )
    if layout.sources_port:
        # Sync runs of sources (docs/sources.md). Local folders stay refused unless the operator sets
        # SLUICE_SOURCE_LOCAL_ROOTS, private hosts unless SLUICE_SOURCE_ALLOW_PRIVATE_NETWORKS=true.
        sources_bind = f"{host}:{layout.sources_port}"
        sources_metrics = metrics_ports[3 + layout.workers]
        children.append(
            Child(
                "sources",
                "sluice_ingest.sources.main",
                "sluice-sources",
                {**base, "SLUICE_SOURCES_BIND": sources_bind, **metrics(sources_metrics)},
                logs / "sources.log",
                sources_bind,
                sources_metrics,
            )
        )
    if layout.gateway_port:
        # HTTP/JSON in front of both services (docs/http.md); it holds no key: callers bring theirs.
        # It serves HTTPS with the services' certificate when they serve TLS, and dials them with
        # the CA (and client certificate) of SLUICE_TLS_* like the workers.
        gateway_bind = f"{host}:{layout.gateway_port}"
        gateway_metrics = metrics_ports[4 + layout.workers]
        gateway_env = {
            **base,
            "SLUICE_GATEWAY_BIND": gateway_bind,
            "SLUICE_INGEST_ADDRESS": layout.ingest_address,
            "SLUICE_SEARCH_ADDRESS": layout.search_address,
            **metrics(gateway_metrics),
        }
        children.append(
            Child(
                "gateway",
                "sluice_gateway.main",
                "sluice-gateway",
                gateway_env,
                logs / "gateway.log",
                gateway_bind,
                gateway_metrics,
                probe_url=f"{gateway_url(layout, gateway_env)}/healthz",
            )
        )
    return children
