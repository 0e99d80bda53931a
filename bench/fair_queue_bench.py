"""Fair queues (docs/tenancy.md, "Fair queues"): what a claim costs as the queue grows, what an
enqueue costs, and who gets the workers, beside the first-in-first-out claim it replaced, run in
the same process on the same database.

    .venv/bin/python -m bench.fair_queue_bench [--sizes 1000,10000,100000] [--tenants 50] [--collections 4]

Claim cost: the queue holds `size` jobs spread over tenants and collections (both priorities);
claims alternate between the fair statement (FAST_CLAIM_SQL, as ClaimStore runs it) and the
old FIFO statement (the oldest due job), on one connection, so both see the same machine at the
same moment. Enqueue: the bulk INSERT of the jobs with migration 0032's trigger (which tags them)
and, as the baseline, the same rows with triggers off (session_replication_role = replica).
Fairness: real claims in the order workers would make them (the work itself is not simulated:
what counts is which job each claim takes), for the scenarios of issue 35, each beside FIFO.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections import Counter

import psycopg
from psycopg import sql
from sluice_ingest.domain import JobStatus, job_sources
from sluice_ingest.main import IngestApp
from sluice_ingest.settings import IngestSettings
from sluice_ingest.store.claims import CLAIM_TAIL, FAST_CLAIM_SQL, INLINE_CONTENT_BYTES
from sluice_ingest.store.queue_sql import QUEUE_LITERALS

from bench.embedded import embedded_postgres, migrated_database

INTERACTIVE, BULK = 1, 2

# The claim before fair queues (the oldest due job), with today's tail: the baseline.
FIFO_CLAIM_SQL = (
    sql.SQL(
        """
WITH {kind_policy}, candidate AS (
    SELECT id, NULL::uuid AS expired_token FROM ingestion_jobs
    WHERE status = {pending} AND attempts < max_attempts AND available_at <= now()
    ORDER BY available_at LIMIT 1 FOR UPDATE SKIP LOCKED
)"""
        + CLAIM_TAIL.replace("UNION ALL\n{others}", "")
    )
    .format(**QUEUE_LITERALS, inline=sql.Literal(INLINE_CONTENT_BYTES))
    .as_bytes(None)
)


def add_tenants(url: str, tenants: int, collections: int) -> list[tuple[str, str]]:
    """`tenants` tenants of `collections` hashing collections each (set-up, not measured)."""
    lanes = []
    with psycopg.connect(url, autocommit=True) as conn:
        for t in range(tenants):
            tenant = f"t{t}"
            conn.execute("INSERT INTO tenants (name) VALUES (%s) ON CONFLICT DO NOTHING", (tenant,))
            for c in range(collections):
                conn.execute(
                    "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions,"
                    " chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts)"
                    " SELECT id, %s, 'hashing', 'hashing-v1', 8, 1500, 1000, 0, 3 FROM tenants WHERE name = %s",
                    (f"c{c}", tenant),
                )
                lanes.append((tenant, f"c{c}"))
    return lanes


def enqueue(conn: psycopg.Connection, tenant: str, collection: str, count: int, priority: int) -> list[str]:
    rows = conn.execute(
        """
        WITH c AS (SELECT c.id, c.tenant_id FROM collections c JOIN tenants t ON t.id = c.tenant_id
                   WHERE t.name = %s AND c.name = %s),
             d AS (INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256, size_bytes)
                   SELECT c.tenant_id, c.id, 'f' || g || '.txt', 'text/plain', encode(sha256((%s || g)::bytea), 'hex'), 1
                   FROM c, generate_series(1, %s) g RETURNING id)
        INSERT INTO ingestion_jobs (document_id, max_attempts, priority) SELECT d.id, 3, %s FROM d RETURNING document_id::text
        """,
        (tenant, collection, str(uuid.uuid4()), count, priority),
    ).fetchall()
    return [r[0] for r in rows]


def owner_of(url: str) -> dict[str, tuple[str, str, int]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT d.id::text, t.name, c.name, j.priority FROM documents d JOIN collections c ON c.id = d.collection_id"
            " JOIN tenants t ON t.id = d.tenant_id JOIN ingestion_jobs j ON j.document_id = d.id"
        ).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


class Claimer:
    """Claims through the fair store (as ingest-api does) or the FIFO statement."""

    def __init__(self, app: IngestApp, url: str) -> None:
        self.app, self.url = app, url
        self.conn = psycopg.connect(url, autocommit=True)
        self.params = {"worker": "bench", "lease": 3600.0, "sources": job_sources(JobStatus.RUNNING)}

    async def fair(self) -> str | None:
        """ClaimStore.claim_job, as ingest-api runs it (its capped and overdue paths too)."""
        job = await self.app.stores.queue.claim_job("bench")
        return None if job is None else str(job.document_id)

    def fair_statement(self) -> str | None:
        """The fair claim's common statement on this connection, like `fifo`."""
        row = self.conn.execute(FAST_CLAIM_SQL, self.params).fetchone()
        return None if row is None else str(row[6])

    def fifo(self) -> str | None:
        row = self.conn.execute(FIFO_CLAIM_SQL, self.params).fetchone()
        return None if row is None else str(row[6])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def claim_cost(admin: str, size: int, tenants: int, collections: int, claims: int) -> dict[str, float]:
    url = migrated_database(admin, f"fair_cost_{size}")
    lanes = add_tenants(url, tenants, collections)
    per_lane = max(1, size // len(lanes))
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        for i, (tenant, collection) in enumerate(lanes):
            enqueue(conn, tenant, collection, per_lane, BULK if i % 3 == 0 else INTERACTIVE)
        enqueue_seconds = time.perf_counter() - started
        # The baseline: the same rows without the trigger (its columns given by hand).
        conn.execute("SET session_replication_role = replica")
        started = time.perf_counter()
        conn.execute(
            """
            WITH c AS (SELECT c.id, c.tenant_id FROM collections c ORDER BY c.id LIMIT 1),
                 d AS (INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256, size_bytes)
                       SELECT c.tenant_id, c.id, 'b' || g, 'text/plain', encode(sha256(('base' || g)::bytea), 'hex'), 1
                       FROM c, generate_series(1, %s) g RETURNING id, collection_id, tenant_id)
            INSERT INTO ingestion_jobs (document_id, max_attempts, collection_id, tenant_id, status)
            SELECT d.id, 3, d.collection_id, d.tenant_id, 'SUCCEEDED' FROM d
            """,
            (per_lane * len(lanes),),
        )
        baseline_seconds = time.perf_counter() - started
        conn.execute("RESET session_replication_role")
        # Measure the claims, not autovacuum and the checkpoint catching up with the seeding.
        conn.execute("VACUUM (ANALYZE) ingestion_jobs, documents")
        conn.execute("CHECKPOINT")
    app = IngestApp(IngestSettings(database_url=url, bind="127.0.0.1:0", log_json=False, log_level="WARNING"))
    await app.start()
    claimer = Claimer(app, url)
    fair, fifo = [], []
    for _ in range(20):  # warm both statements (prepared, caches)
        claimer.fair_statement()
        claimer.fifo()
    for _ in range(claims):
        t0 = time.perf_counter()
        claimer.fair_statement()
        fair.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        claimer.fifo()
        fifo.append((time.perf_counter() - t0) * 1000)
    claimer.conn.close()
    await app.close()
    return {
        "queued": per_lane * len(lanes),
        "enqueue_us": enqueue_seconds / (per_lane * len(lanes)) * 1e6,
        "baseline_enqueue_us": baseline_seconds / (per_lane * len(lanes)) * 1e6,
        "fair_p50": statistics.median(fair),
        "fair_p99": percentile(fair, 0.99),
        "fifo_p50": statistics.median(fifo),
        "fifo_p99": percentile(fifo, 0.99),
    }


async def scenario(admin: str, name: str, setup, claims: int, fifo: bool) -> tuple[list[str], dict[str, tuple[str, str, int]]]:
    """Run `setup(conn, claim)` on a fresh database and return the claimed documents in order."""
    url = migrated_database(admin, f"fair_{name}_{'fifo' if fifo else 'fair'}")
    add_tenants(url, 4, 2)
    app = IngestApp(IngestSettings(database_url=url, bind="127.0.0.1:0", log_json=False, log_level="WARNING"))
    await app.start()
    claimer = Claimer(app, url)
    order: list[str] = []

    async def claim(n: int) -> None:
        for _ in range(n):
            got = claimer.fifo() if fifo else await claimer.fair()
            if got is None:
                return
            order.append(got)

    with psycopg.connect(url, autocommit=True) as conn:
        await setup(conn, claim)
    await claim(claims)
    claimer.conn.close()
    await app.close()
    return order, owner_of(url)


async def fairness(admin: str) -> list[tuple[str, str, str, str]]:
    rows = []

    # 1. Tenant t0 holds 2,000 queued pages; t1 uploads one page once t0's work has begun.
    async def backlog(conn, claim):
        enqueue(conn, "t0", "c0", 2000, INTERACTIVE)
        await claim(100)
        marker["id"] = enqueue(conn, "t1", "c0", 1, INTERACTIVE)[0]

    marker: dict[str, str] = {}
    waited_by: dict[bool, int] = {}
    for fifo in (False, True):
        order, _ = await scenario(admin, "backlog", backlog, 2000, fifo)
        waited_by[fifo] = order.index(marker["id"]) - 100
    rows.append(
        ("t1's one upload behind t0's 2,000 pages: jobs claimed before it", str(waited_by[False]), str(waited_by[True]), "≤ 1")
    )

    # 2. Four tenants bulk-loading at once (each 1,000 bulk pages, queued one tenant after another).
    async def four(conn, claim):
        for t in range(4):
            enqueue(conn, f"t{t}", "c0", 1000, BULK)

    shares: dict[bool, float] = {}
    for fifo in (False, True):
        order, owners = await scenario(admin, "four", four, 800, fifo)
        counts = Counter(owners[d][0] for d in order[:800])
        shares[fifo] = min(counts.get(f"t{t}", 0) for t in range(4)) / 200
    rows.append(
        (
            "4 tenants bulk-loading: smallest share of 800 claims / fair share",
            f"{shares[False]:.2f}",
            f"{shares[True]:.2f}",
            "≥ 0.8",
        )
    )

    # 3. An interactive upload during a 2,000-page sync of its own collection.
    async def sync(conn, claim):
        enqueue(conn, "t0", "c0", 2000, BULK)
        await claim(50)
        marker["id"] = enqueue(conn, "t0", "c0", 1, INTERACTIVE)[0]

    for fifo in (False, True):
        order, _ = await scenario(admin, "sync", sync, 2000, fifo)
        waited_by[fifo] = order.index(marker["id"]) - 50
    rows.append(
        ("interactive upload during a 2,000-page sync: jobs before it", str(waited_by[False]), str(waited_by[True]), "≤ 1")
    )

    # 4. Weights 3 : 1 while both have work.
    async def weights(conn, claim):
        conn.execute("UPDATE tenants SET queue_weight = 3 WHERE name = 't0'")
        enqueue(conn, "t0", "c0", 1000, BULK)
        enqueue(conn, "t1", "c0", 1000, BULK)

    for fifo in (False, True):
        order, owners = await scenario(admin, "weights", weights, 400, fifo)
        counts = Counter(owners[d][0] for d in order[:400])
        shares[fifo] = counts.get("t0", 0) / max(1, counts.get("t1", 0))
    rows.append(("weights 3 : 1 — claims of t0 per claim of t1 (of 400)", f"{shares[False]:.2f}", f"{shares[True]:.2f}", "3"))
    return rows


async def run(sizes: list[int], tenants: int, collections: int, claims: int) -> None:
    with embedded_postgres("sluice-fair-queue-") as admin:
        print(f"Claim cost: {tenants} tenants, {collections} collections, both priorities; {claims} claims of each, alternating")
        print(
            f"{'queued':>8} | {'fair p50':>9} {'fair p99':>9} | {'FIFO p50':>9} {'FIFO p99':>9} | {'ratio':>6} | enqueue µs/job"
        )
        results = []
        for size in sizes:
            r = await claim_cost(admin, size, tenants, collections, claims)
            results.append(r)
            print(
                f"{r['queued']:>8} | {r['fair_p50']:>7.2f}ms {r['fair_p99']:>7.2f}ms | {r['fifo_p50']:>7.2f}ms"
                f" {r['fifo_p99']:>7.2f}ms | {r['fair_p50'] / r['fifo_p50']:>6.2f} | {r['enqueue_us']:.0f} ({r['baseline_enqueue_us']:.0f})",
                flush=True,
            )
        if len(results) > 1:
            first, last = results[0], results[-1]
            print(
                f"p99 at {last['queued']} over p99 at {first['queued']}: fair {last['fair_p99'] / first['fair_p99']:.2f}"
                f" (target ≤ 1.2), FIFO {last['fifo_p99'] / first['fifo_p99']:.2f}"
            )
        print("\nFairness (real claims, in order)")
        print(f"{'scenario':<70} | {'fair':>6} | {'FIFO':>6} | target")
        for name, fair, fifo, target in await fairness(admin):
            print(f"{name:<70} | {fair:>6} | {fifo:>6} | {target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--collections", type=int, default=4)
    parser.add_argument("--claims", type=int, default=400)
    args = parser.parse_args()
    asyncio.run(run([int(s) for s in args.sizes.split(",")], args.tenants, args.collections, args.claims))


if __name__ == "__main__":
    main()
