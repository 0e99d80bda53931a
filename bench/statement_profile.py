"""Where PostgreSQL's share of a job cycle goes: pg_stat_statements over in-process cycles.

The embedded server is restarted with pg_stat_statements preloaded and `track = all`, so the
statements that triggers and functions run are counted on their own lines. Prints, per cycle,
each statement's calls and execution time (top-level statements include the triggers they fire,
so the nested lines are a breakdown of them, not an addition), then the totals.

    .venv/bin/python -m bench.statement_profile [--clients 16] [--jobs 600]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
import time
from pathlib import Path

import psycopg
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database
from sluice_ingest.main import IngestApp
from sluice_ingest.migrations import upgrade
from sluice_ingest.settings import IngestSettings

from bench.ingest_bench import WARMUP_CYCLES, add_collection, inprocess_client, seed

TOP = """
    SELECT toplevel, calls, total_exec_time, rows, query
    FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
    WHERE d.datname = %s AND query NOT ILIKE '%%pg_stat_statements%%'
    ORDER BY total_exec_time DESC LIMIT %s
"""


async def cycles(url: str, clients: int, jobs: int) -> float:
    """Warm every client up (untimed, uncounted: the statistics are reset after), then run `jobs` cycles."""
    app = IngestApp(
        IngestSettings(database_url=url, bind="127.0.0.1:0", log_json=False, log_level="WARNING", rate_limit_per_second=0)
    )
    await app.start()
    try:
        seed(url, "bench", jobs + clients * WARMUP_CYCLES)
        await asyncio.gather(*(inprocess_client(app, f"w{i}", WARMUP_CYCLES) for i in range(clients)))
        async with app.pool.connection() as conn:
            await conn.execute("SELECT pg_stat_statements_reset()")
        started = time.perf_counter()
        counts = await asyncio.gather(*(inprocess_client(app, f"w{i}") for i in range(clients)))
        assert sum(counts) == jobs, counts
        return jobs / (time.perf_counter() - started)
    finally:
        await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sluice-statements-") as base:
        Path(base).chmod(0o755)
        server = EmbeddedPostgres(Path(base) / "data", cleanup="delete")
        admin = server.start()
        try:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
                conn.execute("ALTER SYSTEM SET pg_stat_statements.track = 'all'")
            server.pg_ctl("restart", "-w")
            ensure_database(admin, "profile")
            url = database_uri(admin, "profile")
            upgrade(url)
            add_collection(url)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            rate = asyncio.run(cycles(url, args.clients, args.jobs))
            with psycopg.connect(url, autocommit=True) as conn:
                rows = conn.execute(TOP, ("profile", args.top)).fetchall()
                (top_total,) = conn.execute(
                    "SELECT sum(total_exec_time) FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
                    " WHERE d.datname = 'profile' AND toplevel"
                ).fetchone()
        finally:
            server.stop()
    n = args.jobs
    print(
        f"\n{args.clients} clients, {n} cycles, {rate:.1f} cycles/s; execution time inside PostgreSQL per cycle"
        " (excludes parse, network, commit and WAL flush waits)"
    )
    print(f"{'level':>6} | {'calls/cycle':>11} | {'ms/cycle':>8} | {'ms/call':>7} | statement")
    print("-" * 110)
    for toplevel, calls, total, _rows, query in rows:
        text = re.sub(r"\s+", " ", query).strip()
        print(
            f"{'top' if toplevel else 'nested':>6} | {calls / n:>11.2f} | {total / n:>8.3f} | {total / calls:>7.3f} | {text[:70]}"
        )
    print(f"\ntop-level statements in all: {top_total / n:.3f} ms/cycle")


if __name__ == "__main__":
    main()
