"""What the queue's sessions wait on: in-process cycles at 4 and 32 clients while a sampler reads
pg_stat_activity every 5 ms, counting each backend of the bench database by state and wait
event (CPU when active and not waiting). It is the profile behind "32 clients are slower than
4": where the added time goes inside PostgreSQL.

    .venv/bin/python -m bench.wait_events [--jobs 600] [--watched]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import threading
import time

import psycopg
from sluice_common.embedded_pg import database_uri, ensure_database
from sluice_ingest.migrations import upgrade

from bench.embedded import embedded_postgres
from bench.notify_cost import cycles_per_second, prepare

SAMPLE = """
    SELECT a.state, coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU')
           || coalesce(' (' || l.locktype || ' ' || l.classid::regclass || ' ' || l.objid || ' ' || l.mode || ')', '')
    FROM pg_stat_activity a
    LEFT JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
    WHERE a.datname = %s AND a.pid <> pg_backend_pid() AND a.backend_type = 'client backend'
"""


def sample(url: str, database: str, stop: threading.Event, counts: collections.Counter[str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            for state, wait in conn.execute(SAMPLE, (database,)).fetchall():
                if state == "active":
                    counts[wait] += 1
                elif state in ("idle in transaction", "idle in transaction (aborted)"):
                    counts["idle in transaction (client's turn)"] += 1
            time.sleep(0.005)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument(
        "--watched",
        action="store_true",
        help="the collection watched: every event notifies (as every one did before migration 0014)",
    )
    args = parser.parse_args()
    with embedded_postgres("sluice-waits-") as admin:
        ensure_database(admin, "notify_template")
        upgrade(database_uri(admin, "notify_template"))
        for clients in (4, 32):
            name = f"waits_{clients}"
            url = prepare(admin, name, args.watched)
            counts: collections.Counter[str] = collections.Counter()
            stop = threading.Event()
            sampler = threading.Thread(target=sample, args=(admin, name, stop, counts))
            sampler.start()
            try:
                rate = asyncio.run(cycles_per_second(url, clients, args.jobs))
            finally:
                stop.set()
                sampler.join()
            total = sum(counts.values()) or 1
            print(
                f"\n{clients} clients: {rate:.1f} cycles/s; backends seen busy, by what they were doing "
                f"({total} samples of every backend)"
            )
            for what, n in counts.most_common(10):
                print(f"  {what:<48} {n / total:>6.1%}")


if __name__ == "__main__":
    main()
