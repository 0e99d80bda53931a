"""What the HTTP/JSON gateway adds to a search: Search through sluice-gateway (JSON over
HTTP/1.1, keep-alive) beside a raw generated gRPC stub to the same search server, both clients in
this process.

One real sluice-search and one real sluice-gateway, each its own process as deployed, on an
embedded PostgreSQL loaded as search_bench loads it (documents of 100 chunks, an HNSW index). The
same VECTOR queries go through each client in turn (rotating which goes first); every hit's text
is read (the JSON parsed). Three HTTP clients: curl (libcurl through pycurl, one kept-alive handle,
the body encoded and the answer parsed by orjson: HTTP and JSON in C, as the gRPC stub's HTTP/2 and
protobuf are), the standard library's http.client with the json module on one kept-alive
connection with TCP_NODELAY, and httpx (a heavier pure-Python client). Prints p50 and p95 of each
and the ratio to gRPC; the target is HTTP/JSON p50 ≤ 1.3x gRPC's (issue 19, docs/http.md#speed),
judged on curl: the pure-Python clients' own JSON and header parsing cost more than the gateway
adds (docs/http.md, "Speed").

    .venv/bin/python -m bench.gateway_bench [--chunks 20000] [--queries 400]

Before/after a change: `--against DIR` runs a second sluice-gateway from another copy of the
gateway's sources (e.g. `git archive HEAD~1 services/gateway/src | tar -x -C /tmp/old`, then
`--against /tmp/old/services/gateway/src`) beside this tree's, and alternates its requests with
the others', so both are measured under the same load. `--profile DIR` runs this tree's gateway
under py-spy and writes its collapsed stacks there (`gateway.txt`).
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import httpx
import numpy as np
import orjson
import psycopg
import pycurl
from sluice.v1 import search_service_pb2 as pb
from sluice.v1 import search_service_pb2_grpc
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database, user_uri
from sluice_ingest.tenants import bootstrap_keys

from .search_bench import LATENT_DIMENSIONS, free_port, load, make_vectors, percentiles, start_search

TARGET = 1.3


def start_gateway(search_address: str, *, source: str = "") -> tuple[subprocess.Popen[bytes], str]:
    """sluice-gateway in a process of its own: this tree's, or the one under `source` (first on PYTHONPATH)."""
    port = free_port()
    env = {
        **os.environ,
        "SLUICE_GATEWAY_BIND": f"127.0.0.1:{port}",
        "SLUICE_SEARCH_ADDRESS": search_address,
        "SLUICE_LOG_LEVEL": "WARNING",
    }
    if source:
        env["PYTHONPATH"] = os.pathsep.join([source, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
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


class Profiler:
    """py-spy attached to the gateway after the warm-up, stopped (SIGINT: it writes its file) at
    the end; nothing when `directory` is empty."""

    def __init__(self, directory: str, pid: int) -> None:
        self.command = (
            [
                str(Path(sys.executable).parent / "py-spy"),
                "record",
                "--format",
                "raw",
                "--rate",
                "500",
                "--output",
                str(Path(directory) / "gateway.txt"),
                "--pid",
                str(pid),
            ]
            if directory
            else []
        )
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.command:
            Path(self.directory).mkdir(parents=True, exist_ok=True)
            self.process = subprocess.Popen(self.command)
            time.sleep(1)

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(60)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--against", default="", help="another gateway's source directory (its sluice_gateway's parent)")
    parser.add_argument("--profile", default="", help="a directory for py-spy's collapsed stacks of this tree's gateway")
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
        profiler = Profiler(args.profile, gateway.pid)
        other_url = ""
        if args.against:
            other, other_url = start_gateway(address, source=args.against)
            processes.append(other)

        channel = grpc.insecure_channel(address)
        raw = search_service_pb2_grpc.SearchServiceStub(channel)
        auth = (("authorization", f"Bearer {key}"),)
        rich = httpx.Client(base_url=gateway_url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        plain = http.client.HTTPConnection(gateway_url.removeprefix("http://"), timeout=30)
        plain.connect()
        plain.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        server_timing: list[dict[str, str]] = []
        against = None
        if other_url:
            against = http.client.HTTPConnection(other_url.removeprefix("http://"), timeout=30)
            against.connect()
            against.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        curl = pycurl.Curl()
        curl.setopt(pycurl.URL, f"{gateway_url}/sluice.v1.SearchService/Search")
        curl.setopt(pycurl.HTTPHEADER, [f"Authorization: Bearer {key}", "Content-Type: application/json"])
        curl.setopt(pycurl.TCP_NODELAY, 1)
        vectors_list = [q.tolist() for q in queries]

        def grpc_search(vector: list[float]) -> int:
            response = raw.Search(
                pb.SearchRequest(collection="bench", query_vector=vector, top_k=10, mode=pb.SEARCH_MODE_VECTOR),
                metadata=auth,
                timeout=30,
            )
            return sum(len(hit.text) for hit in response.hits)

        def body(vector: list[float]) -> dict[str, object]:
            return {"collection": "bench", "queryVector": vector, "topK": 10, "mode": "SEARCH_MODE_VECTOR"}

        def plain_search(vector: list[float], connection: http.client.HTTPConnection = plain) -> int:
            connection.request("POST", "/sluice.v1.SearchService/Search", body=json.dumps(body(vector)).encode(), headers=headers)
            response = connection.getresponse()
            answer = json.loads(response.read())
            assert response.status == 200, answer
            if connection is plain:
                server_timing.append(
                    dict(
                        part.strip().replace("dur=", "").split(";")  # "parse;dur=0.41, backend;…"
                        for part in response.getheader("server-timing", "").split(",")
                    )
                )
            return sum(len(hit["text"]) for hit in answer["hits"])

        def httpx_search(vector: list[float]) -> int:
            response = rich.post("/sluice.v1.SearchService/Search", json=body(vector))
            response.raise_for_status()
            return sum(len(hit["text"]) for hit in response.json()["hits"])

        def curl_search(vector: list[float]) -> int:
            answer = io.BytesIO()
            curl.setopt(pycurl.POSTFIELDS, orjson.dumps(body(vector)))
            curl.setopt(pycurl.WRITEDATA, answer)
            curl.perform()
            assert curl.getinfo(pycurl.RESPONSE_CODE) == 200, answer.getvalue()
            return sum(len(hit["text"]) for hit in orjson.loads(answer.getvalue())["hits"])

        clients = [("grpc", grpc_search), ("curl", curl_search), ("plain", plain_search), ("httpx", httpx_search)]
        if against is not None:
            clients.append(("against", lambda vector: plain_search(vector, against)))
        for vector in vectors_list[: args.warmup]:
            assert len({run(vector) for _, run in clients}) == 1
        timings: dict[str, list[float]] = {name: [] for name, _ in clients}
        server_timing.clear()  # the warm-up's
        profiler.start()
        for n, vector in enumerate(vectors_list[args.warmup :]):
            turn = n % len(clients)
            for name, run in clients[turn:] + clients[:turn]:
                started = time.perf_counter()
                run(vector)
                timings[name].append(time.perf_counter() - started)
        profiler.stop()
        rich.close()
        curl.close()
        plain.close()
        if against is not None:
            against.close()
        channel.close()
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    report(args, timings)
    inside = {part: float(np.median([float(t[part]) for t in server_timing])) for part in ("parse", "backend", "encode")}
    print("inside this tree's gateway (Server-Timing medians): " + ", ".join(f"{k} {v:.2f}ms" for k, v in inside.items()))


def report(args: argparse.Namespace, timings: dict[str, list[float]]) -> None:
    grpc_p50, grpc_p95 = percentiles(timings["grpc"])
    curl_p50, curl_p95 = percentiles(timings["curl"])
    plain_p50, plain_p95 = percentiles(timings["plain"])
    httpx_p50, httpx_p95 = percentiles(timings["httpx"])
    print()
    print(
        f"{args.chunks:,} chunks × {args.dimensions}, {args.queries} VECTOR queries (top_k=10), one at a time, "  # noqa: RUF001 - a times sign
        "alternating; every hit's text read"
    )
    header = f"{'client':<44} | {'p50':>8} | {'p95':>8} | {'p50 / gRPC':>10}"
    print(header)
    print("-" * len(header))
    print(f"{'gRPC (raw generated stub)':<44} | {grpc_p50:>6.2f}ms | {grpc_p95:>6.2f}ms | {1.0:>9.2f}x")
    print(f"{'HTTP/JSON via sluice-gateway (curl)':<44} | {curl_p50:>6.2f}ms | {curl_p95:>6.2f}ms | {curl_p50 / grpc_p50:>9.2f}x")
    print(
        f"{'HTTP/JSON via sluice-gateway (http.client)':<44} | {plain_p50:>6.2f}ms | {plain_p95:>6.2f}ms | {plain_p50 / grpc_p50:>9.2f}x"
    )
    print(
        f"{'HTTP/JSON via sluice-gateway (httpx)':<44} | {httpx_p50:>6.2f}ms | {httpx_p95:>6.2f}ms | {httpx_p50 / grpc_p50:>9.2f}x"
    )
    if "against" in timings:
        other_p50, other_p95 = percentiles(timings["against"])
        print(
            f"{'HTTP/JSON via --against (http.client)':<44} | {other_p50:>6.2f}ms | {other_p95:>6.2f}ms | "
            f"{other_p50 / grpc_p50:>9.2f}x"
        )
    print(f"target: HTTP/JSON p50 ≤ {TARGET}× gRPC's — {'met' if curl_p50 <= TARGET * grpc_p50 else 'NOT met'} (curl)")  # noqa: RUF001 - a times sign


if __name__ == "__main__":
    main()
