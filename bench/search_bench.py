"""Search benchmark: latency of Search over gRPC vs the same SQL, and recall@10 vs exact.

    .venv/bin/python -m bench.search_bench [--chunks 100000] [--dimensions 384] [--queries 1000]
        [--not-ready 0.1] [--data latent|isotropic] [--ef-search 40,100]

Starts its own embedded PostgreSQL, migrates it, loads `--chunks` random normalised vectors
(binary COPY) into one collection whose documents are READY except `--not-ready` of them,
builds the collection's partial HNSW index, then for each ef_search starts `sluice-search`
as a subprocess and runs the queries one at a time (as a user would), first through gRPC,
then as raw SQL (the very statement the service runs, on a connection with the same session
settings), and compares both with exact search (numpy, READY chunks only).

Access control is measured too, in the same run: search runs as its read-only login with a
client key (as deployed), and beside it a second search process whose key check is replaced
by a constant principal (bench/unauthenticated.py), queried alternately with the first; the
raw SQL is timed bare (as the owner) and as search's role on a session set to the tenant, under
row-level security. Their ratios are the cost of authentication and of tenant scoping.

Filters, in the same run (`--filter-selectivity`, 0.01 by default): every document carries
metadata {"group": "rare" | "common", "n": <a permutation of 0..documents-1>}; "rare" marks that
fraction of the READY documents. The same queries run unfiltered, with `where` group EQ "rare"
(served by the GIN index on documents.metadata) and with the range n LT <fraction x documents>
(served by no index), through search as shipped (a selective filter is answered exactly from
its documents' chunks) and through a second search process that always walks the HNSW graph
(SLUICE_SEARCH_EXACT_FILTER_MAX_CHUNKS=0); beside them the raw SQL of both plans, and recall@10
against numpy over the filtered READY chunks.

Reranking, in the same run (`--rerank-queries`, 300 by default): the same VECTOR queries (a
query vector, plus a text for the reranker) with a TEI-style rerank server in this process that
answers after a set delay: no reranking, reranking the top 50 with a fast server (APPLIED),
and with a server slower than the time budget (TIMED_OUT: answered in first-stage order when
the budget runs out). It measures what the budget guarantees, not a model's quality.

--data latent (default) draws vectors from a 16-dimensional latent space projected to
`--dimensions` plus noise: like real sentence embeddings, whose intrinsic dimension is low.
--data isotropic draws them uniformly from the sphere: the worst case of every graph index
(all points nearly equidistant); recall there needs a far larger ef_search.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import grpc
import numpy as np
import psycopg
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pgvector.psycopg import register_vector
from sluice.v1 import search_service_pb2 as pb
from sluice.v1 import search_service_pb2_grpc
from sluice_common import vector_index
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database, user_uri
from sluice_ingest.tenants import bootstrap_keys

DOC_CHUNKS = 100
TENANT_ID = 1  # `default`, made by migration 0004
LATENT_DIMENSIONS = 16


def make_vectors(n: int, dimensions: int, kind: str, rng: np.random.Generator, basis: np.ndarray) -> np.ndarray:
    if kind == "isotropic":
        v = rng.standard_normal((n, dimensions), dtype=np.float32)
    else:
        v = rng.standard_normal((n, LATENT_DIMENSIONS), dtype=np.float32) @ basis
        v += 0.3 * rng.standard_normal((n, dimensions), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def document_metadata(documents: int, ready: np.ndarray, selectivity: float, rng: np.random.Generator) -> list[dict]:
    """{"group": "rare" | "common", "n": …} per document: `selectivity` of the READY ones are rare;
    n is a permutation, so "n < selectivity x documents" selects that fraction of all documents."""
    ready_documents = np.flatnonzero(ready)
    rare = (
        set(rng.choice(ready_documents, max(1, round(selectivity * documents)), replace=False).tolist()) if selectivity else set()
    )
    order = rng.permutation(documents)
    return [{"group": "rare" if d in rare else "common", "n": int(order[d])} for d in range(documents)]


def load(
    url: str, vectors: np.ndarray, not_ready: float, rng: np.random.Generator, selectivity: float = 0.0
) -> tuple[int, int, np.ndarray, list[dict]]:
    """One collection, documents of 100 chunks; returns (collection id, generation id, READY row
    numbers, each document's metadata)."""
    n, dimensions = vectors.shape
    documents = (n + DOC_CHUNKS - 1) // DOC_CHUNKS
    ready = rng.random(documents) >= not_ready
    metadata = document_metadata(documents, ready, selectivity, rng)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        cid = conn.execute(
            "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions, chunk_max_characters,"
            " chunk_new_after_n_chars, chunk_overlap, max_attempts)"
            " SELECT id, 'bench', 'hashing', 'bench', %s, 1500, 1000, 0, 3 FROM tenants WHERE name = 'default' RETURNING id",
            (dimensions,),
        ).fetchone()[0]
        (gid,) = conn.execute(
            "SELECT id FROM collection_generations WHERE collection_id = %s AND state = 'ACTIVE'", (cid,)
        ).fetchone()
        ids = [uuid.uuid4() for _ in range(documents)]
        with conn.cursor().copy(
            "COPY documents (id, tenant_id, collection_id, filename, mime_type, status, content_sha256, size_bytes,"
            " error_message, metadata, chunk_count) FROM STDIN"
        ) as copy:
            for d, doc in enumerate(ids):
                status = "READY" if ready[d] else ("PENDING", "EMBEDDING", "FAILED")[d % 3]
                error = "bench" if status == "FAILED" else None
                chunk_count = min(DOC_CHUNKS, n - d * DOC_CHUNKS) if status == "READY" else 0
                copy.write_row(
                    (
                        doc,
                        TENANT_ID,
                        cid,
                        f"doc-{d}.txt",
                        "text/plain",
                        status,
                        f"{d:064x}",
                        1,
                        error,
                        json.dumps(metadata[d]),
                        chunk_count,
                    )
                )
        started = time.perf_counter()
        with conn.cursor().copy(
            "COPY chunks (document_id, tenant_id, collection_id, generation_id, chunk_index, text, embedding) FROM STDIN"
            " WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["uuid", "int8", "int8", "int8", "int4", "text", "vector"])
            for row in range(n):
                copy.write_row((ids[row // DOC_CHUNKS], TENANT_ID, cid, gid, row % DOC_CHUNKS, f"chunk {row}", vectors[row]))
        print(f"loaded {n:,} chunks × {dimensions} in {time.perf_counter() - started:.1f} s", flush=True)  # noqa: RUF001 - a times sign
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        started = time.perf_counter()
        conn.execute(vector_index.create_index_sql(gid, dimensions))
        print(f"built HNSW index in {time.perf_counter() - started:.1f} s", flush=True)
        conn.execute("VACUUM ANALYZE chunks, documents")
    ready_rows = np.flatnonzero(np.repeat(ready, DOC_CHUNKS)[:n])
    return cid, gid, ready_rows, metadata


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_search(url: str, ef_search: int, *, unauthenticated: bool = False, **settings: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {
        **os.environ,
        **{f"SLUICE_{name.upper()}": value for name, value in settings.items()},
        "SLUICE_SEARCH_DATABASE_URL": url,
        "SLUICE_SEARCH_BIND": f"127.0.0.1:{port}",
        "SLUICE_SEARCH_HNSW_EF_SEARCH": str(ef_search),
        "SLUICE_LOG_LEVEL": "WARNING",
        "SLUICE_RATE_LIMIT_PER_SECOND": "0",
    }
    module = ["bench.unauthenticated", "search"] if unauthenticated else ["sluice_search.main"]
    process = subprocess.Popen([sys.executable, "-m", *module], env=env, cwd=Path(__file__).resolve().parents[1])
    address = f"127.0.0.1:{port}"
    channel = grpc.insecure_channel(address)
    deadline = time.monotonic() + 60
    while True:
        try:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
            if status.status == health_pb2.HealthCheckResponse.SERVING:
                break
        except grpc.RpcError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError("sluice-search did not start")
        time.sleep(0.2)
    channel.close()
    return process, address


def search_session(url: str, ef: int, *, tenant: int | None = TENANT_ID) -> psycopg.Connection:
    """A connection set up as search's pool sets up its sessions (read-only, iterative HNSW scans,
    ef_search, prepared after 5 runs), on the tenant when given (as search's role, under row-level
    security), so that a raw statement is timed as the service runs it."""
    conn = psycopg.connect(url, autocommit=True, prepare_threshold=5)
    register_vector(conn)
    conn.execute("SET default_transaction_read_only = on")
    conn.execute("SET hnsw.iterative_scan = relaxed_order")
    conn.execute(f"SET hnsw.ef_search = {int(ef)}")
    if tenant is not None:
        conn.execute("SELECT set_config('sluice.tenant_id', %s, false)", (str(tenant),))
    return conn


def percentiles(seconds: list[float]) -> tuple[float, float]:
    ms = np.asarray(seconds) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def run(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    basis = rng.standard_normal((LATENT_DIMENSIONS, args.dimensions), dtype=np.float32)
    vectors = make_vectors(args.chunks, args.dimensions, args.data, rng, basis)
    queries = make_vectors(args.queries, args.dimensions, args.data, rng, basis)

    workdir = Path(tempfile.mkdtemp(prefix="sluice-bench-"))
    server = EmbeddedPostgres(workdir / "pg", cleanup="delete")
    admin = server.start()
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_buffers = '1GB'")
            conn.execute("ALTER SYSTEM SET fsync = off")
            conn.execute("ALTER SYSTEM SET synchronous_commit = off")
            conn.execute("ALTER SYSTEM SET max_parallel_maintenance_workers = 2")
        server.stop()
        admin = server.start()
        ensure_database(admin, "bench")
        url = database_uri(admin, "bench")
        from sluice_ingest.migrations import upgrade

        upgrade(url)
        key = bootstrap_keys(url)["client"]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE ROLE sluice_search LOGIN IN ROLE sluice_search_reader")
        reader_url = user_uri(url, "sluice_search")
        cid, gid, ready_rows, metadata = load(url, vectors, args.not_ready, rng, args.filter_selectivity)

        started = time.perf_counter()
        truth = []
        ready_vectors = vectors[ready_rows]
        for block in range(0, len(queries), 100):
            scores = queries[block : block + 100] @ ready_vectors.T
            for row in np.argpartition(-scores, 10, axis=1)[:, :10]:
                truth.append({int(ready_rows[i]) + 1 for i in row})  # chunk id = row + 1 (COPY order)
        print(f"exact top-10 (numpy) for {len(queries)} queries in {time.perf_counter() - started:.1f} s", flush=True)

        results = []
        for ef in args.ef_search:
            results.append(measure(url, reader_url, key, cid, gid, queries, truth, ef, args))
        print()
        print(
            f"{args.chunks:,} chunks × {args.dimensions} ({args.data}), {args.not_ready:.0%} of documents not READY,"  # noqa: RUF001 - a times sign
            f" {args.queries} queries, top_k=10, one at a time"
        )
        header = f"{'ef_search':>9} | {'gRPC p50':>9} {'gRPC p95':>9} | {'SQL p50':>8} {'SQL p95':>8} | {'gRPC/SQL p50':>12} | {'recall@10':>9} | {'full top_k':>10}"
        print(header)
        print("-" * len(header))
        for r in results:
            print(
                f"{r['ef']:>9} | {r['grpc'][0]:>7.2f}ms {r['grpc'][1]:>7.2f}ms | {r['sql'][0]:>6.2f}ms {r['sql'][1]:>6.2f}ms |"
                f" {r['grpc'][0] / r['sql'][0]:>11.2f}x | {r['recall']:>9.3f} | {r['full']:>9.1%}"
            )
        print("targets: gRPC p50 ≤ 1.5× SQL p50, recall@10 ≥ 0.95, gRPC p50 ≤ 5 ms")  # noqa: RUF001 - a times sign
        print()
        print("access control: the same queries, alternating between the two servers; SQL bare vs under row-level security")
        header = (
            f"{'ef_search':>9} | {'gRPC p50 auth':>13} {'no auth':>8} {'auth cost':>9} |"
            f" {'SQL p50 tenant':>14} {'bare':>7} {'scoping cost':>12}"
        )
        print(header)
        print("-" * len(header))
        for r in results:
            print(
                f"{r['ef']:>9} | {r['grpc'][0]:>11.2f}ms {r['noauth'][0]:>6.2f}ms {r['grpc'][0] / r['noauth'][0]:>8.3f}x |"
                f" {r['sql_tenant'][0]:>12.2f}ms {r['sql'][0]:>5.2f}ms {r['sql_tenant'][0] / r['sql'][0]:>11.3f}x"
            )
        print("target: auth cost ≤ 1.05× (gRPC p50 with authentication / without)")  # noqa: RUF001 - a times sign
        if args.filter_selectivity:
            print()
            report_filters(measure_filters(url, reader_url, key, cid, gid, queries, vectors, ready_rows, metadata, args), args)
        if args.rerank_queries:
            print()
            measure_rerank(reader_url, key, queries, args)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def measure(url, reader_url, key, cid, gid, queries, truth, ef, args) -> dict:
    from sluice_search.domain import Collection, DocumentFilter
    from sluice_search.vector_sql import vector_query

    collection = Collection(cid, "bench", "hashing", "bench", args.dimensions, tenant_id=TENANT_ID, generation_id=gid)
    process, address = start_search(reader_url, ef)
    plain_process, plain_address = start_search(reader_url, ef, unauthenticated=True)
    try:
        # The key as call metadata on a plain channel, as on the baseline's: the difference is
        # the server's work (a client-side interceptor would add its own Python per call).
        channel = grpc.insecure_channel(address)
        auth = (("authorization", f"Bearer {key}"),)
        plain_channel = grpc.insecure_channel(plain_address)
        stub = search_service_pb2_grpc.SearchServiceStub(channel)
        plain_stub = search_service_pb2_grpc.SearchServiceStub(plain_channel)
        requests = [
            pb.SearchRequest(collection="bench", query_vector=q.tolist(), top_k=10, mode=pb.SEARCH_MODE_VECTOR) for q in queries
        ]
        for request in requests[: args.warmup]:
            stub.Search(request, metadata=auth)
            plain_stub.Search(request)
        grpc_seconds, plain_seconds, recalls, full = [], [], [], 0
        for n, (request, expected) in enumerate(zip(requests, truth)):
            # Alternate which server goes first, so neither gains from the order.
            if n % 2:
                started = time.perf_counter()
                plain_stub.Search(request)
                plain_seconds.append(time.perf_counter() - started)
            started = time.perf_counter()
            response = stub.Search(request, metadata=auth)
            grpc_seconds.append(time.perf_counter() - started)
            if not n % 2:
                started = time.perf_counter()
                plain_stub.Search(request)
                plain_seconds.append(time.perf_counter() - started)
            found = {int(h.chunk_id) for h in response.hits}
            recalls.append(len(found & expected) / 10)
            full += len(response.hits) == 10
        channel.close()
        plain_channel.close()
    finally:
        for p in (process, plain_process):
            p.terminate()
            p.wait(30)

    sql_seconds = []
    # The same session as the service's pool (prepared after 5 runs, same settings): the
    # difference between the two columns is then gRPC and the service code alone.
    with search_session(url, ef, tenant=None) as conn:
        statements = [vector_query(collection, q, 10, DocumentFilter()) for q in queries]
        for query, params in statements[: args.warmup]:
            conn.execute(query, params).fetchall()
        for query, params in statements:
            started = time.perf_counter()
            conn.execute(query, params).fetchall()
            sql_seconds.append(time.perf_counter() - started)
    # The same statements as search's role on a session set to the tenant, as search runs them.
    tenant_seconds = []
    with search_session(reader_url, ef) as conn:
        for n, (query, params) in enumerate(statements[: args.warmup] + statements):
            started = time.perf_counter()
            conn.execute(query, params).fetchall()
            if n >= args.warmup:
                tenant_seconds.append(time.perf_counter() - started)
    result = {
        "ef": ef,
        "grpc": percentiles(grpc_seconds),
        "noauth": percentiles(plain_seconds),
        "sql": percentiles(sql_seconds),
        "sql_tenant": percentiles(tenant_seconds),
        "recall": float(np.mean(recalls)),
        "full": full / len(queries),
    }
    print(f"ef_search={ef}: {result}", flush=True)
    return result


def filter_cases(metadata: list[dict], selectivity: float):
    """(name, where filter, predicate on a document's metadata) of the filters measured."""
    from sluice.v1 import document_pb2

    bound = selectivity * len(metadata)
    eq = pb.MetadataFilter(
        condition=pb.MetadataCondition(
            key="group", op=pb.FILTER_OPERATOR_EQ, value=document_pb2.MetadataValue(string_value="rare")
        )
    )
    lt = pb.MetadataFilter(
        condition=pb.MetadataCondition(key="n", op=pb.FILTER_OPERATOR_LT, value=document_pb2.MetadataValue(number_value=bound))
    )
    return [
        ("group EQ rare (GIN)", eq, lambda m: m["group"] == "rare"),
        (f"n LT {bound:g} (no index)", lt, lambda m: m["n"] < bound),
    ]


def measure_filters(url, reader_url, key, cid, gid, queries, vectors, ready_rows, metadata, args) -> dict:
    """Unfiltered and filtered VECTOR queries, alternating, through search as shipped and through
    one that always walks the graph; the raw SQL of both plans; recall against numpy."""
    from sluice_search import api
    from sluice_search.domain import Collection, Limits
    from sluice_search.vector_sql import EXACT_FILTER_WALK_COST, selective_vector_query, vector_query

    ef = args.ef_search[0]
    queries = queries[: args.filter_queries]
    cases = filter_cases(metadata, args.filter_selectivity)
    truths = {}
    for name, _, predicate in cases:
        rows = np.array([r for r in ready_rows if predicate(metadata[r // DOC_CHUNKS])])
        scores = queries @ vectors[rows].T
        truths[name] = [{int(rows[i]) + 1 for i in np.argsort(-s)[:10]} for s in scores]
        print(f"filter {name}: {len(rows):,} READY chunks ({len(rows) / len(ready_rows):.2%})", flush=True)
    shipped, shipped_address = start_search(reader_url, ef)
    graph, graph_address = start_search(reader_url, ef, search_exact_filter_max_chunks="0")
    auth = (("authorization", f"Bearer {key}"),)
    seconds: dict[str, list[float]] = {}
    recalls: dict[str, list[float]] = {}
    try:
        stubs = {
            "shipped": search_service_pb2_grpc.SearchServiceStub(grpc.insecure_channel(shipped_address)),
            "graph": search_service_pb2_grpc.SearchServiceStub(grpc.insecure_channel(graph_address)),
        }
        plans = [("unfiltered", "shipped", None, None)] + [
            (f"{name} / {server}", server, where, name) for name, where, _ in cases for server in ("shipped", "graph")
        ]
        for query in queries[: args.warmup]:
            for _, server, where, _ in plans:
                stubs[server].Search(request(query, where), metadata=auth)
        for n, query in enumerate(queries):
            order = plans if n % 2 == 0 else plans[::-1]
            for label, server, where, case in order:
                started = time.perf_counter()
                response = stubs[server].Search(request(query, where), metadata=auth)
                seconds.setdefault(label, []).append(time.perf_counter() - started)
                if case is not None:
                    found = {int(h.chunk_id) for h in response.hits}
                    recalls.setdefault(label, []).append(len(found & truths[case][n]) / 10)
    finally:
        for process in (shipped, graph):
            process.terminate()
            process.wait(30)

    # The raw SQL of each plan, as search's role under row-level security, prepared as the pool does.
    collection = Collection(cid, "bench", "hashing", "bench", args.dimensions, tenant_id=TENANT_ID, generation_id=gid)
    sql_seconds: dict[str, list[float]] = {}
    with search_session(reader_url, ef) as conn:
        for name, where, _ in cases:
            document_filter = api.filter_of(pb.SearchFilter(where=where), Limits())
            for n, query in enumerate(list(queries[: args.warmup]) + list(queries)):
                # As shipped: one statement, the filter's documents and the exact scan of their chunks.
                started = time.perf_counter()
                statement, params = selective_vector_query(
                    collection, query, 10, document_filter, 2000, walk_cost=EXACT_FILTER_WALK_COST
                )
                conn.execute(statement, params).fetchall()
                middle = time.perf_counter()
                # The graph walk with the filter applied to each visited chunk.
                statement, params = vector_query(collection, query, 10, document_filter)
                conn.execute(statement, params).fetchall()
                if n >= args.warmup:
                    sql_seconds.setdefault(f"{name} / shipped", []).append(middle - started)
                    sql_seconds.setdefault(f"{name} / graph", []).append(time.perf_counter() - middle)
        for n, query in enumerate(list(queries[: args.warmup]) + list(queries)):
            statement, params = vector_query(collection, query, 10, api.filter_of(pb.SearchFilter(), Limits()))
            started = time.perf_counter()
            conn.execute(statement, params).fetchall()
            if n >= args.warmup:
                sql_seconds.setdefault("unfiltered", []).append(time.perf_counter() - started)
    return {
        "grpc": {k: percentiles(v) for k, v in seconds.items()},
        "sql": {k: percentiles(v) for k, v in sql_seconds.items()},
        "recall": {k: float(np.mean(v)) for k, v in recalls.items()},
        "queries": len(queries),
        "ef": ef,
    }


class RerankServer:
    """A TEI-style /rerank endpoint answering after `delay` seconds (scores: the texts' order)."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.delay = 0.0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                if outer.delay:
                    time.sleep(outer.delay)
                data = json.dumps([{"index": i, "score": 1.0 / (1 + i)} for i in reversed(range(len(body["texts"])))]).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(OSError):  # a client whose budget ran out
                    self.wfile.write(data)

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address) -> None:
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()


def measure_rerank(reader_url, key, queries, args) -> None:
    """gRPC p50 without reranking, with a reranker that answers in --rerank-fast-ms, and with one
    slower than the --rerank-budget-ms budget; the statuses seen."""
    from sluice.v1 import collection_pb2

    reranker = RerankServer()
    process, address = start_search(reader_url, args.ef_search[0], rerank_allowed_urls=reranker.url + "/")
    auth = (("authorization", f"Bearer {key}"),)
    stub = search_service_pb2_grpc.SearchServiceStub(grpc.insecure_channel(address))
    config = collection_pb2.RerankerConfig(
        provider=collection_pb2.RERANKER_PROVIDER_TEI, base_url=reranker.url, candidates=50, timeout_ms=args.rerank_budget_ms
    )
    plans = [
        ("no reranking", None, 0.0),
        (f"rerank 50, server {args.rerank_fast_ms} ms", config, args.rerank_fast_ms / 1000),
        (f"rerank 50, server {args.rerank_slow_ms} ms", config, args.rerank_slow_ms / 1000),
    ]
    seconds: dict[str, list[float]] = {}
    statuses: dict[str, dict[str, int]] = {}
    try:
        for label, config_, delay in plans:
            reranker.delay = delay
            for n, query in enumerate(queries[: args.warmup + args.rerank_queries]):
                request_ = pb.SearchRequest(
                    collection="bench",
                    query="bench query text",
                    query_vector=query.tolist(),
                    top_k=10,
                    mode=pb.SEARCH_MODE_VECTOR,
                )
                if config_ is not None:
                    request_.rerank.reranker.CopyFrom(config_)
                started = time.perf_counter()
                response = stub.Search(request_, metadata=auth)
                if n >= args.warmup:
                    seconds.setdefault(label, []).append(time.perf_counter() - started)
                    status = pb.RerankStatus.Name(response.rerank.status).removeprefix("RERANK_STATUS_")
                    statuses.setdefault(label, {}).setdefault(status, 0)
                    statuses[label][status] += 1
    finally:
        process.terminate()
        process.wait(30)
        reranker.close()
    print(
        f"reranking: {args.rerank_queries} VECTOR queries, top_k=10, 50 candidates, time budget {args.rerank_budget_ms} ms,"
        " a TEI-style server in this process answering after a set delay"
    )
    header = f"{'plan':<30} | {'gRPC p50':>9} {'gRPC p95':>9} | statuses"
    print(header)
    print("-" * len(header))
    for label, values in seconds.items():
        p50, p95 = percentiles(values)
        print(f"{label:<30} | {p50:>7.2f}ms {p95:>7.2f}ms | {statuses[label]}")


def request(query: np.ndarray, where) -> pb.SearchRequest:
    search_filter = pb.SearchFilter(where=where) if where is not None else None
    return pb.SearchRequest(
        collection="bench", query_vector=query.tolist(), top_k=10, mode=pb.SEARCH_MODE_VECTOR, filter=search_filter
    )


def report_filters(result: dict, args) -> None:
    print(
        f"filters: {result['queries']} VECTOR queries, top_k=10, ef_search={result['ef']}, alternating;"
        " shipped = exact over a selective filter's documents, graph = HNSW walk with the filter"
    )
    header = f"{'query':<34} | {'gRPC p50':>9} {'gRPC p95':>9} | {'SQL p50':>8} | {'recall@10':>9}"
    print(header)
    print("-" * len(header))
    for label, (p50, p95) in result["grpc"].items():
        sql50 = result["sql"].get(label, (float("nan"),))[0]
        recall = result["recall"].get(label)
        print(f"{label:<34} | {p50:>7.2f}ms {p95:>7.2f}ms | {sql50:>6.2f}ms | {'' if recall is None else f'{recall:.3f}':>9}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--not-ready", type=float, default=0.1, help="fraction of documents not READY")
    parser.add_argument("--data", choices=["latent", "isotropic"], default="latent")
    parser.add_argument("--ef-search", type=lambda s: [int(x) for x in s.split(",")], default=[40, 64, 100])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--filter-selectivity", type=float, default=0.01, help="fraction of READY documents a filter selects (0: no filter runs)"
    )
    parser.add_argument("--filter-queries", type=int, default=300)
    parser.add_argument("--rerank-queries", type=int, default=300, help="0: no reranking runs")
    parser.add_argument("--rerank-budget-ms", type=int, default=200)
    parser.add_argument("--rerank-fast-ms", type=int, default=20)
    parser.add_argument("--rerank-slow-ms", type=int, default=1000)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
