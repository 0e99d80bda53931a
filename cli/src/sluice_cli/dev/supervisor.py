"""The supervisor of `sluice-dev`: runs the services as child processes and restarts the ones
that die, while the others keep running.

- A child that dies is restarted. The restart waits RESTART_FIRST_DELAY, doubling with each
  death up to RESTART_MAX_DELAY; the wait goes back to the first once the child has run
  HEALTHY_RESET_SECONDS. Each death and restart is printed and marked in the child's log file
  ("===== sluice-dev: …").
- Crash loops at start end with a clear message instead of looping silently: until a child
  has proved healthy once (a service reported SERVING; a worker logged WORKER_STARTED, or
  stayed up WORKER_PROVEN_SECONDS under a log level that hides that line), it has
  START_ATTEMPTS starts; when the last dies too, the supervisor
  prints the end of its log and gives up (sluice-dev then stops everything and exits 1). A
  child that was healthy once is restarted for as long as sluice-dev runs (a dependency may
  come back).
- Stopping goes by groups, in the order given: SIGTERM to a group, a wait of `stop_timeout`,
  SIGKILL for what is left, then the next group.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LOG_TAIL_LINES = 30
RESTART_FIRST_DELAY = 0.5
RESTART_MAX_DELAY = 30.0
HEALTHY_RESET_SECONDS = 30.0  # a child up this long gets the first delay again
# A worker has proved its setup works once it logs this (sluice_worker.main: settings read, client
# built, parse sandboxes warm). Not a time: on a busy machine a worker with a bad setting can take
# longer than any short delay just to import its libraries and fail.
WORKER_STARTED = "worker started: claiming jobs"
WORKER_PROVEN_SECONDS = 60.0  # ...or stayed up this long (SLUICE_LOG_LEVEL=WARNING hides the line)
START_ATTEMPTS = 3  # starts allowed before a child has proved healthy once


@dataclass
class Child:
    name: str
    module: str  # the module whose main() runs the service
    script: str  # its console script, preferred so `ps` shows a readable name
    env: dict[str, str]
    log_path: Path
    address: str = ""  # gRPC listen address, health-checked until SERVING; empty for workers
    metrics_port: int = 0
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    proven: bool = False  # healthy once (see START_ATTEMPTS)
    failed_starts: int = 0
    restarts: int = 0
    delay: float = RESTART_FIRST_DELAY
    restart_at: float | None = None  # set while dead and waiting for its restart
    log_start: int = 0  # where its log file ended when it was last started
    probe_url: str = ""  # for an HTTP service (the gateway): the URL checked instead of gRPC health, until 2xx

    def logged_since_start(self, text: str) -> bool:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.log_start)
                return text.encode() in log.read()
        except OSError:
            return False

    def worker_proven(self, now: float) -> bool:
        return not self.address and (now - self.started_at >= WORKER_PROVEN_SECONDS or self.logged_since_start(WORKER_STARTED))

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


def describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def mark_log(child: Child, text: str) -> None:
    try:
        with open(child.log_path, "a") as log:
            log.write(f"\n===== sluice-dev: {text} at {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n")
    except OSError:
        pass


class Supervisor:
    """The children, their restarts and their stop; `say` prints a line for the operator and
    `on_change` is called when a pid or a restart count changes."""

    def __init__(self, say: Callable[[str], None], on_change: Callable[[], None], stop_timeout: float) -> None:
        self.say = say
        self.on_change = on_change
        self.stop_timeout = stop_timeout
        self.children: list[Child] = []

    def start(self, children: list[Child]) -> None:
        self.children = children
        for child in children:
            self.spawn(child)

    def spawn(self, child: Child, why: str = "starting") -> None:
        with open(child.log_path, "ab") as log:
            child.log_start = log.tell()
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
        self.on_change()

    def check(self) -> int | None:
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
                if not child.proven and child.worker_proven(now):
                    child.proven = True
                if now - child.started_at >= HEALTHY_RESET_SECONDS:
                    child.delay = RESTART_FIRST_DELAY
                continue
            exit_text = describe_exit(child.process.returncode if child.process else None)
            if not child.proven and child.worker_proven(now):
                child.proven = True  # it got going before it died: restart it as long as it takes
            if not child.proven:
                child.failed_starts += 1
                if child.failed_starts >= START_ATTEMPTS:
                    mark_log(child, f"{child.name} {exit_text}; failed {child.failed_starts} starts in a row, giving up")
                    self.say(
                        f"sluice-dev: {child.name} failed to start {child.failed_starts} times in a row "
                        f"(last: {exit_text}); giving up. Last lines of {child.log_path}:"
                    )
                    self.say(tail(child.log_path))
                    return 1
            delay = child.delay
            child.delay = min(child.delay * 2, RESTART_MAX_DELAY)
            child.restart_at = now + delay
            mark_log(child, f"{child.name} (pid {child.pid}) {exit_text}; restarting in {delay:.1f} s")
            self.say(
                f"sluice-dev: {child.name} (pid {child.pid}) {exit_text}; restarting in {delay:.1f} s (log {child.log_path})"
            )
            self.on_change()
        return None

    def kill_all(self) -> None:
        for child in self.children:
            if child.alive() and child.process is not None:
                child.process.kill()

    def stop(self, groups: list[list[Child]]) -> None:
        for group in groups:
            self.stop_group(group)

    def stop_group(self, group: list[Child]) -> None:
        running = [(c, c.process) for c in group if c.alive() and c.process is not None]
        if not running:
            return
        self.say(f"stopping {', '.join(c.name for c, _ in running)}…")
        for _, process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for child, process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say(f"sluice-dev: {child.name} did not stop within {self.stop_timeout:.0f} s; killing it")
                process.kill()
                process.wait()
