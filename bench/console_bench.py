"""The web console in Chromium (docs/console.md, "Speed"): its first load with a collection of
10,000 documents, and how responsive it stays while 2,000 documents are in flight on its
WatchCollection stream.

The stack is `make run`'s (sluice-dev: embedded PostgreSQL, ingest-api, search, the gateway
serving the built console) with no worker, on free ports. The documents are rows written in SQL
(only their rows are needed to list them), each with its finished ingestion job.

1. First load: a fresh browser context (empty cache), the key already in sessionStorage, then
   the collection's page (#/collections/bench): navigation to first contentful paint, and to the
   documents table rendered (its first page of 100 rows in the DOM), median of --runs.
2. In flight: with the collection's page open, --in-flight of the documents are moved through
   PENDING, PARSING, CHUNKING, EMBEDDING (four progress steps), INDEXING and READY by UPDATEs of
   every one of them at once (their triggers write one event per document and step, as a worker's
   reports would), and the page's main thread is watched with PerformanceObserver({type:
   'longtask'}) until its live counter of documents in flight is back to 0.

    .venv/bin/python -m bench.console_bench [--documents 10000] [--in-flight 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
# Debian's chromium (make venv installs it; Playwright cannot download browsers here).
CHROMIUM = next((p for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium") if os.access(p, os.X_OK)), "")
FIRST_LOAD_BAR_MS = 1000.0
LONG_TASK_BAR_MS = 200.0
# (status, progress done, progress total, unit): a worker's reports, one UPDATE of every document each.
STEPS = [
    ("PENDING", 0, 0, ""),
    ("PARSING", 0, 0, ""),
    ("CHUNKING", 0, 0, ""),
    *[("EMBEDDING", done, 4, "chunks") for done in range(1, 5)],
    ("INDEXING", 0, 0, ""),
    ("READY", 0, 0, ""),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Stack:
    """sluice-dev with no worker, its output read until "Sluice is ready."."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.gateway_port = free_port()
        env = {
            **os.environ,
            "SLUICE_DEV_HOME": str(home),
            "SLUICE_DEV_HOST": "127.0.0.1",
            "SLUICE_DEV_INGEST_PORT": str(free_port()),
            "SLUICE_DEV_SEARCH_PORT": str(free_port()),
            "SLUICE_DEV_WEBHOOKS_PORT": str(free_port()),
            "SLUICE_DEV_SOURCES_PORT": str(free_port()),
            "SLUICE_DEV_GATEWAY_PORT": str(self.gateway_port),
            "SLUICE_DEV_METRICS_PORT": str(free_port()),
            "SLUICE_DEV_WORKERS": "0",
            "SLUICE_GATEWAY_CONSOLE_DIR": str(ROOT / "console" / "dist"),
        }
        env["SLUICE_INGEST_ADDRESS"] = f"127.0.0.1:{env['SLUICE_DEV_INGEST_PORT']}"
        env["SLUICE_SEARCH_ADDRESS"] = f"127.0.0.1:{env['SLUICE_DEV_SEARCH_PORT']}"
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "sluice-dev")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
        )
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(180):
            self.process.kill()
            raise SystemExit("sluice-dev did not become ready")
        self.url = f"http://127.0.0.1:{self.gateway_port}"
        credentials = json.loads((home / "credentials").read_text())
        self.key: str = credentials["keys"]["client"]
        self.database_url = (home / "database_url").read_text().strip()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("Sluice is ready."):
                self.ready.set()

    def stop(self) -> None:
        self.process.send_signal(2)
        self.process.wait(90)


def seed(stack: Stack, documents: int) -> tuple[int, int]:
    """The collection `bench` (hashing embedder) with `documents` READY rows; (tenant, collection) ids."""
    made = httpx.post(
        f"{stack.url}/sluice.v1.DocumentService/CreateCollection",
        headers={"Authorization": f"Bearer {stack.key}"},
        json={"collection": {"name": "bench", "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}}},
        timeout=60,
    )
    made.raise_for_status()
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        tenant, collection = conn.execute("SELECT tenant_id, id FROM collections WHERE name = 'bench'").fetchone()  # type: ignore[misc]
        started = time.perf_counter()
        conn.execute(
            "INSERT INTO documents (tenant_id, collection_id, filename, mime_type, status, content_sha256, size_bytes,"
            " chunk_count, created_at, updated_at)"
            " SELECT %s, %s, 'handbook/chapter-' || g || '.md', 'text/markdown', 'READY', md5(g::text) || md5(g::text),"
            " 1000 + g, 3, now() - g * interval '1 second', now() FROM generate_series(1, %s) g",
            (tenant, collection, documents),
        )
        conn.execute(
            "INSERT INTO ingestion_jobs (document_id, status, attempts, max_attempts)"
            " SELECT id, 'SUCCEEDED', 1, 3 FROM documents WHERE collection_id = %s",
            (collection,),
        )
        conn.execute("VACUUM ANALYZE documents, ingestion_jobs")
        print(f"seeded {documents:,} documents in {time.perf_counter() - started:.1f} s", flush=True)
    return tenant, collection


SESSION = """sessionStorage.setItem('sluice.console.key', %s); sessionStorage.setItem('sluice.console.role', 'client');"""
TABLE_WATCH = """
window.__tableAt = 0;
new MutationObserver((_, observer) => {
  if (document.querySelectorAll('table tbody tr').length >= 100) { window.__tableAt = performance.now(); observer.disconnect(); }
}).observe(document, {subtree: true, childList: true});
"""
LONG_TASKS = """
window.__longTasks = [];
new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longTasks.push(e.duration); })
  .observe({type: 'longtask', buffered: true});
window.__maxInFlight = 0;
new MutationObserver(() => {
  const cell = [...document.querySelectorAll('.counts div')].find((d) => d.querySelector('dt')?.textContent === 'In flight (live)');
  if (cell) window.__inFlight = Number(cell.querySelector('dd').textContent), window.__maxInFlight = Math.max(window.__maxInFlight, window.__inFlight);
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def first_load(browser: Any, stack: Stack, runs: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {"fcp": [], "table": [], "warm_table": []}
    for _ in range(runs):
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        context.add_init_script(SESSION % json.dumps(stack.key) + TABLE_WATCH)
        page = context.new_page()
        page.goto(f"{stack.url}/#/collections/bench")
        page.wait_for_function("() => window.__tableAt > 0", timeout=60_000)
        figures["table"].append(page.evaluate("window.__tableAt"))
        figures["fcp"].append(page.evaluate("performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1"))
        page.reload()  # the same context: the hashed assets come from the browser's cache
        page.wait_for_function("() => window.__tableAt > 0", timeout=60_000)
        figures["warm_table"].append(page.evaluate("window.__tableAt"))
        context.close()
    return figures


def in_flight(browser: Any, stack: Stack, count: int, pause: float) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    context.add_init_script(SESSION % json.dumps(stack.key) + TABLE_WATCH + LONG_TASKS)
    page = context.new_page()
    page.goto(f"{stack.url}/#/collections/bench")
    page.wait_for_function("() => window.__tableAt > 0 && document.querySelector('.stream.live')", timeout=60_000)
    page.wait_for_timeout(1000)
    page.evaluate("window.__longTasks = []")
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        ids = [
            row[0]
            for row in conn.execute(
                "SELECT id FROM documents WHERE collection_id = (SELECT id FROM collections WHERE name = 'bench') ORDER BY created_at DESC LIMIT %s",
                (count,),
            )
        ]
        started = time.perf_counter()
        for status, done, total, unit in STEPS:
            conn.execute(
                "UPDATE documents SET status = %s, progress_stage = CASE WHEN %s > 0 THEN %s::document_status END,"
                " progress_done = %s, progress_total = %s, progress_unit = %s, updated_at = now() WHERE id = ANY(%s)",
                (status, total, status, done, total, unit, ids),
            )
            time.sleep(pause)
        written = time.perf_counter() - started
    page.wait_for_function(f"() => window.__maxInFlight >= {count} && window.__inFlight === 0", timeout=300_000, polling=200)
    drained = time.perf_counter() - started
    tasks: list[float] = page.evaluate("window.__longTasks")
    context.close()
    return {
        "events": float(count * len(STEPS)),
        "written_s": written,
        "drained_s": drained,
        "long_tasks": float(len(tasks)),
        "longest_ms": max(tasks, default=0.0),
        "p95_ms": statistics.quantiles(tasks, n=20, method="inclusive")[-1] if len(tasks) >= 2 else max(tasks, default=0.0),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--in-flight", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pause", type=float, default=0.25, help="seconds between two steps of the documents in flight")
    args = parser.parse_args(argv)
    if not CHROMIUM:
        print("console bench skipped: Chromium is not installed (make venv installs Debian's chromium as root)")
        return
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="console-bench-") as home:
        stack = Stack(Path(home))
        try:
            seed(stack, args.documents)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                loads = first_load(browser, stack, args.runs)
                flight = in_flight(browser, stack, args.in_flight, args.pause)
                browser.close()
        finally:
            stack.stop()
    load = os.getloadavg()[0]
    median = statistics.median
    print(f"\nconsole, collection of {args.documents:,} documents, {args.runs} cold loads (load {load:.1f})\n")
    print("| figure | measured | bar |\n|---|---|---|")
    print(
        f"| first contentful paint, median (min-max) | {median(loads['fcp']):.0f} ms ({min(loads['fcp']):.0f}-{max(loads['fcp']):.0f}) | |"
    )
    print(
        f"| documents table rendered, cold, median (min-max) | {median(loads['table']):.0f} ms ({min(loads['table']):.0f}-{max(loads['table']):.0f}) | < {FIRST_LOAD_BAR_MS:.0f} ms |"
    )
    print(f"| documents table rendered, warm cache, median | {median(loads['warm_table']):.0f} ms | |")
    print(
        f"| {args.in_flight:,} in flight: {flight['events']:,.0f} events, written in {flight['written_s']:.1f} s, on the page after {flight['drained_s']:.1f} s | "
        f"{flight['long_tasks']:.0f} long tasks, longest {flight['longest_ms']:.0f} ms, p95 {flight['p95_ms']:.0f} ms | no task > {LONG_TASK_BAR_MS:.0f} ms |"
    )


if __name__ == "__main__":
    main()
