"""The reference column of bench/ingest_bench.py: pgqueuer's no-op jobs on the same embedded
PostgreSQL in the same run (pgqueuer is a bench-only dependency; install it with
`pip install pgqueuer==1.6.0`; without it the column is left out).

A pgqueuer job is one transition (queued → done); a Sluice cycle is six (claim, four stages,
the commit). The per-transition figure is the fair comparison.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta


async def jobs_per_second(url: str, jobs: int, consumers: int) -> float | None:
    try:
        import psycopg
        from pgqueuer import PsycopgDriver, Queries, QueueManager
    except ImportError:
        return None
    setup = await psycopg.AsyncConnection.connect(url, autocommit=True)
    queries = Queries(PsycopgDriver(setup))
    if not await queries.has_table("pgqueuer"):
        await queries.install()
    await queries.clear_queue()
    for start in range(0, jobs, 1000):
        n = min(1000, jobs - start)
        await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
    done = 0
    finished = asyncio.Event()
    managers, connections = [], [setup]
    for _ in range(consumers):
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        connections.append(conn)
        manager = QueueManager(Queries(PsycopgDriver(conn)))

        @manager.entrypoint("noop")
        async def noop(job) -> None:
            nonlocal done
            done += 1
            if done >= jobs:
                finished.set()

        managers.append(manager)
    started = time.perf_counter()
    tasks = [asyncio.create_task(m.run(dequeue_timeout=timedelta(seconds=1), batch_size=10)) for m in managers]
    try:
        await asyncio.wait_for(finished.wait(), 300)
        elapsed = time.perf_counter() - started
    finally:
        for manager in managers:
            manager.shutdown.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for conn in connections:
            await conn.close()
    return jobs / elapsed
