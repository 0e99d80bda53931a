"""What `sluice-dev` prints once everything is ready: where each service listens, its pid,
log and metrics, where PostgreSQL and the keys are, and the first commands to try."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from .supervisor import Child


def cli_command() -> str:
    """How to call `sluice` from the user's shell: plain when it is on PATH, else its path."""
    installed = Path(sys.executable).parent / "sluice"
    on_path = shutil.which("sluice")
    if on_path and Path(on_path).resolve() == installed.resolve():
        return "sluice"
    try:
        return str(installed.relative_to(Path.cwd()))
    except ValueError:
        return str(installed)


def metrics_url(child: Child, host: str) -> str:
    """The child's /metrics URL, https when it serves TLS (SLUICE_METRICS_TLS_CERT_FILE)."""
    scheme = "https" if child.env.get("SLUICE_METRICS_TLS_CERT_FILE") else "http"
    return f"{scheme}://{host}:{child.metrics_port}/metrics"


def print_banner(
    say: Callable[[str], None],
    children: list[Child],
    *,
    home: Path,
    host: str,
    ingest_address: str,
    tls: str,
    replica: Path | None = None,
) -> None:
    say("")
    say("Sluice is ready.")
    for child in children:
        listen = child.address or f"→ ingest-api {ingest_address}"
        if child.name in ("webhooks", "sources"):
            listen = f"{child.address} (health)"
        if child.probe_url:  # the gateway: its URL, HTTP/JSON and /openapi.json (docs/http.md)
            listen = child.probe_url.removesuffix("/healthz")
        metrics = f"  metrics {metrics_url(child, host)}" if child.metrics_port else ""
        say(f"  {child.name:<11} {listen:<28} pid {child.pid:<7} log {child.log_path}{metrics}")
    say(f"  {'postgres':<11} {home / 'pg'} (unix socket; URL in {home / 'database_url'})")
    if replica is not None:
        say(
            f"  {'replica':<11} {replica} (streaming standby of postgres; search reads it; URL in {home / 'replica_url'};"
            " pass Document.consistency_token to search to read your writes: docs/scaling.md)"
        )
    say(f"  {'keys':<11} {home / 'credentials'} (tenant default: admin, client and worker keys; `sluice` reads them from there)")
    if tls:
        say(f"  {'tls':<11} {tls}")
    say("")
    cli = cli_command()
    say(f"Logs: {home / 'logs'}/*.log (JSON lines). Try:")
    say(f"  {cli} collections create docs")
    say(f"  {cli} upload ./examples/docs --collection docs")
    say(f'  {cli} search "how do I scale workers" --collection docs')
    gateway = next((c for c in children if c.name == "gateway"), None)
    if gateway is not None:
        say(
            f"HTTP/JSON (any language, curl): {gateway.probe_url.removesuffix('/healthz')}/openapi.json lists every call "
            "(docs/http.md); send a key as `Authorization: Bearer …`."
        )
    say("Stop with Ctrl-C.")
