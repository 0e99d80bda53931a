"""What the Python SDK adds to a search: `Client.search` beside a raw generated stub, same process.

One real sluice-search (its own process, as deployed, on an embedded PostgreSQL loaded as
search_bench loads it: documents of 100 chunks, an HNSW index); in this process a raw
`SearchServiceStub` with the key as call metadata (what a hand-written client does) and a
`sluice_client.Client`, each asking the same VECTOR queries in turn (alternating which goes
first) and reading every hit's text (the SDK makes its typed hits when they are read). Prints
p50 and p95 of each and the ratio; the target is SDK p50 ≤ 1.1x the raw stub's.

    .venv/bin/python -m bench.sdk_bench [--chunks 20000] [--queries 400]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
import psycopg
from sluice.v1 import search_service_pb2 as pb
from sluice.v1 import search_service_pb2_grpc
from sluice_client import Client
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database, user_uri
from sluice_ingest.tenants import bootstrap_keys

from .search_bench import LATENT_DIMENSIONS, load, make_vectors, percentiles, start_search

TARGET = 1.1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    basis = rng.standard_normal((LATENT_DIMENSIONS, args.dimensions), dtype=np.float32)
    vectors = make_vectors(args.chunks, args.dimensions, "clustered", rng, basis)
    queries = make_vectors(args.queries + args.warmup, args.dimensions, "clustered", rng, basis)
    workdir = Path(tempfile.mkdtemp(prefix="sluice-bench-"))
    server = EmbeddedPostgres(workdir / "pg", cleanup="delete")
    admin = server.start()
    process = None
    try:
        ensure_database(admin, "bench")
        url = database_uri(admin, "bench")
        from sluice_ingest.migrations import upgrade

        upgrade(url)
        key = bootstrap_keys(url)["client"]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE ROLE sluice_search LOGIN IN ROLE sluice_search_reader")
        load(url, vectors, 0.0, rng)
        process, address = start_search(user_uri(url, "sluice_search"), 40)

        channel = grpc.insecure_channel(address)
        raw = search_service_pb2_grpc.SearchServiceStub(channel)
        auth = (("authorization", f"Bearer {key}"),)
        client = Client("unused:1", search_address=address, api_key=key)
        vectors_list = [q.tolist() for q in queries]

        def raw_search(vector: list[float]) -> int:
            response = raw.Search(
                pb.SearchRequest(collection="bench", query_vector=vector, top_k=10, mode=pb.SEARCH_MODE_VECTOR),
                metadata=auth,
                timeout=30,
            )
            return sum(len(hit.text) for hit in response.hits)

        def sdk_search(vector: list[float]) -> int:
            hits = client.search("bench", query_vector=vector, top_k=10, mode="vector")
            return sum(len(hit.text) for hit in hits)

        for vector in vectors_list[: args.warmup]:
            raw_search(vector)
            sdk_search(vector)
        timings: dict[str, list[float]] = {"raw": [], "sdk": []}
        for n, vector in enumerate(vectors_list[args.warmup :]):
            order = (("raw", raw_search), ("sdk", sdk_search)) if n % 2 else (("sdk", sdk_search), ("raw", raw_search))
            for name, search in order:
                started = time.perf_counter()
                search(vector)
                timings[name].append(time.perf_counter() - started)
        client.close()
        channel.close()
    finally:
        if process is not None:
            process.terminate()
            process.wait(30)
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    raw_p50, raw_p95 = percentiles(timings["raw"])
    sdk_p50, sdk_p95 = percentiles(timings["sdk"])
    print()
    print(
        f"{args.chunks:,} chunks × {args.dimensions}, {args.queries} VECTOR queries (top_k=10), one at a time, "  # noqa: RUF001 - a times sign
        "alternating; every hit's text read"
    )
    header = f"{'client':<28} | {'p50':>8} | {'p95':>8} | {'p50 / raw stub':>14}"
    print(header)
    print("-" * len(header))
    print(f"{'raw generated stub':<28} | {raw_p50:>6.2f}ms | {raw_p95:>6.2f}ms | {1.0:>13.2f}x")
    print(f"{'sluice_client.Client.search':<28} | {sdk_p50:>6.2f}ms | {sdk_p95:>6.2f}ms | {sdk_p50 / raw_p50:>13.2f}x")
    print(f"target: SDK p50 ≤ {TARGET}× the raw stub's — {'met' if sdk_p50 <= TARGET * raw_p50 else 'NOT met'}")  # noqa: RUF001 - a times sign


if __name__ == "__main__":
    main()
