"""Does NOTIFY serialise the queue's commits? In-process cycles/s at 4 and 32 clients with the
schema as shipped, and with pg_notify shadowed by a no-op for the same database (an experiment
only: nothing is woken then, the bench's clients never wait).

PostgreSQL takes one database-wide lock in PreCommit_Notify and holds it until the commit is
done, WAL flush included, so every transaction that sent a NOTIFY commits one at a time.
Every transition of a Sluice cycle notifies (the event function, the collection signal, the
jobs-available signal). If that lock is what makes 32 clients slower than 4, the no-op run
shows it: same work, no serialisation.

    .venv/bin/python -m bench.notify_cost [--jobs 400] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import numpy as np
import psycopg

from bench.ingest_bench import DIMS, add_collection, inprocess_client, seed
from bench.embedded import embedded_postgres
from sluice_common.embedded_pg import database_uri, ensure_database
from sluice_ingest.main import IngestApp
from sluice_ingest.migrations import upgrade
from sluice_ingest.settings import IngestSettings

SHADOW = """
    CREATE FUNCTION public.pg_notify(text, text) RETURNS void LANGUAGE sql AS 'SELECT NULL::void';
"""


async def cycles_per_second(url: str, clients: int, jobs: int) -> float:
    app = IngestApp(IngestSettings(database_url=url, bind="127.0.0.1:0", log_json=False, log_level="WARNING",
                                   pool_max_size=clients + 4, rate_limit_per_second=0))
    await app.start()
    try:
        vector = np.random.default_rng(0).standard_normal(DIMS).astype(np.float32)
        started = time.perf_counter()
        counts = await asyncio.gather(*(inprocess_client(app, f"w{i}", vector) for i in range(clients)))
        elapsed = time.perf_counter() - started
        assert sum(counts) == jobs, counts
        return jobs / elapsed
    finally:
        await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results: dict[tuple[str, int], list[float]] = {}
    with embedded_postgres("sluice-notify-") as admin:
        ensure_database(admin, "notify_template")
        upgrade(database_uri(admin, "notify_template"))
        for round_ in range(args.repeats):
            for clients in (4, 32):
                for variant in ("as shipped", "pg_notify no-op"):
                    name = f"n{round_}_{clients}_{'noop' if 'no-op' in variant else 'ship'}"
                    ensure_database(admin, name, template="notify_template")
                    url = database_uri(admin, name)
                    add_collection(url)
                    seed(url, "bench", args.jobs)
                    if "no-op" in variant:
                        with psycopg.connect(url, autocommit=True) as conn:
                            conn.execute(SHADOW)
                            conn.execute(f"ALTER DATABASE {name} SET search_path = public, pg_catalog")
                    rate = asyncio.run(cycles_per_second(url, clients, args.jobs))
                    results.setdefault((variant, clients), []).append(rate)
    print(f"\nin-process cycles/s, {args.jobs} jobs, median of {args.repeats} interleaved runs")
    print(f"{'clients':>7} | {'as shipped':>10} | {'pg_notify no-op':>15} | {'ratio':>6}")
    print("-" * 48)
    for clients in (4, 32):
        shipped = statistics.median(results[("as shipped", clients)])
        noop = statistics.median(results[("pg_notify no-op", clients)])
        print(f"{clients:>7} | {shipped:>10.1f} | {noop:>15.1f} | {noop / shipped:>5.2f}x")


if __name__ == "__main__":
    main()
