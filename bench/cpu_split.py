"""Where a cycle's CPU goes as clients are added: in-process cycles/s at 1, 4, 16 and 32 clients
with the CPU time per cycle of this Python process (client and server calls) and of every
PostgreSQL process (backends, WAL writer, checkpointer), read from the kernel's counters. On a
machine of N cores, cycles/s can never exceed N / (total ms per cycle) x 1000.

    .venv/bin/python -m bench.cpu_split [clients ...] [--jobs 1500] [--pools 10 36]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import psutil
from sluice_common import gctune
from sluice_ingest.main import IngestApp
from sluice_ingest.settings import IngestSettings

from bench.embedded import embedded_postgres, migrated_database
from bench.ingest_bench import WARMUP_CYCLES, add_collection, inprocess_client, seed


def postgres_cpu_seconds() -> float:
    total = 0.0
    for process in psutil.process_iter(["name"]):
        try:
            if (process.info["name"] or "").startswith("postgres"):
                times = process.cpu_times()
                total += times.user + times.system
        except psutil.Error:  # ended meanwhile
            pass
    return total


async def measure(url: str, clients: int, jobs: int, pool: int) -> tuple[float, float, float]:
    """(cycles/s, Python ms/cycle, PostgreSQL ms/cycle) after each client's warm-up; `pool`: the
    ingest-api's connections, which the clients share."""
    app = IngestApp(
        IngestSettings(
            database_url=url, bind="127.0.0.1:0", log_json=False, log_level="WARNING", pool_max_size=pool, rate_limit_per_second=0
        )
    )
    await app.start()
    gctune.tune()  # as ingest-api's main does once started
    try:
        seed(url, "bench", jobs + clients * WARMUP_CYCLES)
        await asyncio.gather(*(inprocess_client(app, f"w{i}", WARMUP_CYCLES) for i in range(clients)))
        me = psutil.Process()
        python, postgres, started = sum(me.cpu_times()[:2]), postgres_cpu_seconds(), time.perf_counter()
        counts = await asyncio.gather(*(inprocess_client(app, f"w{i}") for i in range(clients)))
        elapsed = time.perf_counter() - started
        assert sum(counts) == jobs, counts
        python = sum(me.cpu_times()[:2]) - python
        postgres = postgres_cpu_seconds() - postgres
        return jobs / elapsed, python / jobs * 1000, postgres / jobs * 1000
    finally:
        await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1500)
    parser.add_argument(
        "--pools",
        type=int,
        nargs="*",
        default=[IngestSettings().pool_max_size],
        help="ingest-api connection pool sizes to run each client count with (default: its default)",
    )
    parser.add_argument("clients", type=int, nargs="*", default=[1, 4, 16, 32])
    args = parser.parse_args()
    rows = []
    with embedded_postgres("sluice-cpu-") as admin:
        for clients in args.clients:
            for pool in args.pools:
                url = migrated_database(admin, f"cpu_{clients}_{pool}")
                add_collection(url)
                rows.append((clients, pool, *asyncio.run(measure(url, clients, args.jobs, pool))))
    cores = os.cpu_count() or 1
    print(f"\nin-process cycles, {args.jobs} per run after warm-up; CPU per cycle ({cores} cores)")
    print(
        f"{'clients':>7} | {'pool':>4} | {'cycles/s':>8} | {'Python ms':>9} | {'PostgreSQL ms':>13} | {'total ms':>8} | {'CPU busy':>8}"
    )
    print("-" * 77)
    for clients, pool, rate, python, postgres in rows:
        total = python + postgres
        print(
            f"{clients:>7} | {pool:>4} | {rate:>8.1f} | {python:>9.2f} | {postgres:>13.2f} | {total:>8.2f} |"
            f" {rate * total / 10 / cores:>7.0f}%"
        )


if __name__ == "__main__":
    main()
