"""Webhook delivery: throughput of a backlog, latency from the event's transaction to receipt,
and what deliveries cost ingestion.

Documents are driven to READY through the real JobService (no-op cycles: claim, 4 stages,
complete) by 4 gRPC clients in the process of ingest-api; receivers are http.server threads in
a process of their own, answering 200 at once.

1. Backlog drain: N documents' events are written while no dispatcher runs; then one starts
   and delivers them (`document.status_changed` + `document.ready`: 7 deliveries a document),
   for 1 and for 4 subscriptions. Figure: deliveries/s.
2. Live latency: the event's transaction (the payload's timestamp) to the receiver reading the
   request, while documents are ingested; alone, and beside a receiver that never answers.
3. Ingestion cycles/s with no subscription and with 4 live ones (the comparison: delivery must
   not slow ingestion down).

The dispatcher runs where --dispatcher says: `process` (the default deployment: the real
`sluice-webhooks` process beside ingest-api) or `inprocess` (inside ingest-api,
SLUICE_WEBHOOKS_ENABLED=true). `--compare RUNS` measures only (3), RUNS times for each placement
(interleaved), and prints the medians and the ratio 4 subscriptions / none. On a 2-core machine
the separate process still shares the CPU with ingest-api and the clients: what it removes is
the sharing of one interpreter (GIL) and one event loop.

    .venv/bin/python -m bench.webhook_bench [--documents 300] [--dispatcher process|inprocess]
    .venv/bin/python -m bench.webhook_bench --compare 3
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import json
import socket
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sluice.v1 import collection_pb2, document_service_pb2_grpc, job_service_pb2_grpc, webhook_service_pb2_grpc
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js
from sluice.v1 import webhook_service_pb2 as wh
from sluice_common.channels import key_for_role, keyed_aio_channel
from sluice_ingest.main import IngestApp
from sluice_ingest.settings import IngestSettings
from sluice_ingest.tenants import bootstrap_keys

from bench.embedded import embedded_postgres, migrated_database

STAGES = [D.DOCUMENT_STATUS_PARSING, D.DOCUMENT_STATUS_CHUNKING, D.DOCUMENT_STATUS_EMBEDDING, D.DOCUMENT_STATUS_INDEXING]
CLIENTS = 4


class Receiver:
    """A receiver in this process (run inside `receiver_process`)."""

    def __init__(self) -> None:
        self.times: list[tuple[float, str]] = []  # (received, payload timestamp)
        lock = threading.Lock()
        receipts = self.times

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                with lock:
                    receipts.append((time.time(), json.loads(body)["timestamp"]))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def latencies(self, start: int = 0) -> list[float]:
        return [
            received - dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            for received, stamp in self.times[start:]
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Receivers:
    """`count` receivers in a process of their own (python -m bench.webhook_bench --receivers N), so
    their HTTP parsing does not compete with ingest-api for this process's interpreter."""

    def __init__(self, count: int) -> None:
        import subprocess
        import sys

        self.count = count
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.webhook_bench", "--receivers", str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.urls: list[str] = json.loads(self.proc.stdout.readline()) if count else []

    def counts(self) -> list[int]:
        self.proc.stdin.write("counts\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def latencies(self) -> list[float]:
        self.proc.stdin.write("latencies\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def receiver_process(count: int) -> None:
    import sys

    receivers = [Receiver() for _ in range(count)]
    print(json.dumps([r.url for r in receivers]), flush=True)
    for line in sys.stdin:
        if line.strip() == "counts":
            print(json.dumps([len(r.times) for r in receivers]), flush=True)
        elif line.strip() == "latencies":
            print(json.dumps([x for r in receivers for x in r.latencies()]), flush=True)


async def ingest(address: str, keys: dict[str, str], collection: str, count: int) -> float:
    """Upload `count` documents and run each to READY with CLIENTS concurrent clients; cycles/s."""
    async with keyed_aio_channel(address, key_for_role(keys)) as channel:
        docs = document_service_pb2_grpc.DocumentServiceStub(channel)
        jobs = job_service_pb2_grpc.JobServiceStub(channel)

        async def one(worker: str, n: int) -> None:
            for i in range(n):
                content = f"{worker} {i} {time.time_ns()}".encode()

                async def upload(content: bytes = content):
                    yield ds.UploadDocumentRequest(metadata=ds.UploadDocumentMetadata(collection=collection, filename="a.txt"))
                    yield ds.UploadDocumentRequest(data=content)
                    yield ds.UploadDocumentRequest(
                        trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
                    )

                await docs.UploadDocument(upload())
                job = (await jobs.ClaimJob(js.ClaimJobRequest(worker_id=worker, wait_seconds=1))).job
                for stage in STAGES:
                    await jobs.ReportStage(js.ReportStageRequest(lease=job.lease, stage=stage))

                async def complete(job: js.Job = job):
                    yield js.CompleteJobRequest(header=js.CompleteJobHeader(lease=job.lease, chunk_count=1))
                    yield js.CompleteJobRequest(chunks=js.ChunkBatch(chunks=[js.Chunk(index=0, text="x", embedding=[1.0] * 8)]))

                await jobs.CompleteJob(complete())

        started = time.perf_counter()
        await asyncio.gather(*(one(f"w{c}", count // CLIENTS) for c in range(CLIENTS)))
        return (count // CLIENTS * CLIENTS) / (time.perf_counter() - started)


async def setup(address: str, keys: dict[str, str], collection: str, urls: list[str], types=()) -> None:
    async with keyed_aio_channel(address, key_for_role(keys)) as channel:
        await document_service_pb2_grpc.DocumentServiceStub(channel).CreateCollection(
            ds.CreateCollectionRequest(
                collection=collection_pb2.Collection(
                    name=collection,
                    embedder=collection_pb2.EmbedderConfig(
                        provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=8
                    ),
                )
            )
        )
        hooks = webhook_service_pb2_grpc.WebhookServiceStub(channel)
        for url in urls:
            await hooks.CreateWebhook(
                wh.CreateWebhookRequest(webhook=wh.Webhook(collection=collection, url=url, event_types=list(types)))
            )


def settings(url: str, **overrides) -> IngestSettings:
    return IngestSettings(
        database_url=url,
        bind="127.0.0.1:0",
        log_json=False,
        log_level="ERROR",
        rate_limit_per_second=0,
        webhook_allow_private_networks=True,
        **overrides,
    )


class Running:
    """ingest-api in this process and the dispatcher where `dispatcher` says: "process" (the real
    sluice-webhooks, a process of its own), "inprocess" (inside ingest-api) or "none"."""

    def __init__(self, app: IngestApp, proc) -> None:
        self.app = app
        self.proc = proc
        self.port = app.port
        self.dispatcher_cpu = 0.0  # CPU seconds the sluice-webhooks process used (user + system)

    async def stop(self, grace: float = 0) -> None:
        import signal

        import psutil

        await self.app.stop(grace)
        if self.proc is not None:
            times = psutil.Process(self.proc.pid).cpu_times()
            self.dispatcher_cpu = times.user + times.system
            self.proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(self.proc.wait, 30)


def webhooks_process(s: IngestSettings):
    """`sluice-webhooks` with the same settings (as SLUICE_* variables); returns once SERVING."""
    import os
    import subprocess
    import sys

    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "SLUICE_WEBHOOKS_BIND": f"127.0.0.1:{port}", "SLUICE_METRICS_PORT": "0"}
    for name in (
        "database_url",
        "log_json",
        "log_level",
        "webhook_allow_private_networks",
        "webhook_timeout_seconds",
        "webhook_connect_timeout_seconds",
    ):
        env[f"SLUICE_{name.upper()}"] = str(getattr(s, name))
    proc = subprocess.Popen([sys.executable, "-c", "from sluice_ingest.webhooks.main import main; main()"], env=env)
    deadline = time.monotonic() + 60
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        while True:
            try:
                status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1).status
                if status == health_pb2.HealthCheckResponse.SERVING:
                    return proc
            except grpc.RpcError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("sluice-webhooks did not start")
            time.sleep(0.1)


async def started(s: IngestSettings, dispatcher: str = "process") -> Running:
    app = IngestApp(s.model_copy(update={"webhooks_enabled": dispatcher == "inprocess"}))
    await app.start()
    await app.serve()
    proc = await asyncio.to_thread(webhooks_process, s) if dispatcher == "process" else None
    return Running(app, proc)


async def wait_for(condition, timeout: float = 300) -> float:
    start = time.perf_counter()
    while not condition():
        if time.perf_counter() - start > timeout:
            raise TimeoutError("deliveries did not all arrive")
        await asyncio.sleep(0.01)
    return time.perf_counter()


async def drain(
    url: str, keys: dict[str, str], documents: int, subscriptions: int, name: str, dispatcher: str
) -> tuple[int, float]:
    receivers = Receivers(subscriptions)
    quiet = await started(settings(url), "none")
    address = f"127.0.0.1:{quiet.port}"
    await setup(address, keys, name, receivers.urls)
    await ingest(address, keys, name, documents)
    await quiet.stop(0)
    expected = documents // CLIENTS * CLIENTS * 7
    begin = time.perf_counter()
    app = await started(settings(url), dispatcher)
    end = await wait_for(lambda: all(c >= expected for c in receivers.counts()))
    await app.stop(0)
    receivers.close()
    return expected * subscriptions, expected * subscriptions / (end - begin)


async def live(
    url: str, keys: dict[str, str], documents: int, subscriptions: int, dead: bool, name: str, dispatcher: str = "process"
):
    receivers = Receivers(subscriptions)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(128)
    app = await started(settings(url, webhook_timeout_seconds=120, webhook_connect_timeout_seconds=60), dispatcher)
    address = f"127.0.0.1:{app.port}"
    urls = receivers.urls + ([f"http://127.0.0.1:{silent.getsockname()[1]}/"] if dead else [])
    await setup(address, keys, name, urls, [wh.WEBHOOK_EVENT_TYPE_DOCUMENT_READY])
    rate = await ingest(address, keys, name, documents)
    expected = documents // CLIENTS * CLIENTS
    await wait_for(lambda: all(c >= expected for c in receivers.counts()))
    latencies = receivers.latencies()
    await app.stop(0)
    silent.close()
    receivers.close()
    CPU[name] = app.dispatcher_cpu
    return rate, latencies


CPU: dict[str, float] = {}  # live run → CPU seconds of its sluice-webhooks process


def ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    return f"{statistics.quantiles(values, n=100)[int(q) - 1] * 1000:.0f}" if q < 100 else f"{max(values) * 1000:.0f}"


def compare(url: str, keys: dict[str, str], n: int, runs: int) -> None:
    """Ingestion cycles/s, no subscription vs 4 live ones, dispatcher inside ingest-api vs in
    sluice-webhooks; the placements and cases interleaved run after run."""
    rates: dict[tuple[str, int], list[float]] = {}
    for run in range(runs):
        for dispatcher in ("inprocess", "process"):
            for subs in (0, 4):
                rate, _ = asyncio.run(live(url, keys, n, subs, False, f"c{run}{dispatcher}{subs}", dispatcher))
                rates.setdefault((dispatcher, subs), []).append(rate)
                cpu = CPU.get(f"c{run}{dispatcher}{subs}", 0.0)
                print(
                    f"  run {run + 1}: dispatcher {dispatcher:<9} {subs} subscriptions: {rate:.1f} cycles/s"
                    + (f" (sluice-webhooks used {cpu:.1f} CPU s)" if dispatcher == "process" else ""),
                    flush=True,
                )
    print(f"\ningestion, {n} documents by {CLIENTS} clients, `document.ready` subscriptions; median of {runs} runs")
    print(f"{'dispatcher':<32} | {'0 subs cycles/s':>15} | {'4 subs cycles/s':>15} | {'4 / 0':>6} | runs (0 subs; 4 subs)")
    for dispatcher, label in (("inprocess", "inside ingest-api (old)"), ("process", "sluice-webhooks process (new)")):
        none, four = rates[(dispatcher, 0)], rates[(dispatcher, 4)]
        print(
            f"{label:<32} | {statistics.median(none):>15.1f} | {statistics.median(four):>15.1f} |"
            f" {statistics.median(four) / statistics.median(none):>6.2f} |"
            f" {', '.join(f'{r:.0f}' for r in none)}; {', '.join(f'{r:.0f}' for r in four)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument(
        "--dispatcher",
        choices=["process", "inprocess"],
        default="process",
        help="where the dispatcher runs: sluice-webhooks (default) or inside ingest-api",
    )
    parser.add_argument(
        "--compare", type=int, metavar="RUNS", help="only ingestion with 0 vs 4 subscriptions, RUNS times per placement; medians"
    )
    parser.add_argument("--receivers", type=int, help=argparse.SUPPRESS)  # the receivers' own process
    args = parser.parse_args()
    if args.receivers is not None:
        receiver_process(args.receivers)
        return
    with embedded_postgres("sluice-bench-") as admin:
        url = migrated_database(admin, "bench")
        keys = bootstrap_keys(url)
        n = args.documents
        if args.compare:
            compare(url, keys, n, args.compare)
            return
        d = args.dispatcher
        drains = [asyncio.run(drain(url, keys, n, subs, f"drain{subs}", d)) for subs in (1, 4)]
        baseline, _ = asyncio.run(live(url, keys, n, 0, False, "nohooks", d))
        with_hooks, alone = asyncio.run(live(url, keys, n, 4, False, "live", d))
        with_dead, beside_dead = asyncio.run(live(url, keys, n, 1, True, "dead", d))
    print(f"\ndispatcher: {'sluice-webhooks (own process)' if d == 'process' else 'inside ingest-api'}")
    print(f"\nwebhook backlog drain ({n} documents × 7 events, receivers answering 200 at once)")  # noqa: RUF001 - a times sign
    for subs, (count, rate) in zip((1, 4), drains):
        print(f"  {subs} subscription(s): {count} deliveries, {rate:.0f} deliveries/s")
    print(f"\nlive: {n} documents ingested by {CLIENTS} clients, `document.ready` subscriptions")
    print(f"{'case':<44} | {'ingest cycles/s':>15} | {'latency p50 ms':>14} | {'p95 ms':>6} | {'max ms':>6}")
    print(f"{'no subscription (baseline)':<44} | {baseline:>15.1f} | {'-':>14} | {'-':>6} | {'-':>6}")
    print(f"{'4 subscriptions':<44} | {with_hooks:>15.1f} | {ms(alone, 50):>14} | {ms(alone, 95):>6} | {ms(alone, 100):>6}")
    print(
        f"{'1 subscription + 1 receiver never answering':<44} | {with_dead:>15.1f} | {ms(beside_dead, 50):>14} |"
        f" {ms(beside_dead, 95):>6} | {ms(beside_dead, 100):>6}"
    )
    print("latency: the event's transaction (payload timestamp) to the receiver reading the request")


if __name__ == "__main__":
    main()
