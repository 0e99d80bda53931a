"""`sluice-dev` as a subprocess for the tests that run the `make run` path: free ports for
everything it starts, its output collected line by line, and every process it leaves (the
embedded PostgreSQL included) found and stopped.

    stack = DevStack(home, extra_env={...})
    stack.wait_ready()       # "Sluice is ready.", or the test fails with the output and logs
    stack.stop()             # SIGINT (Ctrl-C); the exit code
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from helpers import free_port, quiet_port_block

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
READY_TIMEOUT = 150


class DevStack:
    """One `sluice-dev` process on 127.0.0.1 with its output collected line by line."""

    def __init__(self, home: Path, extra_env: dict[str, str] | None = None) -> None:
        self.home = home
        self.ingest = f"127.0.0.1:{free_port()}"
        self.search = f"127.0.0.1:{free_port()}"
        self.gateway_port = free_port()  # sluice-gateway (HTTP/JSON); never 8080 beside `make run`
        self.env = {
            **os.environ,
            "SLUICE_DEV_HOME": str(home),
            "SLUICE_DEV_HOST": "127.0.0.1",
            "SLUICE_DEV_INGEST_PORT": self.ingest.rsplit(":", 1)[1],
            "SLUICE_DEV_SEARCH_PORT": self.search.rsplit(":", 1)[1],
            "SLUICE_DEV_WEBHOOKS_PORT": str(free_port()),
            "SLUICE_DEV_SOURCES_PORT": str(free_port()),
            "SLUICE_DEV_GATEWAY_PORT": str(self.gateway_port),
            # One per service and worker, counted up from this one (sluice_cli.dev.ports).
            "SLUICE_DEV_METRICS_PORT": str(quiet_port_block(8)),
            "SLUICE_DEV_WORKERS": "1",
            "SLUICE_SHUTDOWN_GRACE_SECONDS": "5",
            # A stopping worker waits out its ClaimJob long-poll; keep it short here.
            "SLUICE_CLAIM_WAIT_SECONDS": "1",
            "SLUICE_INGEST_ADDRESS": self.ingest,
            "SLUICE_SEARCH_ADDRESS": self.search,
            **(extra_env or {}),
        }
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.process = subprocess.Popen(
            [str(VENV_BIN / "sluice-dev")], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("Sluice is ready."):
                self.ready.set()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted((self.home / "logs").glob("*.log"))
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.ready.wait(0.2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(
                    f"sluice-dev did not become ready:\n{self.output}\n{self.logs() if (self.home / 'logs').exists() else ''}"
                )
        time.sleep(0.5)  # the banner's remaining lines

    def children(self) -> list[psutil.Process]:
        """The services sluice-dev runs now."""
        try:
            return psutil.Process(self.process.pid).children()
        except psutil.NoSuchProcess:
            return []

    def listening(self) -> set[tuple[str, int]]:
        """(address, port) of every socket the services listen on (gRPC and /metrics)."""
        found = set()
        for child in self.children():
            try:
                connections = child.net_connections(kind="inet")
            except psutil.NoSuchProcess:
                continue
            for connection in connections:
                if connection.status == psutil.CONN_LISTEN:
                    found.add((connection.laddr.ip.removeprefix("::ffff:"), connection.laddr.port))
        return found

    def processes(self) -> list[psutil.Process]:
        """sluice-dev, its children, and the embedded PostgreSQL (which pg_ctl detached)."""
        found = []
        try:
            root = psutil.Process(self.process.pid)
            found = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
        pid_file = self.home / "pg" / "postmaster.pid"
        if pid_file.exists():
            postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
            found += [postmaster, *postmaster.children(recursive=True)]
        return found

    def stop(self, sig=signal.SIGINT, timeout: float = 90) -> int:
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"sluice-dev did not stop within {timeout} s:\n{self.output}")

    def kill(self) -> None:
        for proc in self.processes():
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
