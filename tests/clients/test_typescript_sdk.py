"""The TypeScript SDK (clients/typescript, `@sluice/client`) against the real services.

Its tests are Node's (`node --test` on clients/typescript/test, compiled with tsc); this file
starts what they talk to, as the Python SDK's tests do: the real ingest-api (a second one on the
same database with a rate limit of 5 calls a second in bursts of 2, a third that requires mutual
TLS with certificates made here), the real search, and the ScriptedWorker doing a worker's part
through the real JobService (tests/cli/conftest.py), and the sources runner carrying out sync runs
(tests/sources/helpers.py). Their addresses and a client key go to Node
in SLUICE_TEST_* variables. Any Node test failing fails this test; only a machine without `node`
skips it. The README's TypeScript example is clients/typescript/examples/readme.ts, run as
written by test/readme.test.ts."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import auth_keys
import psycopg
import pytest
from certificates import make_pki
from cli.conftest import ScriptedWorker
from search_server import RunningSearch

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
NODE = shutil.which("node")
MARKER = "<!-- run as written by tests/clients/test_typescript_sdk.py -->"

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")


def npm(*args: str) -> subprocess.CompletedProcess:
    runner = shutil.which("npm")
    assert runner, "node is installed but npm is not: the TypeScript SDK cannot be built"
    return subprocess.run([runner, *args], cwd=PACKAGE, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def built() -> Path:
    """The package compiled from the sources as they are (npm ci first when node_modules is missing)."""
    if not (PACKAGE / "node_modules" / ".bin" / "tsc").exists():
        result = npm("ci", "--no-audit", "--no-fund")
        assert result.returncode == 0, result.stderr[-3000:]
    result = npm("run", "build")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return PACKAGE / "dist"


def test_the_generated_code_is_current(built):
    result = npm("run", "check-generated")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_the_readme_shows_the_example_the_tests_run():
    """When the README carries the TypeScript example (after MARKER), it is examples/readme.ts verbatim."""
    readme = (ROOT / "README.md").read_text()
    if MARKER not in readme:
        pytest.skip("the README does not show the TypeScript example yet")
    shown = re.search(r"```(?:ts|typescript)\n(.*?)```", readme.split(MARKER, 1)[1], flags=re.S)
    assert shown, "no ```ts block after the marker"
    assert shown.group(1) == (PACKAGE / "examples" / "readme.ts").read_text()


class SourcesRunner:
    """The sources runner (`sluice-sources`' Runner over its own pool, tests/sources/helpers.py) in a
    thread, carrying out every sync run the Node tests ask for, a few times a second."""

    def __init__(self, database_url: str, root: Path) -> None:
        self.runs = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(database_url, root), name="sources-runner", daemon=True)
        self._thread.start()

    def _loop(self, database_url: str, root: Path) -> None:
        from sources.helpers import run_pending

        while not self._stop.wait(0.3):
            try:
                self.runs += run_pending(database_url, source_local_roots=str(root))
            except Exception as error:  # reported by the test, not lost in the thread
                self.errors.append(repr(error))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def stored(database_url: str) -> list[tuple]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT c.name, d.filename, d.request_id, d.size_bytes, d.content_sha256 FROM documents d "
            "JOIN collections c ON c.id = d.collection_id ORDER BY c.name, d.filename"
        ).fetchall()


@pytest.mark.timeout(900)
def test_the_node_tests_pass_against_the_real_services(built, ingest_api_factory, database_url, tmp_path):
    from prometheus_client import REGISTRY
    from sluice_client import Client

    # test/admin.test.ts's webhooks (never called); test/sources.test.ts's folders and git repositories under one root.
    source_root = tmp_path / "sources"
    source_root.mkdir()
    ingest = ingest_api_factory(
        webhook_allow_private_networks=True, source_local_roots=str(source_root), source_allow_private_networks=True
    )
    limited = ingest_api_factory(rate_limit_per_second=5, rate_limit_burst=2)
    slots = ingest_api_factory(max_concurrent_uploads=2)  # full upload slots: TOO_MANY_UPLOADS with a RetryInfo
    pki = make_pki(tmp_path)
    server_cert, server_key = pki["server"]
    mutual = ingest_api_factory(tls_cert_file=server_cert, tls_key_file=server_key, tls_client_ca_file=pki["ca"])
    search = RunningSearch(database_url)
    worker = ScriptedWorker(ingest.address, step_seconds=0.1)
    runner = SourcesRunner(database_url, source_root)
    refused_before = REGISTRY.get_sample_value("sluice_rate_limited_calls_total") or 0
    full_before = REGISTRY.get_sample_value("sluice_uploads_refused_total", {"reason": "TOO_MANY_UPLOADS"}) or 0
    try:
        # Search loads the local model at its first query (the README example's collection has the
        # local embedder): seconds, more on a busy machine. Here, not within the example's deadline.
        with Client(ingest.address, search_address=search.address, api_key=auth_keys.KEYS["client"]) as client:
            client.collections.create("warm-up")
            client.search("warm-up", "load the model", timeout=300)
        credentials = tmp_path / "credentials"
        credentials.write_text(json.dumps({"tenant": "default", "keys": auth_keys.KEYS}))
        env = {
            **os.environ,
            "SLUICE_TEST_INGEST": ingest.address,
            "SLUICE_TEST_SEARCH": search.address,
            "SLUICE_TEST_LIMITED": limited.address,
            "SLUICE_TEST_SLOTS": slots.address,
            "SLUICE_TEST_API_KEY": auth_keys.KEYS["client"],
            "SLUICE_TEST_CREDENTIALS": str(credentials),
            "SLUICE_TEST_ROOT": str(ROOT),
            "SLUICE_TEST_SOURCE_ROOT": str(source_root),
            "SLUICE_TEST_TLS_INGEST": mutual.address,
            "SLUICE_TEST_TLS_CA": pki["ca"],
            "SLUICE_TEST_TLS_OTHER_CA": pki["other_ca"],
            "SLUICE_TEST_TLS_CLIENT_CERT": pki["client"][0],
            "SLUICE_TEST_TLS_CLIENT_KEY": pki["client"][1],
            "SLUICE_TEST_TLS_ROGUE_CERT": pki["rogue"][0],
            "SLUICE_TEST_TLS_ROGUE_KEY": pki["rogue"][1],
        }
        for name in (
            "SLUICE_API_KEY",
            "SLUICE_CREDENTIALS",
            "SLUICE_INGEST_ADDRESS",
            "SLUICE_SEARCH_ADDRESS",
            "SLUICE_TLS_CA_FILE",
            "SLUICE_TLS_CLIENT_CERT_FILE",
            "SLUICE_TLS_CLIENT_KEY_FILE",
            "SLUICE_TENANT",
            "NODE_OPTIONS",
        ):
            env.pop(name, None)
        tests = sorted(str(p) for p in (built / "test").glob("*.test.js"))
        assert len(tests) >= 5, tests
        result = subprocess.run(
            [NODE, "--test", "--test-reporter=spec", "--test-timeout=240000", *tests],
            cwd=PACKAGE,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        output = result.stdout + result.stderr
        assert result.returncode == 0, output[-6000:]
        # Node's test runner starts its summary lines with U+2139 (information source).
        marker = "\u2139"
        summary_ok = re.search(rf"^{marker} fail 0$", output, flags=re.M) and not re.search(
            rf"^{marker} (tests|pass) 0$", output, flags=re.M
        )
        assert summary_ok, output[-3000:]
    finally:
        runner.stop()
        worker.stop()
        search.stop()
    assert not worker.errors, worker.errors
    assert not runner.errors, runner.errors
    assert runner.runs > 0  # test/sources.test.ts's syncs were carried out by the real runner
    # The limit did bite: the Node tests' calls were refused and succeeded by waiting as told.
    assert (REGISTRY.get_sample_value("sluice_rate_limited_calls_total") or 0) > refused_before
    # And the upload slots were full at times: those uploads waited as told and were stored.
    assert (REGISTRY.get_sample_value("sluice_uploads_refused_total", {"reason": "TOO_MANY_UPLOADS"}) or 0) > full_before
    # Every upload announced its size and SHA-256, and its request_id is the Python SDK's framing with "ts-".
    rows = {(r[0], r[1]): r for r in stored(database_url)}
    _, _, request_id, size, sha = rows[("notes", "scaling-workers.md")]
    path = ROOT / "examples" / "docs" / "scaling-workers.md"
    assert (size, sha) == (path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
    key = "\0".join(["notes", str(path), sha])
    assert request_id == "ts-" + hashlib.sha256(key.encode()).hexdigest()[:40]
    assert rows[("ts-idem", "k.txt")][2] == "ts-test-key"
