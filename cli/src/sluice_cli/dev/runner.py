"""`sluice-dev` from start to stop: check the ports and the TLS settings, start PostgreSQL,
migrate, make the first keys, start the services, wait until each reports SERVING, print the
banner, supervise until Ctrl-C or SIGTERM, then stop in order: the workers first (they hand
their jobs back), then search and sluice-webhooks (it hands its subscriptions back), then
ingest-api, then PostgreSQL. The pids and restart counts are kept in
$SLUICE_DEV_HOME/dev-status.json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType

from .banner import print_banner
from .ports import dial_address, pick_metrics_ports, port_in_use
from .postgres import REPLICA_DIRECTORY, DevPostgres
from .services import Layout, child_base_env, plan_children
from .supervisor import Supervisor, tail
from .tls import DevTLS

TICK = 0.3
WORKER_SETTLE_SECONDS = 1.0  # workers have no server: a moment to fail on a broken setup
PROBE_TIMEOUT = 1.0


@dataclass
class DevRunner:
    home: Path
    layout: Layout
    metrics_port: int
    stop_timeout: float
    ready_timeout: float
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))  # what the children inherit
    stop_signals: int = 0
    # A streaming standby of PostgreSQL that search reads (--replica; docs/scaling.md).
    replica: bool = False

    def __post_init__(self) -> None:
        self.tls = DevTLS.from_env(self.environ)
        self.supervisor = Supervisor(self.say, self.write_status, self.stop_timeout)
        self.postgres = DevPostgres(self.home, self.say)
        self.standby = (
            DevPostgres(self.home, self.say, directory=REPLICA_DIRECTORY, label="PostgreSQL replica") if self.replica else None
        )
        self.keys: dict[str, str] = {}

    def say(self, message: str = "") -> None:
        print(message, flush=True)

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop_signals += 1
        if self.stop_signals == 1:
            self.say(f"\n{signal.Signals(signum).name}: stopping (press Ctrl-C again to kill at once)…")
        else:
            self.supervisor.kill_all()

    @property
    def stopping(self) -> bool:
        return self.stop_signals > 0

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self.on_signal)
        code = 0
        try:
            code = self.start()
            if code == 0 and not self.stopping:
                code = self.supervise()
        finally:
            self.shutdown()
        return code

    def start(self) -> int:
        problems = self.tls.problems()
        if problems:
            self.say("sluice-dev: the TLS settings do not fit together (docs/operations.md, TLS):")
            for problem in problems:
                self.say(f"  - {problem}")
            return 1
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "logs").mkdir(exist_ok=True)
        layout = self.layout
        for name, port, variable in (
            ("ingest-api", layout.ingest_port, "SLUICE_DEV_INGEST_PORT"),
            ("search", layout.search_port, "SLUICE_DEV_SEARCH_PORT"),
            ("sluice-webhooks", layout.webhooks_port, "SLUICE_DEV_WEBHOOKS_PORT"),
        ):
            if port_in_use(layout.host, port):
                self.say(f"sluice-dev: port {port} for {name} is in use (another `make run`?); choose another with {variable}")
                return 1
        if layout.sources_port and port_in_use(layout.host, layout.sources_port):
            # Sources sync on demand or on a schedule; everything else works without their runner.
            self.say(
                f"sluice-dev: port {layout.sources_port} for sluice-sources is in use: running without it; "
                "choose another with SLUICE_DEV_SOURCES_PORT (0 turns it off)"
            )
            self.layout = layout = replace(layout, sources_port=0)
        if layout.gateway_port and port_in_use(layout.host, layout.gateway_port):
            # The gateway is a convenience in front of the gRPC services, which work without it.
            self.say(
                f"sluice-dev: port {layout.gateway_port} for sluice-gateway (HTTP/JSON) is in use: running without it; "
                "choose another with SLUICE_DEV_GATEWAY_PORT (0 turns it off)"
            )
            self.layout = layout = replace(layout, gateway_port=0)
        database_url = self.postgres.start()
        self.write_status()
        if self.stopping:
            return 0
        # Migrations and the first keys are ingest-api's tools, run as its programs: the CLI
        # imports no service package (the layers are checked by import-linter, `make lint`).
        self.say("applying migrations…")
        if not self.run_tool("sluice-migrate", [], database_url):
            return 1
        if self.stopping:
            return 0
        if not self.run_tool(
            "sluice-bootstrap", ["--credentials", str(self.home / "credentials"), "--tenant", "default"], database_url
        ):
            return 1
        self.keys = json.loads((self.home / "credentials").read_text())["keys"]
        base = child_base_env(self.environ, database_url)
        base.update(self.tls.metrics_env(self.environ))
        search_database_url = self.postgres.search_database_url(database_url)
        if self.standby is not None:
            # search reads the standby as the same read-only login (roles are replicated); the
            # reindex quality gate writes its verdicts, so it keeps the primary.
            from sluice_common.embedded_pg import user_uri

            replica_url = self.standby.start_standby_of(self.postgres)
            self.write_status()
            base.setdefault("SLUICE_SEARCH_EVAL_GATE_DATABASE_URL", search_database_url)
            search_database_url = user_uri(replica_url, "sluice_search")
            if self.stopping:
                return 0
        self.supervisor.start(
            plan_children(
                layout,
                base,
                logs=self.home / "logs",
                metrics_ports=pick_metrics_ports(self.metrics_port, 5 + layout.workers, layout.host),
                search_database_url=search_database_url,
                worker_key=self.keys["worker"],
            )
        )
        return self.wait_until_ready()

    def run_tool(self, script: str, args: list[str], database_url: str) -> bool:
        """Run one of ingest-api's tools (`sluice-migrate`; `sluice-bootstrap`, which makes the
        `default` tenant's admin, client and worker keys once and keeps them in
        $SLUICE_DEV_HOME/credentials, mode 0600, where the `sluice` CLI finds them)."""
        executable = Path(sys.executable).parent / script  # installed beside sluice-dev (make venv)
        env = {**self.environ, "SLUICE_DATABASE_URL": database_url, "SLUICE_LOG_LEVEL": "WARNING"}
        try:
            result = subprocess.run([str(executable), *args], env=env, capture_output=True, text=True)
        except OSError as error:
            self.say(f"sluice-dev: cannot run {executable}: {error} (is ingest-api installed? `make venv`)")
            return False
        if result.returncode != 0:
            self.say(f"sluice-dev: {script} failed (exit code {result.returncode}):\n{(result.stdout + result.stderr)[-3000:]}")
            return False
        return True

    def write_status(self) -> None:
        """Pids and restart counts, for people and for tests that kill processes on purpose."""
        status = {
            "children": {c.name: {"pid": c.pid if c.alive() else None, "restarts": c.restarts} for c in self.supervisor.children},
            "postgres": {"pid": self.postgres.pid, "restarts": self.postgres.restarts},
        }
        if self.standby is not None:
            status["replica"] = {"pid": self.standby.pid, "restarts": self.standby.restarts}
        path = self.home / "dev-status.json"
        try:
            path.with_suffix(".tmp").write_text(json.dumps(status, indent=1))
            path.with_suffix(".tmp").replace(path)
        except OSError:
            pass

    def wait_until_ready(self) -> int:
        """Until every service reports SERVING, asked as its clients reach it (TLS, and a client
        certificate under mutual TLS); then the banner."""
        from sluice_common.health_probe import check_grpc, check_http

        client_tls = self.tls.client_tls()
        deadline = time.monotonic() + self.ready_timeout
        pending = [c for c in self.supervisor.children if c.address]
        last_problem: dict[str, str] = {}
        self.say("waiting for " + ", ".join(c.name for c in pending) + " to report SERVING…")
        while pending:
            if self.stopping:
                return 0
            code = self.supervisor.check()
            if code is not None:
                return code
            if time.monotonic() > deadline:
                self.say(
                    f"sluice-dev: {', '.join(c.name for c in pending)} not SERVING after {self.ready_timeout:.0f} s; "
                    "see the logs:"
                )
                for c in pending:
                    answer = f" (last health check: {last_problem[c.name]})" if c.name in last_problem else ""
                    self.say(f"  {c.log_path}{answer}\n{tail(c.log_path)}")
                return 1
            for child in pending:
                if child.alive():
                    if child.probe_url:
                        problem = check_http(child.probe_url, client_tls, timeout=PROBE_TIMEOUT)
                    else:
                        problem = check_grpc(dial_address(child.address), client_tls, timeout=PROBE_TIMEOUT)
                    child.proven = not problem
                    if problem:
                        last_problem[child.name] = problem
            pending = [c for c in pending if not c.proven]
            if pending:
                time.sleep(TICK)
        settle = time.monotonic() + WORKER_SETTLE_SECONDS
        while time.monotonic() < settle and not self.stopping:
            code = self.supervisor.check()
            if code is not None:
                return code
            time.sleep(0.2)
        print_banner(
            self.say,
            self.supervisor.children,
            home=self.home,
            host=self.layout.host,
            ingest_address=self.layout.ingest_address,
            tls=self.tls.describe(),
            replica=self.standby.pg_dir if self.standby is not None else None,
        )
        return 0

    def supervise(self) -> int:
        while not self.stopping:
            code = self.supervisor.check()
            if code is not None:
                return code
            if self.postgres.watch():
                self.write_status()
            if self.standby is not None and self.standby.watch():
                self.write_status()
            time.sleep(TICK)
        return 0

    def shutdown(self) -> None:
        children = self.supervisor.children
        # Workers first: they hand their jobs back while ingest-api still answers (the gateway,
        # a client too, with them).
        self.supervisor.stop(
            [
                [c for c in children if c.name.startswith("worker-") or c.name == "gateway"],
                [c for c in children if c.name in ("search", "webhooks", "sources")],
                [c for c in children if c.name == "ingest-api"],
            ]
        )
        restarted = [f"{c.name} {c.restarts}" for c in children if c.restarts]
        if self.postgres.restarts:
            restarted.append(f"postgres {self.postgres.restarts}")
        if self.standby is not None and self.standby.restarts:
            restarted.append(f"replica {self.standby.restarts}")
        if self.standby is not None and self.standby.server is not None:
            self.standby.stop()  # before its primary, which it would otherwise keep calling
        if restarted:
            self.say("restarts during this run: " + ", ".join(restarted))
        if self.postgres.server is not None:
            self.postgres.stop()
            self.write_status()
        if children or self.stopping:
            self.say("stopped.")
