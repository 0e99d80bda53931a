"""ingest-api job throughput: no-op claim → stages → complete cycles per second.

One cycle is what a worker does for a document minus the work itself: ClaimJob, ReportStage
for PARSING, CHUNKING, EMBEDDING and INDEXING, and CompleteJob with one 384-dimension chunk
(the atomic commit). Measured through gRPC with 1 and 4 concurrent clients, and beside it the
same store calls made in-process without gRPC (the baseline), on the same embedded PostgreSQL
in the same run. gRPC runs with a worker key (authentication on, as deployed) and again with
the key check replaced by a constant principal (bench/unauthenticated.py): their ratio is the
cost of authentication.

    .venv/bin/python -m bench.ingest_bench [--jobs 1000] [--claims 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from sluice.v1 import collection_pb2, document_service_pb2_grpc, job_service_pb2_grpc
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js
from sluice_common import gctune
from sluice_common.channels import keyed_aio_channel
from sluice_common.embedded_pg import database_uri, ensure_database
from sluice_ingest.domain import DocumentStatus
from sluice_ingest.main import IngestApp
from sluice_ingest.migrations import upgrade
from sluice_ingest.settings import IngestSettings
from sluice_ingest.store import ChunkRow
from sluice_ingest.tenants import bootstrap_keys

from bench import pgqueuer_reference
from bench.embedded import embedded_postgres
from bench.unauthenticated import without_key_check

DIMS = 384
# Cycles each client runs untimed before the measurement: every pooled connection's backend has
# then loaded its catalog caches and planned (and psycopg prepared) the queue's statements, as in
# a server that has been running. Without it, a run of 400 jobs at 32 clients (12 cycles each)
# measured mostly 32 cold backends.
WARMUP_CYCLES = 6
CLIENTS = (1, 4, 16, 32)
QUEUED = (1_000, 10_000, 100_000)
EXPIRED = 10_000
STAGES = [D.DOCUMENT_STATUS_PARSING, D.DOCUMENT_STATUS_CHUNKING, D.DOCUMENT_STATUS_EMBEDDING, D.DOCUMENT_STATUS_INDEXING]


def vectors(seed: int, count: int = 512) -> np.ndarray:
    """Distinct random vectors for a client's chunks. Identical vectors would measure something
    else: pgvector's HNSW stores a duplicate with the element it equals, so every insert would
    queue for that one element's page."""
    return np.random.default_rng(seed).standard_normal((count, DIMS)).astype(np.float32)


def seed(url: str, collection: str, count: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            """
            WITH c AS (SELECT id, tenant_id, max_attempts FROM collections WHERE name = %s),
                 d AS (INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256, size_bytes)
                       SELECT c.tenant_id, c.id, 'f' || g || '.txt', 'text/plain', encode(sha256((%s || g)::bytea), 'hex'), 1
                       FROM c, generate_series(1, %s) g RETURNING id, collection_id)
            INSERT INTO ingestion_jobs (document_id, max_attempts) SELECT d.id, c.max_attempts FROM d JOIN c ON c.id = d.collection_id
            """,
            (collection, collection, count),
        )


def add_collection(url: str, name: str = "bench") -> None:
    """A hashing collection of the `default` tenant, written directly (set-up, not measured)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions,"
            " chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts)"
            " SELECT id, %s, 'hashing', 'hashing-v1', %s, 1500, 1000, 0, 3 FROM tenants WHERE name = 'default'",
            (name, DIMS),
        )


async def grpc_client(
    address: str,
    worker: str,
    chunk_vectors: list[list[float]],
    key: str,
    warmed: asyncio.Event | None = None,
    go: asyncio.Event | None = None,
) -> int:
    """Cycles through gRPC until the queue is empty; with `warmed`/`go`, first WARMUP_CYCLES
    untimed cycles, then `warmed` is set and the timed ones wait for `go` (not counted)."""
    done = 0
    async with keyed_aio_channel(address, key) as channel:
        jobs = job_service_pb2_grpc.JobServiceStub(channel)
        warming = warmed is not None and go is not None
        while True:
            if warming and done == WARMUP_CYCLES:
                warmed.set()
                await go.wait()
                warming, done = False, 0
            response = await jobs.ClaimJob(js.ClaimJobRequest(worker_id=worker))
            if not response.HasField("job"):
                return done
            lease = response.job.lease
            for stage in STAGES:
                await jobs.ReportStage(js.ReportStageRequest(lease=lease, stage=stage))

            vector = chunk_vectors[(done + (0 if warming else WARMUP_CYCLES)) % len(chunk_vectors)]

            async def stream(lease=lease, vector=vector):
                yield js.CompleteJobRequest(header=js.CompleteJobHeader(lease=lease, chunk_count=1))
                yield js.CompleteJobRequest(chunks=js.ChunkBatch(chunks=[js.Chunk(index=0, text="no-op", embedding=vector)]))

            await jobs.CompleteJob(stream())
            done += 1


async def client_processes(address: str, key: str, clients: int) -> tuple[list[int], float, float]:
    """Run the gRPC clients in up to 4 processes; returns their cycle counts, the seconds from
    the moment all were ready (imports done, warmed up) until the last finished, and the CPU
    seconds the client processes spent meanwhile."""
    processes = []
    per_process = [len(range(p, clients, min(clients, 4))) for p in range(min(clients, 4))]
    for p, count in enumerate(per_process):
        processes.append(
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.ingest_bench",
                "--client",
                address,
                key,
                str(count),
                f"p{p}",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                cwd=Path(__file__).resolve().parents[1],
            )
        )
    for process in processes:
        assert (await process.stdout.readline()).strip() == b"ready"
    started = time.perf_counter()
    for process in processes:
        process.stdin.write(b"go\n")
        await process.stdin.drain()
    outputs = await asyncio.gather(*(process.communicate() for process in processes))
    elapsed = time.perf_counter() - started
    counts, cpu = zip(*(out.decode().split() for out, _ in outputs), strict=True)
    return [int(c) for c in counts], elapsed, sum(float(c) for c in cpu)


async def _client_main(address: str, key: str, count: int, name: str) -> None:
    go = asyncio.Event()
    warmed = [asyncio.Event() for _ in range(count)]
    clients = [
        asyncio.ensure_future(grpc_client(address, f"{name}-{i}", vectors(hash((name, i)) % 2**32).tolist(), key, warmed[i], go))
        for i in range(count)
    ]
    for event in warmed:
        await event.wait()
    gctune.tune()  # as a worker process does once started
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # the parent's go, once every process is warm
    cpu = time.process_time()
    go.set()
    done = await asyncio.gather(*clients)
    print(sum(done), time.process_time() - cpu, flush=True)


async def inprocess_client(app: IngestApp, worker: str, limit: int | None = None) -> int:
    """A worker's store calls without the work: claim, 4 stages, complete with one chunk; until
    the queue is empty or `limit` cycles."""
    done = 0
    store = app.store
    chunk_vectors = vectors(hash((worker, limit)) % 2**32)  # the warm-up's differ from the timed ones'
    while limit is None or done < limit:
        job = await store.claim_job(worker)
        if job is None:
            return done
        for stage in (DocumentStatus.PARSING, DocumentStatus.CHUNKING, DocumentStatus.EMBEDDING, DocumentStatus.INDEXING):
            await store.report_stage(job.job_id, job.lease_token, stage, 0, 0, "")
        vector = chunk_vectors[done % len(chunk_vectors)]
        await store.complete_job(job.job_id, job.lease_token, [ChunkRow(0, "no-op", 0, "", "", "", vector, "no op")])
        done += 1
    return done


async def inprocess_cycles_per_second(app: IngestApp, clients: int, jobs: int, collection: str = "bench") -> float:
    """Seed `jobs` cycles (plus the warm-up's) and run them with `clients` concurrent in-process
    clients: WARMUP_CYCLES each untimed, then the rest timed."""
    seed(app.settings.database_url, collection, jobs + clients * WARMUP_CYCLES)
    warm = await asyncio.gather(*(inprocess_client(app, f"w{i}", WARMUP_CYCLES) for i in range(clients)))
    assert sum(warm) == clients * WARMUP_CYCLES, warm
    started = time.perf_counter()
    counts = await asyncio.gather(*(inprocess_client(app, f"w{i}") for i in range(clients)))
    elapsed = time.perf_counter() - started
    assert sum(counts) == jobs, counts
    return jobs / elapsed


async def run(admin_uri: str, jobs: int, repeats: int, keys: dict[str, str]) -> list[tuple[str, int, float, float, float]]:
    """(mode, clients, cycles/s, Python CPU s/cycle of this process (the server), of the gRPC
    client processes) of every run."""
    results = []
    for round_ in range(repeats):
        for clients in CLIENTS:
            for mode in ("grpc", "grpc-noauth", "in-process"):
                name = f"b{round_}_{clients}_{mode.replace('-', '')}"
                ensure_database(admin_uri, name, template="bench_template")
                url = database_uri(admin_uri, name)
                app = IngestApp(IngestSettings(database_url=url, bind="127.0.0.1:0", log_json=False, rate_limit_per_second=0))
                await app.start()
                await app.serve()
                gctune.tune()  # as ingest-api's main does once started (both modes)
                async with keyed_aio_channel(f"127.0.0.1:{app.port}", keys["client"]) as channel:
                    docs = document_service_pb2_grpc.DocumentServiceStub(channel)
                    await docs.CreateCollection(
                        ds.CreateCollectionRequest(
                            collection=collection_pb2.Collection(
                                name="bench",
                                embedder=collection_pb2.EmbedderConfig(
                                    provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, dimensions=DIMS
                                ),
                            )
                        )
                    )
                if mode.startswith("grpc"):
                    # The clients run in processes of their own (up to 4, the clients spread over
                    # them), so the server's process does only the server's work.
                    seed(url, "bench", jobs + clients * WARMUP_CYCLES)
                    with without_key_check() if mode == "grpc-noauth" else contextlib.nullcontext():
                        server_cpu = time.process_time()
                        counts, elapsed, client_cpu = await client_processes(f"127.0.0.1:{app.port}", keys["worker"], clients)
                        server_cpu = time.process_time() - server_cpu
                    assert sum(counts) == jobs, counts
                    rate, cpu = jobs / elapsed, (server_cpu / jobs, client_cpu / jobs)
                else:
                    cpu_before = time.process_time()
                    rate = await inprocess_cycles_per_second(app, clients, jobs)
                    cpu = ((time.process_time() - cpu_before) / (jobs + clients * WARMUP_CYCLES), 0.0)
                results.append((mode, clients, rate, *cpu))
                await app.stop(0)
    return results


async def claim_latencies(admin_uri: str, claims: int) -> dict[int, tuple[float, float]]:
    """p50 and p99 (ms) of single claims for each queue size: QUEUED due PENDING jobs beside
    EXPIRED RUNNING jobs whose leases expired (so the claims take over expired leases, the
    costlier path). The queue sizes take turns, one claim each, so that a burst of noise on a
    shared machine lands on all of them alike."""
    apps = {}
    for queued in QUEUED:
        name = f"latency_{queued}"
        ensure_database(admin_uri, name, template="bench_template")
        url = database_uri(admin_uri, name)
        add_collection(url)
        seed(url, "bench", queued + EXPIRED)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "UPDATE ingestion_jobs SET status = 'RUNNING', attempts = 1, locked_at = now() - interval '1 hour',"
                " lease_token = gen_random_uuid(), locked_by = 'gone'"
                " WHERE id IN (SELECT id FROM ingestion_jobs ORDER BY id LIMIT %s)",
                (EXPIRED,),
            )
            conn.execute("VACUUM ANALYZE ingestion_jobs, documents")
        apps[queued] = IngestApp(IngestSettings(database_url=url, bind="127.0.0.1:0", log_json=False, log_level="WARNING"))
        await apps[queued].start()
    try:
        seconds: dict[int, list[float]] = {queued: [] for queued in QUEUED}
        for _ in range(claims):
            for queued, app in apps.items():
                started = time.perf_counter()
                job = await app.store.claim_job("bench")
                seconds[queued].append(time.perf_counter() - started)
                assert job is not None
        result = {}
        for queued, taken in seconds.items():
            ms = sorted(s * 1000 for s in taken)
            result[queued] = (statistics.median(ms), ms[int(len(ms) * 0.99) - 1])
        return result
    finally:
        for app in apps.values():
            await app.close()


def print_cycles(
    results: list[tuple[str, int, float, float, float]], reference: dict[int, float | None], args: argparse.Namespace
) -> None:
    print(
        f"\nno-op claim→4 stages→complete cycles/s ({args.jobs} jobs, median of {args.repeats} runs, "
        f"{os.cpu_count()} cores; gRPC clients in up to 4 processes of their own)"
    )
    header = (
        f"{'clients':>7} | {'gRPC cycles/s':>13} | {'in-process cycles/s':>19} | {'gRPC / in-process':>17} |"
        f" {'gRPC no auth':>12} | {'auth cost (time/cycle)':>22}"
    )
    print(header)
    print("-" * len(header))
    for clients in CLIENTS:
        g = statistics.median(r[2] for r in results if r[0] == "grpc" and r[1] == clients)
        n = statistics.median(r[2] for r in results if r[0] == "grpc-noauth" and r[1] == clients)
        p = statistics.median(r[2] for r in results if r[0] == "in-process" and r[1] == clients)
        print(f"{clients:>7} | {g:>13.1f} | {p:>19.1f} | {g / p:>16.2f}x | {n:>12.1f} | {n / g:>21.3f}x")
    print("target: auth cost ≤ 1.05× (time per cycle with authentication / without)")  # noqa: RUF001 - a times sign
    print("\nPython CPU per cycle, ms (median): where gRPC's time goes; PostgreSQL's is the same in both modes")
    print(
        f"{'clients':>7} | {'in-process (client+server)':>26} | {'gRPC server':>11} | {'gRPC clients':>12} | {'gRPC added':>10}"
    )
    print("-" * 80)
    for clients in CLIENTS:
        p = statistics.median(r[3] for r in results if r[0] == "in-process" and r[1] == clients) * 1000
        server = statistics.median(r[3] for r in results if r[0] == "grpc" and r[1] == clients) * 1000
        client = statistics.median(r[4] for r in results if r[0] == "grpc" and r[1] == clients) * 1000
        print(f"{clients:>7} | {p:>26.2f} | {server:>11.2f} | {client:>12.2f} | {server + client - p:>10.2f}")
    if all(v is not None for v in reference.values()):
        print(
            f"\nreference: pgqueuer 1.6 no-op jobs on the same PostgreSQL ({args.pgqueuer_jobs} jobs; one job = one transition,"
            " one Sluice cycle = six)"
        )
        print(f"{'clients':>7} | {'pgqueuer jobs/s':>15} | {'Sluice in-process transitions/s':>31} | {'ratio':>6}")
        print("-" * 70)
        for clients in CLIENTS:
            p = statistics.median(r[2] for r in results if r[0] == "in-process" and r[1] == clients)
            print(f"{clients:>7} | {reference[clients]:>15.0f} | {p * 6:>31.0f} | {p * 6 / reference[clients]:>5.2f}x")
    else:
        print("\n(pgqueuer is not installed: `pip install -r bench/requirements.txt` adds the reference column)")


def main() -> None:
    if sys.argv[1:2] == ["--client"]:  # one process of gRPC clients (client_processes)
        address, key, count, name = sys.argv[2:6]
        asyncio.run(_client_main(address, key, int(count), name))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--claims", type=int, default=1000, help="claims timed for each queue size")
    parser.add_argument("--pgqueuer-jobs", type=int, default=3000)
    parser.add_argument("--only-latency", action="store_true", help="the claim latency table only")
    args = parser.parse_args()
    with embedded_postgres("sluice-bench-") as admin:
        ensure_database(admin, "bench_template")
        upgrade(database_uri(admin, "bench_template"))
        keys = bootstrap_keys(database_uri(admin, "bench_template"))
        results = [] if args.only_latency else asyncio.run(run(admin, args.jobs, args.repeats, keys))
        latencies = asyncio.run(claim_latencies(admin, args.claims))
        ensure_database(admin, "pgqueuer")
        reference = (
            {}
            if args.only_latency
            else {
                c: asyncio.run(pgqueuer_reference.jobs_per_second(database_uri(admin, "pgqueuer"), args.pgqueuer_jobs, c))
                for c in CLIENTS
            }
        )
    if not args.only_latency:
        print_cycles(results, reference, args)
    print(
        f"\nclaim latency, in-process, {args.claims} claims one at a time per queue size (the sizes taking turns),"
        f" {EXPIRED:,} RUNNING jobs with expired leases beside the queue"
    )
    print(f"{'queued':>8} | {'p50 ms':>7} | {'p99 ms':>7} | {'p99 / p99 at 1,000':>18}")
    print("-" * 50)
    for queued in QUEUED:
        p50, p99 = latencies[queued]
        print(f"{queued:>8,} | {p50:>7.2f} | {p99:>7.2f} | {p99 / latencies[QUEUED[0]][1]:>17.2f}x")
    print("target: p99 at 100,000 ≤ 1.2× p99 at 1,000")  # noqa: RUF001 - a times sign
    sys.stdout.flush()


if __name__ == "__main__":
    main()
