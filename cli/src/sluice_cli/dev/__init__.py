"""`sluice-dev` (behind `make run`): the whole system on one machine, no Docker, no network.

Starts an embedded PostgreSQL with pgvector (data kept in $SLUICE_DEV_HOME/pg, default
./.sluice/pg), creates the database "sluice", applies the migrations, then runs ingest-api,
search, the webhook dispatcher (`sluice-webhooks`), the HTTP/JSON gateway (`sluice-gateway`,
docs/http.md) and $SLUICE_DEV_WORKERS workers as child
processes with their logs in $SLUICE_DEV_HOME/logs. It waits until each gRPC service reports
SERVING, prints where everything listens, supervises what it started (restarts, crash loops,
PostgreSQL), and on Ctrl-C or SIGTERM stops everything in order. Nothing is lost across a
restart: jobs are leased in the database, so work a stopped worker had in hand is claimed
again on the next run.

One idea a module: `runner` (start to stop), `services` (what runs, with which settings),
`supervisor` (children and their restarts), `postgres` (the embedded database and its
watch), `ports`, `tls` (TLS and mutual TLS, docs/operations.md) and `banner`.

Environment (flags override): SLUICE_DEV_HOME, SLUICE_DEV_HOST, SLUICE_DEV_INGEST_PORT
(50051), SLUICE_DEV_SEARCH_PORT (50052), SLUICE_DEV_WEBHOOKS_PORT (50053, sluice-webhooks'
health service), SLUICE_DEV_GATEWAY_PORT (8080; 0: no gateway; busy: run without it),
SLUICE_DEV_WORKERS (1), SLUICE_DEV_METRICS_PORT (first Prometheus port, 9464;
0 disables metrics; they listen on SLUICE_DEV_HOST too), SLUICE_DEV_STOP_TIMEOUT (seconds, 30),
SLUICE_DEV_READY_TIMEOUT (seconds, 180), SLUICE_DEV_REPLICA (1: start a streaming replica of the
embedded PostgreSQL and point search at it, like --replica; docs/scaling.md). Every other SLUICE_* variable reaches the services;
the SLUICE_TLS_* ones also decide how sluice-dev checks that they are ready.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .postgres import forget_dead_handles
from .runner import DevRunner
from .services import Layout

__all__ = ["build_parser", "forget_dead_handles", "main"]  # forget_dead_handles: tests/cli/test_cli.py


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value.strip() else default
    except ValueError:
        raise SystemExit(f"sluice-dev: {name} must be a number, got {value!r}") from None


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    try:
        return float(value) if value.strip() else default
    except ValueError:
        raise SystemExit(f"sluice-dev: {name} must be a number, got {value!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice-dev", description=(__doc__ or "").split("\n\n")[0], epilog="Stop with Ctrl-C.")
    parser.add_argument(
        "--home",
        default=os.environ.get("SLUICE_DEV_HOME", ".sluice"),
        help="data and logs (env SLUICE_DEV_HOME, default ./.sluice)",
    )
    parser.add_argument(
        "--host",
        default=os.environ.get("SLUICE_DEV_HOST", "localhost"),
        help="interface to listen on, metrics included (env SLUICE_DEV_HOST)",
    )
    parser.add_argument("--ingest-port", type=int, default=_env_int("SLUICE_DEV_INGEST_PORT", 50051))
    parser.add_argument("--search-port", type=int, default=_env_int("SLUICE_DEV_SEARCH_PORT", 50052))
    parser.add_argument(
        "--webhooks-port",
        type=int,
        default=_env_int("SLUICE_DEV_WEBHOOKS_PORT", 50053),
        help="sluice-webhooks' health service (env SLUICE_DEV_WEBHOOKS_PORT)",
    )
    parser.add_argument(
        "--sources-port",
        type=int,
        default=_env_int("SLUICE_DEV_SOURCES_PORT", 50054),
        help="sluice-sources' health service; 0 runs no sources runner (env SLUICE_DEV_SOURCES_PORT)",
    )
    parser.add_argument(
        "--gateway-port",
        type=int,
        default=_env_int("SLUICE_DEV_GATEWAY_PORT", 8080),
        help="sluice-gateway's HTTP/JSON port; 0 runs no gateway (env SLUICE_DEV_GATEWAY_PORT)",
    )
    parser.add_argument(
        "--workers", type=int, default=_env_int("SLUICE_DEV_WORKERS", 1), help="worker processes (env SLUICE_DEV_WORKERS)"
    )
    parser.add_argument(
        "--metrics-port", type=int, default=_env_int("SLUICE_DEV_METRICS_PORT", 9464), help="first Prometheus port; 0 disables"
    )
    parser.add_argument("--stop-timeout", type=float, default=_env_float("SLUICE_DEV_STOP_TIMEOUT", 30.0))
    parser.add_argument(
        "--replica",
        action=argparse.BooleanOptionalAction,
        default=os.environ.get("SLUICE_DEV_REPLICA", "").strip().lower() in ("1", "true", "yes", "on"),
        help="also start a streaming replica of PostgreSQL and point search at it (env SLUICE_DEV_REPLICA=1)",
    )
    parser.add_argument("--ready-timeout", type=float, default=_env_float("SLUICE_DEV_READY_TIMEOUT", 180.0))
    return parser


def main(argv: list[str] | None = None) -> None:
    # sluice-dev restarts PostgreSQL (pg_ctl, a fork) while its gRPC health checks run: gRPC's
    # fork handlers would crash that child, so they are off before grpc is first imported (no
    # module of this package imports it at load). The children are new programs (exec) and do
    # not inherit the setting.
    inherited = dict(os.environ)
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    import warnings

    # platformdirs complains about a world-writable XDG_RUNTIME_DIR=/tmp; harmless here.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    args = build_parser().parse_args(argv)
    if args.workers < 0:
        raise SystemExit("sluice-dev: --workers must be 0 or more")
    runner = DevRunner(
        home=Path(args.home).expanduser().resolve(),
        layout=Layout(
            args.host, args.ingest_port, args.search_port, args.webhooks_port, args.workers, args.gateway_port, args.sources_port
        ),
        metrics_port=args.metrics_port,
        stop_timeout=args.stop_timeout,
        ready_timeout=args.ready_timeout,
        environ=inherited,
        replica=args.replica,
    )
    sys.exit(runner.run())
