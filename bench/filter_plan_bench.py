"""Filtered VECTOR search: where an exact scan of the filter's chunks stops beating the HNSW walk.

    .venv/bin/python -m bench.filter_plan_bench [--chunks 100000] [--fractions 0.01,0.02,0.03,0.05,0.1,0.2]
        [--queries 100] [--ef-search 40] [--db-dir DIR]

Loads `--chunks` latent vectors as bench/search_bench.py does (documents of 100 chunks, 10 % not
READY, metadata n = a permutation of the documents), builds the HNSW index, then for each
fraction f runs the filter `n LT f x documents` as raw SQL, as search's role under row-level
security, both ways in turns: the exact plan (selective_vector_query with no cap: the filter's
documents, their chunks scored one by one) and the walk (vector_query: the graph, the filter
applied to each chunk it visits). It prints their p50, recall@10 against numpy over the filtered
READY chunks, the ratio walk / exact, and the plan search picks as shipped
(max(SLUICE_SEARCH_EXACT_FILTER_MAX_CHUNKS, sqrt(walk cost x ef_search x chunks))). The crossing
of the two is how repository.EXACT_FILTER_WALK_COST was chosen (docs/search.md, "Filters").

`--db-dir DIR` keeps the loaded database, so a second sweep (other fractions, another ef_search)
skips the load and the build.
"""

from __future__ import annotations

import argparse
import math
import pickle
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg
from sluice.v1 import document_pb2
from sluice.v1 import search_service_pb2 as pb
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database, user_uri
from sluice_search import api
from sluice_search.domain import Collection, Limits
from sluice_search.vector_sql import EXACT_FILTER_CEILING, EXACT_FILTER_WALK_COST, selective_vector_query, vector_query

from bench.search_bench import DOC_CHUNKS, LATENT_DIMENSIONS, TENANT_ID, load, make_vectors, search_session

WARMUP = 20
SHIPPED_FLOOR = 2000  # SLUICE_SEARCH_EXACT_FILTER_MAX_CHUNKS's default


def prepare(base: Path, fresh: bool, args: argparse.Namespace, vectors: np.ndarray, rng: np.random.Generator):
    """The database (loaded once per DIR) and what the load returned."""
    server = EmbeddedPostgres(base / "pg", cleanup="stop")
    admin = server.start()
    if fresh:
        with psycopg.connect(admin, autocommit=True) as conn:
            for setting in ("shared_buffers = '1GB'", "fsync = off", "synchronous_commit = off"):
                conn.execute(f"ALTER SYSTEM SET {setting}")
        server.stop()
        admin = server.start()
        ensure_database(admin, "bench")
        from sluice_ingest.migrations import upgrade

        upgrade(database_uri(admin, "bench"))
        with psycopg.connect(database_uri(admin, "bench"), autocommit=True) as conn:
            conn.execute("CREATE ROLE sluice_search LOGIN IN ROLE sluice_search_reader")
        loaded = load(database_uri(admin, "bench"), vectors, 0.1, rng, 0.01)
        (base / "loaded.pickle").write_bytes(pickle.dumps(loaded))
    return server, user_uri(database_uri(admin, "bench"), "sluice_search"), pickle.loads((base / "loaded.pickle").read_bytes())


def sweep(
    reader: str,
    collection: Collection,
    vectors: np.ndarray,
    queries: np.ndarray,
    ready_rows: np.ndarray,
    metadata: list[dict],
    args: argparse.Namespace,
) -> list[dict]:
    results = []
    with search_session(reader, args.ef_search) as conn:
        for fraction in args.fractions:
            bound = fraction * len(metadata)
            where = pb.MetadataFilter(
                condition=pb.MetadataCondition(
                    key="n", op=pb.FILTER_OPERATOR_LT, value=document_pb2.MetadataValue(number_value=bound)
                )
            )
            document_filter = api.filter_of(pb.SearchFilter(where=where), Limits())
            rows = np.array([r for r in ready_rows if metadata[r // DOC_CHUNKS]["n"] < bound])
            seconds: dict[str, list[float]] = {"exact": [], "walk": []}
            recall: dict[str, list[float]] = {"exact": [], "walk": []}
            for n, query in enumerate(queries):
                truth = {int(rows[i]) + 1 for i in np.argsort(-(vectors[rows] @ query))[:10]}
                plans = [
                    ("exact", selective_vector_query(collection, query, 10, document_filter, 10**9), 3),
                    ("walk", vector_query(collection, query, 10, document_filter), 0),
                ]
                for name, (statement, params), id_column in plans if n % 2 == 0 else plans[::-1]:
                    started = time.perf_counter()
                    found = conn.execute(statement, params).fetchall()
                    elapsed = time.perf_counter() - started
                    if n >= WARMUP:
                        seconds[name].append(elapsed)
                        recall[name].append(len({r[id_column] for r in found} & truth) / 10)
            cap = max(
                SHIPPED_FLOOR,
                min(EXACT_FILTER_CEILING, math.floor(math.sqrt(EXACT_FILTER_WALK_COST * args.ef_search * len(vectors)))),
            )
            results.append(
                {
                    "fraction": fraction,
                    "chunks": len(rows),
                    "cap": cap,
                    **{f"{k}_p50_ms": 1000 * float(np.median(v)) for k, v in seconds.items()},
                    **{f"{k}_recall": float(np.mean(v)) for k, v in recall.items()},
                }
            )
            r = results[-1]
            print(
                f"{fraction:>8.3f} | {r['chunks']:>7,} | {r['exact_p50_ms']:>8.1f} ms {r['exact_recall']:>6.3f} |"
                f" {r['walk_p50_ms']:>8.1f} ms {r['walk_recall']:>6.3f} | {r['walk_p50_ms'] / r['exact_p50_ms']:>10.2f} |"
                f" {'exact' if r['chunks'] <= cap else 'walk':>7}",
                flush=True,
            )
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument(
        "--fractions", type=lambda s: [float(x) for x in s.split(",")], default=[0.01, 0.02, 0.03, 0.05, 0.1, 0.2]
    )
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--ef-search", type=int, default=40)
    parser.add_argument("--db-dir", type=Path)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(1)
    basis = rng.standard_normal((LATENT_DIMENSIONS, 384), dtype=np.float32)
    vectors = make_vectors(args.chunks, 384, "latent", rng, basis)
    queries = make_vectors(args.queries + WARMUP, 384, "latent", rng, basis)
    base = args.db_dir or Path(tempfile.mkdtemp(prefix="sluice-filter-plan-"))
    fresh = not (base / "loaded.pickle").exists()
    if fresh and (base / "pg").exists():
        shutil.rmtree(base / "pg")
    base.mkdir(parents=True, exist_ok=True)
    server, reader, (cid, gid, ready_rows, metadata) = prepare(base, fresh, args, vectors, rng)
    try:
        collection = Collection(cid, "bench", "hashing", "bench", 384, tenant_id=TENANT_ID, generation_id=gid)
        print(
            f"\n{args.chunks:,} chunks x 384, ef_search {args.ef_search}, {args.queries} queries a fraction, raw SQL as"
            f" search's role; shipped cap here: max({SHIPPED_FLOOR}, sqrt({EXACT_FILTER_WALK_COST:g} x {args.ef_search}"
            f" x {args.chunks:,}))"
        )
        print(
            f"{'fraction':>8} | {'chunks':>7} | {'exact p50':>11} {'recall':>6} | {'walk p50':>11} {'recall':>6} |"
            f" {'walk/exact':>10} | shipped"
        )
        sweep(reader, collection, vectors, queries, ready_rows, metadata, args)
    finally:
        server.stop()
        if args.db_dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
