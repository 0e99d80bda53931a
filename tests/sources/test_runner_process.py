"""`sluice-sources` as a real process: SIGKILLed in the middle of a run, its lease expires and a
second process resumes the run from the checkpoint; nothing is uploaded twice (docs/sources.md,
"A sync run")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import psycopg
from helpers import free_port, wait_for, wait_serving
from sluice.v1 import source_service_pb2 as src

from .helpers import Sources, live_documents

FILES = 600
LEASE_SECONDS = 3


class RunnerProcess:
    def __init__(self, database_url: str, root: Path, log: Path) -> None:
        port, self.metrics_port = free_port(), free_port()
        env = {
            **os.environ,
            "SLUICE_DATABASE_URL": database_url,
            "SLUICE_SOURCES_BIND": f"127.0.0.1:{port}",
            "SLUICE_SOURCE_LOCAL_ROOTS": str(root),
            "SLUICE_SOURCE_LEASE_SECONDS": str(LEASE_SECONDS),
            "SLUICE_SOURCE_POLL_SECONDS": "0.2",
            "SLUICE_LOG_JSON": "true",
            "SLUICE_LOG_LEVEL": "INFO",
            "SLUICE_METRICS_PORT": str(self.metrics_port),
            "SLUICE_METRICS_HOST": "127.0.0.1",
        }
        self.log_path = log
        self.log = open(log, "w+")  # noqa: SIM115 - the process writes to it until it ends
        installed = Path(sys.executable).parent / "sluice-sources"
        command = (
            [str(installed)]
            if installed.exists()
            else [sys.executable, "-c", "from sluice_ingest.sources.main import main; main()"]
        )
        self.proc = subprocess.Popen(command, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_serving(f"127.0.0.1:{port}")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as answer:
            return answer.read().decode()

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.startswith("{")]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(20)
        self.log.close()


def run_row(database_url: str, run_id: str) -> dict:
    with psycopg.connect(database_url) as conn:
        cur = conn.execute(
            "SELECT state, attempts, checkpoint, uploaded, unchanged, listed FROM source_runs WHERE id = %s", (run_id,)
        )
        names = [d.name for d in cur.description]
        return dict(zip(names, cur.fetchone(), strict=True))


def run_events(database_url: str, run_id: str) -> list[tuple[str, str, int]]:
    """(STARTED/PROGRESS/FINISHED, the run's state, items compared so far) of the run's events
    in the collection's log, in log order (docs/sources.md, "Run events")."""
    with psycopg.connect(database_url) as conn:
        return [
            (r[0], r[1], int(r[2]))
            for r in conn.execute(
                "SELECT run_event, run ->> 'state', (run ->> 'uploaded')::int + (run ->> 'unchanged')::int"
                " FROM document_events WHERE source_run_id = %s ORDER BY txid, id",
                (run_id,),
            ).fetchall()
        ]


def test_a_runner_killed_mid_run_is_resumed_from_its_checkpoint_and_duplicates_nothing(
    ingest_api_factory, database_url, tmp_path
):
    root = tmp_path / "root"
    folder = root / "corpus"
    folder.mkdir(parents=True)
    for i in range(FILES):
        (folder / f"{i:04}.txt").write_text(f"document {i} of the corpus")
    api = ingest_api_factory(source_local_roots=str(root))
    s = Sources(api.address)
    s.clients.create_collection("docs")
    source = s.create_folder("docs", str(folder))
    run = s.sync(source)

    first = RunnerProcess(database_url, root, tmp_path / "first.log")
    try:
        wait_for(
            lambda: run_row(database_url, run.id)["checkpoint"].get("after"),
            60,
            interval=0.02,
            what="the first runner's first checkpoint",
        )
        first.proc.kill()  # SIGKILL: no hand-back, the lease must expire
        first.proc.wait(10)
    finally:
        first.stop()
    killed = run_row(database_url, run.id)
    assert killed["state"] == "RUNNING" and killed["attempts"] == 1
    done_before = killed["checkpoint"]["after"]
    assert killed["uploaded"] > 0 and done_before < f"{FILES - 1:04}.txt", killed

    second = RunnerProcess(database_url, root, tmp_path / "second.log")
    try:
        wait_for(lambda: run_row(database_url, run.id)["state"] == "SUCCEEDED", 120, what="the resumed run to end")
        exposed = second.metrics()
        assert 'sluice_source_runs_total{state="SUCCEEDED"} 1.0' in exposed
        assert 'sluice_source_items_total{outcome="uploaded"}' in exposed
    finally:
        second.stop()
    ended = run_row(database_url, run.id)
    assert ended["attempts"] == 2
    # Every item counted once: those done before the kill by the first runner, the rest by the
    # second (an item uploaded after the last checkpoint is found unchanged, never sent twice).
    assert ended["uploaded"] + ended["unchanged"] == FILES and ended["listed"] == FILES
    assert ended["uploaded"] >= killed["uploaded"]
    live = live_documents(database_url)
    assert len(live) == FILES and all(versions == [(1, versions[0][1])] for versions in live.values())
    claims = [e for e in second.events() if e.get("event") == "source sync run claimed"]
    assert claims and claims[0].get("resuming_after") is not None and claims[0]["resuming_after"] >= done_before
    assert s.last_run(source).state == src.SOURCE_RUN_STATE_SUCCEEDED
    # One start (the second runner's claim resumed the run, it did not start it again) and one
    # end with the final counts; the progress in between never goes backwards.
    events = run_events(database_url, run.id)
    kinds = [e[0] for e in events]
    assert kinds[0] == "STARTED" and kinds[-1] == "FINISHED", kinds
    assert kinds.count("STARTED") == 1 and kinds.count("FINISHED") == 1 and "PROGRESS" in kinds
    assert events[-1][1:] == ("SUCCEEDED", FILES)
    compared = [e[2] for e in events]
    assert compared == sorted(compared)


def test_sigterm_hands_the_run_back_uncharged_with_its_checkpoint(ingest_api_factory, database_url, tmp_path):
    root = tmp_path / "root"
    folder = root / "corpus"
    folder.mkdir(parents=True)
    for i in range(FILES):
        (folder / f"{i:04}.txt").write_text(f"document {i}")
    api = ingest_api_factory(source_local_roots=str(root))
    s = Sources(api.address)
    s.clients.create_collection("docs")
    run = s.sync(s.create_folder("docs", str(folder)))
    runner = RunnerProcess(database_url, root, tmp_path / "runner.log")
    try:
        wait_for(
            lambda: run_row(database_url, run.id)["checkpoint"].get("after"),
            60,
            interval=0.02,
            what="the runner's first checkpoint",
        )
    finally:
        runner.stop(signal.SIGTERM)
    assert runner.proc.returncode == 0
    handed_back = run_row(database_url, run.id)
    assert handed_back["state"] == "PENDING" and handed_back["attempts"] == 0, handed_back
    assert handed_back["checkpoint"].get("after") and handed_back["uploaded"] > 0
    assert any(e.get("event") == "source sync run handed back" for e in runner.events())
    kinds = [e[0] for e in run_events(database_url, run.id)]
    assert kinds[:1] == ["STARTED"] and "FINISHED" not in kinds  # started, not ended: it goes on
