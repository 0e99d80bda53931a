"""Where a job cycle's time goes: cProfile of in-process claim → 4 stages → complete cycles.

    .venv/bin/python -m bench.profile_cycle [--jobs 400]

Prints cycles/s, the Python CPU per cycle (client and server in this process), and the
functions with the most time of their own; the psycopg send counts are the round trips.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import time

from sluice_ingest.main import IngestApp
from sluice_ingest.settings import IngestSettings

from bench.embedded import embedded_postgres, migrated_database
from bench.ingest_bench import add_collection, inprocess_client, seed


async def profile(url: str, jobs: int) -> None:
    app = IngestApp(IngestSettings(database_url=url, bind="127.0.0.1:0", log_json=False, log_level="WARNING"))
    await app.start()
    try:
        add_collection(url)
        seed(url, "bench", jobs)
        profiler = cProfile.Profile()
        wall, cpu = time.perf_counter(), time.process_time()
        profiler.enable()
        done = await inprocess_client(app, "profile")
        profiler.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(
            f"{done} cycles: {done / wall:.1f}/s, {wall / done * 1000:.2f} ms/cycle, "
            f"Python CPU {cpu / done * 1000:.2f} ms/cycle (with the profiler's own overhead)"
        )
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
        print(out.getvalue())
    finally:
        await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=400)
    args = parser.parse_args()
    with embedded_postgres("sluice-profile-") as admin:
        url = migrated_database(admin, "profile")
        asyncio.run(profile(url, args.jobs))


if __name__ == "__main__":
    main()
