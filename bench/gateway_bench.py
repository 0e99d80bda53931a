"""What the HTTP/JSON gateway adds to a search: Search through sluice-gateway (JSON over
HTTP/1.1, keep-alive) beside a raw generated gRPC stub to the same search server, both clients in
this process.

One real sluice-search and one real sluice-gateway, each its own process as deployed, on an
embedded PostgreSQL loaded as search_bench loads it (documents of 100 chunks, an HNSW index). The
same VECTOR queries go through each client in turn (rotating which goes first); every hit's text
is read (the JSON parsed). Two HTTP clients: the standard library's http.client on one kept-alive
connection with TCP_NODELAY, sending each request in one write (what curl does), and httpx (a
heavier pure-Python client). Prints p50 and p95 of each and the ratio to gRPC; the target is
HTTP/JSON p50 ≤ 1.3x gRPC's (issue 19, docs/http.md#speed).

    .venv/bin/python -m bench.gateway_bench [--chunks 20000] [--queries 400]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import httpx
import numpy as np
import psycopg
from sluice.v1 import search_service_pb2 as pb
from sluice.v1 import search_service_pb2_grpc
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database, user_uri
from sluice_ingest.tenants import bootstrap_keys

from .search_bench import LATENT_DIMENSIONS, free_port, load, make_vectors, percentiles, start_search

TARGET = 1.3


def start_gateway(search_address: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "SLUICE_GATEWAY_BIND": f"127.0.0.1:{port}", "SLUICE_SEARCH_ADDRESS": search_address,
           "SLUICE_LOG_LEVEL": "WARNING"}
    process = subprocess.Popen([sys.executable, "-m", "sluice_gateway.main"], env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/openapi.json", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError("sluice-gateway did not start")
        time.sleep(0.2)


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
    processes: list[subprocess.Popen[bytes]] = []
    try:
        ensure_database(admin, "bench")
        url = database_uri(admin, "bench")
        from sluice_ingest.migrations import upgrade

        upgrade(url)
        key = bootstrap_keys(url)["client"]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE ROLE sluice_search LOGIN IN ROLE sluice_search_reader")
        load(url, vectors, 0.0, rng)
        search, address = start_search(user_uri(url, "sluice_search"), 40)
        processes.append(search)
        gateway, gateway_url = start_gateway(address)
        processes.append(gateway)

        channel = grpc.insecure_channel(address)
        raw = search_service_pb2_grpc.SearchServiceStub(channel)
        auth = (("authorization", f"Bearer {key}"),)
        rich = httpx.Client(base_url=gateway_url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        plain = http.client.HTTPConnection(gateway_url.removeprefix("http://"), timeout=30)
        plain.connect()
        plain.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        vectors_list = [q.tolist() for q in queries]

        def grpc_search(vector: list[float]) -> int:
            response = raw.Search(pb.SearchRequest(collection="bench", query_vector=vector, top_k=10,
                                                   mode=pb.SEARCH_MODE_VECTOR), metadata=auth, timeout=30)
            return sum(len(hit.text) for hit in response.hits)

        def body(vector: list[float]) -> dict[str, object]:
            return {"collection": "bench", "queryVector": vector, "topK": 10, "mode": "SEARCH_MODE_VECTOR"}

        def plain_search(vector: list[float]) -> int:
            plain.request("POST", "/sluice.v1.SearchService/Search", body=json.dumps(body(vector)).encode(), headers=headers)
            response = plain.getresponse()
            answer = json.loads(response.read())
            assert response.status == 200, answer
            return sum(len(hit["text"]) for hit in answer["hits"])

        def httpx_search(vector: list[float]) -> int:
            response = rich.post("/sluice.v1.SearchService/Search", json=body(vector))
            response.raise_for_status()
            return sum(len(hit["text"]) for hit in response.json()["hits"])

        for vector in vectors_list[: args.warmup]:
            assert grpc_search(vector) == plain_search(vector) == httpx_search(vector)
        clients = [("grpc", grpc_search), ("plain", plain_search), ("httpx", httpx_search)]
        timings: dict[str, list[float]] = {name: [] for name, _ in clients}
        for n, vector in enumerate(vectors_list[args.warmup :]):
            for name, run in clients[n % 3:] + clients[: n % 3]:
                started = time.perf_counter()
                run(vector)
                timings[name].append(time.perf_counter() - started)
        rich.close()
        plain.close()
        channel.close()
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    grpc_p50, grpc_p95 = percentiles(timings["grpc"])
    plain_p50, plain_p95 = percentiles(timings["plain"])
    httpx_p50, httpx_p95 = percentiles(timings["httpx"])
    print()
    print(f"{args.chunks:,} chunks × {args.dimensions}, {args.queries} VECTOR queries (top_k=10), one at a time, "  # noqa: RUF001 - a times sign
          "alternating; every hit's text read")
    header = f"{'client':<44} | {'p50':>8} | {'p95':>8} | {'p50 / gRPC':>10}"
    print(header)
    print("-" * len(header))
    print(f"{'gRPC (raw generated stub)':<44} | {grpc_p50:>6.2f}ms | {grpc_p95:>6.2f}ms | {1.0:>9.2f}x")
    print(f"{'HTTP/JSON via sluice-gateway (http.client)':<44} | {plain_p50:>6.2f}ms | {plain_p95:>6.2f}ms | {plain_p50 / grpc_p50:>9.2f}x")
    print(f"{'HTTP/JSON via sluice-gateway (httpx)':<44} | {httpx_p50:>6.2f}ms | {httpx_p95:>6.2f}ms | {httpx_p50 / grpc_p50:>9.2f}x")
    print(f"target: HTTP/JSON p50 ≤ {TARGET}× gRPC's — {'met' if plain_p50 <= TARGET * grpc_p50 else 'NOT met'} (http.client)")  # noqa: RUF001 - a times sign


if __name__ == "__main__":
    main()
