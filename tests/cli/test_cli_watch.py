"""`sluice watch --collection`: every event of a collection, one line each, resuming by itself
when ingest-api goes away and comes back, and printing the last cursor on Ctrl-C.

The CLI runs as its own process (it streams until interrupted) against a real ingest-api."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading

import pytest
from ingest.helpers import Clients


class Lines:
    """The lines a process writes to a pipe, read by a thread so that the test can wait with a timeout."""

    def __init__(self, pipe) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe) -> None:
        for line in pipe:
            self.queue.put(line.rstrip("\n"))

    def next(self, timeout: float = 60) -> str:
        return self.queue.get(timeout=timeout)

    def until(self, text: str, timeout: float = 60) -> str:
        """The next line that contains `text` (gRPC's own log lines may come in between)."""
        while text not in (line := self.next(timeout)):
            pass
        return line


def interruptible() -> None:
    """Ctrl-C as at a terminal. A shell starts background jobs with SIGINT ignored, and children
    inherit that: a suite run as `… &` would otherwise send SIGINT to a CLI that never sees it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_watch(address: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "sluice_cli.main", "watch", "--collection", "docs", "--ingest-address", address, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=interruptible,
    )


def test_watch_a_collection_resumes_across_a_server_restart_and_prints_the_cursor_on_ctrl_c(ingest_api_factory):
    first = ingest_api_factory(watch_heartbeat_seconds=0.2)
    address = first.address
    c = Clients(address)
    c.create_collection()
    a, b = c.upload(content=b"alpha", filename="alpha.txt"), c.upload(content=b"beta", filename="beta.txt")
    proc = start_watch(address, "--json", "--from-start")
    out, err = Lines(proc.stdout), Lines(proc.stderr)
    try:
        seen = [json.loads(out.next()), json.loads(out.next())]
        assert [e["document"]["id"] for e in seen] == [a.id, b.id]
        assert [e["type"] for e in seen] == ["COLLECTION_EVENT_TYPE_CHANGED"] * 2
        c.close()
        first.stop()  # ingest-api goes away: the stream ends with UNAVAILABLE
        err.until("reconnecting after cursor")
        second = ingest_api_factory(bind=address, watch_heartbeat_seconds=0.2)  # back, same address
        c = Clients(second.address)
        gamma = c.upload(content=b"gamma", filename="gamma.txt")
        resumed = json.loads(out.next())
        assert resumed["document"]["id"] == gamma.id  # nothing missed, nothing twice
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    assert code == 130
    lines = []
    while True:
        try:
            lines.append(err.next(timeout=5))
        except queue.Empty:
            break
    stopped = [line for line in lines if "resume with" in line]
    assert stopped and f"--cursor {resumed['cursor']}" in stopped[0]
    assert out.queue.empty()
    c.close()


def test_watch_a_collection_as_lines_with_filters(ingest_api):
    c = Clients(ingest_api.address)
    c.create_collection()
    doc = c.upload(content=b"one", filename="one.txt")
    job = c.claim("w1", wait=1)
    c.run_to_indexing(job)
    c.complete(job)
    proc = start_watch(ingest_api.address, "--from-start", "--status", "ready,failed")
    out = Lines(proc.stdout)
    try:
        line = out.next()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    assert "one.txt" in line and "READY" in line and "cursor=" in line
    assert doc.id not in line  # the file name is shown when there is one
    c.close()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--status", "done"], "unknown status done"),
        (["--cursor", "garbage"], "INVALID_CURSOR"),
    ],
)
def test_watch_a_collection_refuses_bad_options(sluice, ingest_api, args, message):
    c = Clients(ingest_api.address)
    c.create_collection()
    result = sluice("watch", "--collection", "docs", "--ingest-address", ingest_api.address, *args)
    assert result.code == 2 and message in result.err
    c.close()
    missing = sluice("watch", "--ingest-address", ingest_api.address)
    assert missing.code == 2 and "--collection" in missing.err
