"""Round trips and statements per job cycle, by call (claim, ReportStage x4, CompleteJob),
counted in psycopg's Python layer (noise-free, unlike cycles/s on a shared machine).

    .venv/bin/python -m bench.round_trips [--jobs 50]

A round trip is a statement or BEGIN/COMMIT sent outside pipeline mode, a pipeline sync or
flush, or a COPY (two: its start and its end).
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np
from psycopg import _connection_base, _pipeline_base, cursor_async
from sluice_ingest.domain import DocumentStatus
from sluice_ingest.main import IngestApp
from sluice_ingest.settings import IngestSettings
from sluice_ingest.store import ChunkRow

from bench.embedded import embedded_postgres, migrated_database
from bench.ingest_bench import DIMS, add_collection, seed

COUNTS = {"round_trips": 0, "statements": 0, "commands": 0}
_Pipeline = _pipeline_base.BasePipeline
_sync, _exit, _fetch = _Pipeline._sync_gen, _Pipeline._exit_gen, _Pipeline._fetch_gen
_command = _connection_base.BaseConnection._exec_command
_execute, _copy = cursor_async.AsyncCursor.execute, cursor_async.AsyncCursor.copy


def _counted_sync(self):
    COUNTS["round_trips"] += 1
    return (yield from _sync(self))


def _counted_exit(self):
    COUNTS["round_trips"] += 1
    return (yield from _exit(self))


def _counted_fetch(self, *, flush):
    if flush and self.result_queue:
        COUNTS["round_trips"] += 1
    return (yield from _fetch(self, flush=flush))


def _counted_command(self, command, result_format=0):
    COUNTS["commands"] += 1
    if not self._pipeline:
        COUNTS["round_trips"] += 1
    return (yield from _command(self, command, result_format))


async def _counted_execute(self, query, params=None, **kwargs):
    COUNTS["statements"] += 1
    if not self._conn._pipeline:
        COUNTS["round_trips"] += 1
    return await _execute(self, query, params, **kwargs)


def _counted_copy(self, *args, **kwargs):
    COUNTS["statements"] += 1
    COUNTS["round_trips"] += 2
    return _copy(self, *args, **kwargs)


def install() -> None:
    _Pipeline._sync_gen, _Pipeline._exit_gen, _Pipeline._fetch_gen = _counted_sync, _counted_exit, _counted_fetch
    _connection_base.BaseConnection._exec_command = _counted_command
    cursor_async.AsyncCursor.execute, cursor_async.AsyncCursor.copy = _counted_execute, _counted_copy


async def run(url: str, jobs: int) -> None:
    app = IngestApp(IngestSettings(database_url=url, bind="127.0.0.1:0", log_json=False, log_level="WARNING"))
    await app.start()
    add_collection(url)
    seed(url, "bench", jobs)
    store = app.store
    vector = np.random.default_rng(0).standard_normal(DIMS).astype(np.float32)
    calls: dict[str, list[dict[str, int]]] = {}

    async def measure(name, coro):
        before = dict(COUNTS)
        result = await coro
        calls.setdefault(name, []).append({k: COUNTS[k] - before[k] for k in COUNTS})
        return result

    install()
    for _ in range(jobs):
        job = await measure("ClaimJob", store.claim_job("w"))
        for stage in (DocumentStatus.PARSING, DocumentStatus.CHUNKING, DocumentStatus.EMBEDDING, DocumentStatus.INDEXING):
            await measure("ReportStage", store.report_stage(job.job_id, job.lease_token, stage, 0, 0, ""))
        await measure(
            "CompleteJob", store.complete_job(job.job_id, job.lease_token, [ChunkRow(0, "no-op", 0, "", "", "", vector, "no op")])
        )
    total = dict.fromkeys(COUNTS, 0.0)
    for name, counted in calls.items():
        mean = {k: sum(c[k] for c in counted) / len(counted) for k in COUNTS}
        per_cycle = len(counted) / jobs
        for k in COUNTS:
            total[k] += mean[k] * per_cycle
        print(
            f"{name:>12} ×{per_cycle:.0f}: round trips {mean['round_trips']:.1f}, statements {mean['statements']:.1f},"  # noqa: RUF001 - a times sign
            f" BEGIN/COMMIT/SET {mean['commands']:.1f}"
        )
    print(
        f"{'per cycle':>15}: round trips {total['round_trips']:.1f}, statements {total['statements']:.1f},"
        f" BEGIN/COMMIT/SET {total['commands']:.1f}"
    )
    await app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=50)
    args = parser.parse_args()
    with embedded_postgres("sluice-round-trips-") as admin:
        url = migrated_database(admin, "round_trips")
        asyncio.run(run(url, args.jobs))


if __name__ == "__main__":
    main()
