"""What NOTIFY costs the queue: in-process cycles/s at 4 and 32 clients with nobody watching
(as shipped since migration 0014: no event notifies) and with the collection watched (a row in
`event_listeners`, as a WatchCollection stream or a webhook subscription registers it: every
event of the collection notifies).

PostgreSQL takes one database-wide lock in PreCommit_Notify and holds it until the commit is
done, WAL flush included, so every transaction that sent a NOTIFY commits one at a time. Before
0014 every transition notified, watched or not (bench/wait_events.py showed that lock as most of
the waiting at 32 clients); the "watched" column is now the price of being watched.

    .venv/bin/python -m bench.notify_cost [--jobs 600] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

import psycopg
from sluice_common.embedded_pg import database_uri, ensure_database
from sluice_ingest.main import IngestApp
from sluice_ingest.migrations import upgrade
from sluice_ingest.notify import COLLECTIONS_CHANNEL
from sluice_ingest.settings import IngestSettings

from bench.embedded import embedded_postgres
from bench.ingest_bench import add_collection, inprocess_cycles_per_second

VARIANTS = ("nobody watching", "collection watched")

WATCH = """
    INSERT INTO event_listeners (channel, key, listener, expires_at)
    SELECT %s, id::text, gen_random_uuid(), now() + interval '1 hour' FROM collections WHERE name = 'bench'
"""


async def cycles_per_second(url: str, clients: int, jobs: int) -> float:
    app = IngestApp(
        IngestSettings(database_url=url, bind="127.0.0.1:0", log_json=False, log_level="WARNING", rate_limit_per_second=0)
    )
    await app.start()
    try:
        return await inprocess_cycles_per_second(app, clients, jobs)
    finally:
        await app.close()


def prepare(admin: str, name: str, watched: bool) -> str:
    """A migrated database `name` with the bench collection (watched or not); returns its URI."""
    ensure_database(admin, name, template="notify_template")
    url = database_uri(admin, name)
    add_collection(url)
    if watched:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(WATCH, (COLLECTIONS_CHANNEL,))
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results: dict[tuple[str, int], list[float]] = {}
    with embedded_postgres("sluice-notify-") as admin:
        ensure_database(admin, "notify_template")
        upgrade(database_uri(admin, "notify_template"))
        for round_ in range(args.repeats):
            for clients in (4, 32):
                for variant in VARIANTS:
                    url = prepare(admin, f"n{round_}_{clients}_{VARIANTS.index(variant)}", variant == VARIANTS[1])
                    rate = asyncio.run(cycles_per_second(url, clients, args.jobs))
                    results.setdefault((variant, clients), []).append(rate)
    print(f"\nin-process cycles/s, {args.jobs} jobs, median of {args.repeats} interleaved runs")
    print(f"{'clients':>7} | {VARIANTS[0]:>15} | {VARIANTS[1]:>18} | {'watched / not':>13}")
    print("-" * 64)
    for clients in (4, 32):
        quiet = statistics.median(results[(VARIANTS[0], clients)])
        watched = statistics.median(results[(VARIANTS[1], clients)])
        print(f"{clients:>7} | {quiet:>15.1f} | {watched:>18.1f} | {watched / quiet:>12.2f}x")


if __name__ == "__main__":
    main()
