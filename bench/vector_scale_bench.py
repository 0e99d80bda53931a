"""Vector search at scale: each index precision through gRPC and as raw SQL, beside LanceDB, Chroma
and Milvus Lite on the same vectors (issue 22, items 1 and 2; docs/search.md, "Vector precision").

    nice -n 19 .venv/bin/python -m bench.vector_scale_bench --chunks 100000 [--dimensions 384]
        [--not-ready 0.5] [--text-characters 1000] [--precisions float4,halfvec,binary] [--engines lancedb,chroma,chroma-server,milvus]
        [--queries 500] [--ef-search 50] [--more-ef-search 40,64] [--json out.json]
    .venv/bin/python -m bench.vector_scale_bench --fit out-100k.json out-300k.json out-1m.json

One embedded PostgreSQL; `--chunks` vectors (search_bench's latent data: 16 latent dimensions
projected to `--dimensions` plus noise, normalised) in one collection, documents of 100 chunks,
`--not-ready` of them not READY, 1 % of the READY ones marked {"group": "rare"}. Each chunk's
text and search_terms are `--text-characters` (1,000) long, as the default chunking makes them,
so a row is as wide as a real one (over PostgreSQL's 2 kB TOAST threshold: where the vector is
stored matters: docs/search.md, "Vector precision"); before 2026-12-02 the text was "chunk <n>" and every row fit in
line. The chunks are bulk-loaded (binary COPY) before any index exists. Then, for each precision, the generation's
partial HNSW index is built as ingest-api builds it (vector_index.create_index_sql and
build_settings_sql: m 16, ef_construction 64, parallel workers sized to the machine), the
generation's vector_precision set to match, and measured:

- build time, index size, the chunks table's size (heap and TOAST; the share of vectors stored
  out of line, from a 1 % sample) and PostgreSQL's memory
  (the sum of its processes' proportional set size, shared buffers shared out, after the queries);
- `--queries` VECTOR queries one at a time through a `sluice-search` process (as deployed: its
  read-only login, a client key) and, in turns with it, the same statements raw on a session set
  as search's (prepared, row-level security): each query goes through both, which goes first
  alternates, and each path is timed where it went first (half the queries each); p50 and p99,
  recall@10 against numpy over the READY chunks;
- QPS through gRPC with 1 and 8 concurrent clients (threads; `--qps-seconds` each);
- the 1 %-selective filter (group EQ "rare", answered exactly from its documents) through gRPC.

The other engines run each in its own process (their memory is that process tree's peak
proportional set size over what the vectors alone take), on the READY vectors only (a user of
those engines would insert only the searchable documents; it halves their index, in their
favour), with HNSW-family indexes of the same m and ef_construction where they take them, and a
sweep of their search-time knob so that a point at the same recall can be read off the table.

`--fit` fits latency = a + b·log10(n) and build time = c·n^k (least squares on the points'
logs) to the JSON of several runs and projects them to 10,000,000 chunks.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import grpc
import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from sluice.v1 import document_pb2, search_service_pb2_grpc
from sluice.v1 import search_service_pb2 as pb
from sluice_common import vector_index
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database, user_uri
from sluice_ingest.tenants import bootstrap_keys

from bench.search_bench import LATENT_DIMENSIONS, document_metadata, make_vectors, start_search

DOC_CHUNKS = 100
TENANT_ID = 1  # `default`, made by migration 0004
M, EF_CONSTRUCTION = 16, 64  # pgvector's defaults, used by every engine that takes them


def pss_mb(pids: list[int]) -> float:
    """The summed proportional set size of these processes, MB (shared pages shared out)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return total / 1024


def tree(pid: int) -> list[int]:
    import psutil

    try:
        parent = psutil.Process(pid)
        return [pid] + [c.pid for c in parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def postgres_pids(data_dir: Path) -> list[int]:
    postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    return tree(postmaster)


def pct(seconds: list[float]) -> tuple[float, float]:
    ms = np.asarray(seconds) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


# ------------------------------------------------------------------ loading


def chunk_texts(characters: int, rng: np.random.Generator, distinct: int = 997) -> list[str]:
    """`distinct` texts of about `characters` characters each, words drawn from a Zipf-like
    vocabulary of 5,000 made-up words (compresses about as prose does); chunk r gets text r mod
    `distinct`. 0 characters: none (each chunk's text is then "chunk <r>")."""
    if characters <= 0:
        return []
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    weights = 1 / np.arange(1, 27)
    vocabulary = ["".join(rng.choice(letters, int(k), p=weights / weights.sum())) for k in rng.integers(2, 11, 5000)]
    ranks = 1 / np.arange(1, len(vocabulary) + 1)
    texts = []
    for _ in range(distinct):
        words: list[str] = []
        length = 0
        for w in rng.choice(len(vocabulary), characters, p=ranks / ranks.sum()):
            if length >= characters:
                break
            words.append(vocabulary[w])
            length += len(vocabulary[w]) + 1
        texts.append(" ".join(words))
    return texts


def load(
    url: str, vectors: np.ndarray, not_ready: float, rng: np.random.Generator, text_characters: int = 0
) -> tuple[int, int, np.ndarray, list[dict]]:
    """The collection, its documents and chunks (no index yet); (collection, generation, READY rows, metadata).

    `text_characters` > 0: each chunk's text (and its search_terms, as ingest stores the words
    of the text, so the keyword columns fill as they do) is about that long, as chunks of the
    default chunking are (chunk_new_after_n_chars 1000), and the row is as wide as a real one:
    wider than PostgreSQL's 2 kB TOAST threshold, so which columns stay in line matters."""
    n, dimensions = vectors.shape
    texts = chunk_texts(
        text_characters, np.random.default_rng(7)
    )  # its own stream: the metadata drawn from `rng` stays as it was
    documents = (n + DOC_CHUNKS - 1) // DOC_CHUNKS
    ready = rng.random(documents) >= not_ready
    metadata = document_metadata(documents, ready, 0.01, rng)
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
                        "bench" if status == "FAILED" else None,
                        json.dumps(metadata[d]),
                        chunk_count,
                    )
                )
        started = time.perf_counter()
        with conn.cursor().copy(
            "COPY chunks (document_id, tenant_id, collection_id, generation_id, chunk_index, text, search_terms, embedding)"
            " FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["uuid", "int8", "int8", "int8", "int4", "text", "text", "vector"])
            for row in range(n):
                text = texts[row % len(texts)] if texts else f"chunk {row}"
                copy.write_row(
                    (ids[row // DOC_CHUNKS], TENANT_ID, cid, gid, row % DOC_CHUNKS, text, text if texts else "", vectors[row])
                )
        print(f"loaded {n:,} chunks x {dimensions} in {time.perf_counter() - started:.1f} s", flush=True)
        conn.execute("VACUUM ANALYZE chunks, documents")
    ready_rows = np.flatnonzero(np.repeat(ready, DOC_CHUNKS)[:n])
    return cid, gid, ready_rows, metadata


def build(url: str, gid: int, dimensions: int, precision: str, maintenance_mb: int) -> dict:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(vector_index.drop_index_sql(gid))
        # The generation records its precision; search repeats that precision's expression.
        conn.execute("UPDATE collection_generations SET vector_precision = %s WHERE id = %s", (precision, gid))
        for statement in vector_index.build_settings_sql(os.cpu_count() or 1, maintenance_mb):
            conn.execute(statement)
        started = time.perf_counter()
        conn.execute(vector_index.create_index_sql(gid, dimensions, precision=precision))
        seconds = time.perf_counter() - started
        conn.execute("ANALYZE chunks")
        index_mb, table_mb, toast_mb, toasted = conn.execute(
            "SELECT pg_relation_size(%s::regclass) / 1048576.0, pg_table_size('chunks') / 1048576.0,"
            " pg_relation_size(reltoastrelid) / 1048576.0,"
            " (SELECT avg((pg_column_toast_chunk_id(embedding) IS NOT NULL)::int) FROM chunks TABLESAMPLE SYSTEM (1))"
            " FROM pg_class WHERE oid = 'chunks'::regclass",
            (vector_index.index_name(gid),),
        ).fetchone()
    print(
        f"{precision}: built HNSW in {seconds:.1f} s, index {index_mb:.0f} MB, table {table_mb:.0f} MB"
        f" (TOAST {toast_mb:.0f} MB; vectors out of line: {float(toasted or 0):.0%})",
        flush=True,
    )
    return {
        "build_s": seconds,
        "index_mb": float(index_mb),
        "table_mb": float(table_mb),
        "toast_mb": float(toast_mb),
        "vectors_toasted": float(toasted or 0),
    }


# ------------------------------------------------------------------ Sluice, one precision


def measure(url, reader_url, key, cid, gid, queries, truth, rare_truth, precision, args, data_dir) -> dict:
    from sluice_search.domain import Collection, DocumentFilter
    from sluice_search.vector_sql import vector_query

    result = build(url, gid, args.dimensions, precision, args.maintenance_work_mem_mb)
    result["loadavg_start"] = os.getloadavg()[0]
    auth = (("authorization", f"Bearer {key}"),)
    collection = Collection(
        cid, "bench", "hashing", "bench", args.dimensions, tenant_id=TENANT_ID, generation_id=gid, vector_precision=precision
    )
    requests = [
        pb.SearchRequest(collection="bench", query_vector=q.tolist(), top_k=10, mode=pb.SEARCH_MODE_VECTOR) for q in queries
    ]
    statements = [vector_query(collection, q, 10, DocumentFilter(), rescore_candidates=args.rescore) for q in queries]
    # The same index at more ef_search values (--more-ef-search): latency and recall only.
    result["ef_points"] = []
    for ef in args.more_ef_search:
        process, address = start_search(reader_url, ef, search_binary_rescore_candidates=str(args.rescore))
        try:
            point = grpc_and_sql(address, auth, reader_url, ef, requests, statements, truth, args.warmup)
        finally:
            process.terminate()
            process.wait(30)
        point.pop("plan")
        result["ef_points"].append({"ef": ef, **point})
        print(f"{precision} ef_search {ef}: {json.dumps(point)}", flush=True)
    process, address = start_search(reader_url, args.ef_search, search_binary_rescore_candidates=str(args.rescore))
    try:
        result.update(grpc_and_sql(address, auth, reader_url, args.ef_search, requests, statements, truth, args.warmup))
        # QPS with 1 and 8 concurrent clients, each its own channel.
        for clients in (1, 8):
            result[f"qps{clients}"] = qps(address, auth, requests, clients, args.qps_seconds)
        # The 1 %-selective filter: answered exactly from its documents' chunks (search's shipped plan).
        channel = grpc.insecure_channel(address)
        stub = search_service_pb2_grpc.SearchServiceStub(channel)
        where = pb.MetadataFilter(
            condition=pb.MetadataCondition(
                key="group", op=pb.FILTER_OPERATOR_EQ, value=document_pb2.MetadataValue(string_value="rare")
            )
        )
        seconds, filtered_recalls = [], []
        for n, (q, expected) in enumerate(zip(queries, rare_truth)):
            r = pb.SearchRequest(
                collection="bench",
                query_vector=q.tolist(),
                top_k=10,
                mode=pb.SEARCH_MODE_VECTOR,
                filter=pb.SearchFilter(where=where),
            )
            started = time.perf_counter()
            response = stub.Search(r, metadata=auth)
            if n >= args.warmup // 5:
                seconds.append(time.perf_counter() - started)
                filtered_recalls.append(len({int(h.chunk_id) for h in response.hits} & expected) / 10)
        result["filtered"] = pct(seconds)
        result["filtered_recall"] = float(np.mean(filtered_recalls))
        channel.close()
    finally:
        process.terminate()
        process.wait(30)
    result["index_used"] = vector_index.index_name(gid) in result.pop("plan")
    result["pg_pss_mb"] = pss_mb(postgres_pids(data_dir))
    result["loadavg_end"] = os.getloadavg()[0]  # the machine is shared: say how busy it was
    print(f"{precision}: {json.dumps(result)}", flush=True)
    return result


def grpc_and_sql(address: str, auth, reader_url: str, ef: int, requests, statements, truth, warmup: int) -> dict:
    """Each query through the search process at `address` and as its raw statement, in turns:
    which goes first alternates, and each path is timed where it went first, so that neither is
    timed on pages the other just brought into shared buffers (before 2026-12-03 every gRPC query
    ran before every raw one, on pages the gRPC pass had read). A raw statement right after a
    gRPC answer also runs beside what the search process still does then: docs/scaling.md,
    "Vectors at scale", has both effects measured. The raw statements run as search's role on a
    session set as search sets its own."""
    channel = grpc.insecure_channel(address)
    stub = search_service_pb2_grpc.SearchServiceStub(channel)
    with psycopg.connect(reader_url, autocommit=True, prepare_threshold=5) as conn:
        register_vector(conn)
        conn.execute("SET default_transaction_read_only = on")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.execute(f"SET hnsw.ef_search = {int(ef)}")
        conn.execute("SET random_page_cost = 1.1")
        conn.execute("SELECT set_config('sluice.tenant_id', %s, false)", (str(TENANT_ID),))

        def by_grpc(n: int) -> set[int]:
            return {int(h.chunk_id) for h in stub.Search(requests[n], metadata=auth).hits}

        def by_sql(n: int) -> set[int]:
            query, params = statements[n]
            return {int(r[0]) for r in conn.execute(query, params).fetchall()}

        for n in range(min(warmup, len(requests))):
            by_grpc(n), by_sql(n)
        timed: dict[str, list[float]] = {"grpc": [], "sql": []}
        recalls: dict[str, list[float]] = {"grpc": [], "sql": []}
        for n, expected in enumerate(truth):
            order = (("grpc", by_grpc), ("sql", by_sql)) if n % 2 == 0 else (("sql", by_sql), ("grpc", by_grpc))
            for place, (path, answer) in enumerate(order):
                started = time.perf_counter()
                found = answer(n)
                if place == 0:
                    timed[path].append(time.perf_counter() - started)
                recalls[path].append(len(found & expected) / 10)
        plan = "\n".join(r[0] for r in conn.execute(sql_text(conn, "EXPLAIN ", statements[0][0]), statements[0][1]))
    channel.close()
    return {
        "grpc": pct(timed["grpc"]),
        "recall": float(np.mean(recalls["grpc"])),
        "sql": pct(timed["sql"]),
        "sql_recall": float(np.mean(recalls["sql"])),
        "plan": plan,
    }


def sql_text(conn, prefix: str, query) -> str:
    return prefix + query.as_string(conn)


def qps(address: str, auth, requests, clients: int, seconds: float) -> float:
    stop = time.monotonic() + seconds
    counts = [0] * clients

    def client(i: int) -> None:
        with grpc.insecure_channel(address) as channel:
            stub = search_service_pb2_grpc.SearchServiceStub(channel)
            n = i
            while time.monotonic() < stop:
                stub.Search(requests[n % len(requests)], metadata=auth)
                counts[i] += 1
                n += clients

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    return sum(counts) / (time.monotonic() - started)


# ------------------------------------------------------------------ the other engines (own process each)


def engine_main(engine: str, data: str, out: str, sweep: list[int]) -> None:
    """Runs in its own process: builds `engine` on the READY vectors of `data`, queries it at each
    setting of `sweep`, writes JSON to `out`."""
    loaded = np.load(data)
    vectors, ids, queries, truth = loaded["vectors"], loaded["ids"], loaded["queries"], loaded["truth"]
    workdir = Path(tempfile.mkdtemp(prefix=f"sluice-{engine}-"))
    try:
        started = time.perf_counter()
        engines = {
            "lancedb": lancedb_engine,
            "chroma": chroma_engine,
            "chroma-server": chroma_server_engine,
            "milvus": milvus_engine,
        }
        search = engines[engine](workdir, vectors, ids)
        build_s = time.perf_counter() - started
        disk_mb = sum(f.stat().st_size for f in workdir.rglob("*") if f.is_file()) / 1048576
        points = []
        for knob in sweep:
            for q in queries[:50]:
                search(q, knob)
            seconds, recalls = [], []
            for q, expected in zip(queries, truth):
                started = time.perf_counter()
                found = search(q, knob)
                seconds.append(time.perf_counter() - started)
                recalls.append(len(set(found) & set(expected.tolist())) / 10)
            points.append({"knob": knob, "p": pct(seconds), "recall": float(np.mean(recalls))})
            print(f"{engine} {knob}: {points[-1]}", flush=True)
        Path(out).write_text(json.dumps({"build_s": build_s, "disk_mb": disk_mb, "points": points}))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def lancedb_engine(workdir: Path, vectors: np.ndarray, ids: np.ndarray):
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(str(workdir))
    dim = vectors.shape[1]
    table = db.create_table(
        "bench", data=pa.table({"id": pa.array(ids), "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim)})
    )
    # IVF partitions of HNSW graphs over 8-bit scalar-quantised vectors: LanceDB's HNSW index.
    table.create_index(
        metric="cosine",
        vector_column_name="vector",
        index_type="IVF_HNSW_SQ",
        num_partitions=max(1, len(ids) // 100_000),
        m=M,
        ef_construction=EF_CONSTRUCTION,
    )

    # `_distance` named: Lance warns on every query that leaves it out (a thousand lines a run).
    def search(q: np.ndarray, ef: int) -> list[int]:
        return table.search(q).metric("cosine").limit(10).ef(ef).select(["id", "_distance"]).to_arrow()["id"].to_pylist()

    return search


def chroma_engine(workdir: Path, vectors: np.ndarray, ids: np.ndarray, client=None):
    import chromadb

    client = client or chromadb.PersistentClient(path=str(workdir))
    collection = client.create_collection(
        "bench",
        embedding_function=None,
        configuration={"hnsw": {"space": "cosine", "ef_construction": EF_CONSTRUCTION, "max_neighbors": M, "ef_search": 40}},
    )
    batch = client.get_max_batch_size()
    for start in range(0, len(ids), batch):
        collection.add(ids=[str(i) for i in ids[start : start + batch]], embeddings=vectors[start : start + batch])
    current = [40]

    def search(q: np.ndarray, ef: int) -> list[int]:
        if ef != current[0]:
            collection.modify(configuration={"hnsw": {"ef_search": ef}})
            current[0] = ef
        return [int(i) for i in collection.query(query_embeddings=[q], n_results=10, include=[])["ids"][0]]

    return search


def chroma_server_engine(workdir: Path, vectors: np.ndarray, ids: np.ndarray):
    """Chroma as a service, the way Sluice is measured: its own server (`chroma run`, a child of
    this process, so in the memory measured) on a local port, queried over HTTP by its client."""
    import atexit
    import socket

    import chromadb

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "chroma"),
            "run",
            "--path",
            str(workdir / "data"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    atexit.register(server.terminate)
    deadline = time.monotonic() + 60
    while True:
        try:
            client = chromadb.HttpClient(host="127.0.0.1", port=port)
            client.heartbeat()
            break
        except Exception:  # not listening yet
            if time.monotonic() > deadline or server.poll() is not None:
                raise
            time.sleep(0.2)
    return chroma_engine(workdir, vectors, ids, client)


def milvus_engine(workdir: Path, vectors: np.ndarray, ids: np.ndarray):
    from pymilvus import DataType, MilvusClient

    client = MilvusClient(str(workdir / "milvus.db"))
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=vectors.shape[1])
    index = client.prepare_index_params()
    index.add_index(
        field_name="vector", index_type="HNSW", metric_type="COSINE", params={"M": M, "efConstruction": EF_CONSTRUCTION}
    )
    client.create_collection("bench", schema=schema, index_params=index)
    for start in range(0, len(ids), 5000):
        client.insert(
            "bench", [{"id": int(i), "vector": v} for i, v in zip(ids[start : start + 5000], vectors[start : start + 5000])]
        )
    client.flush("bench")
    client.load_collection("bench")
    while client.describe_index("bench", "vector").get("pending_index_rows", 0):
        time.sleep(1)

    def search(q: np.ndarray, ef: int) -> list[int]:
        hits = client.search("bench", [q.tolist()], limit=10, output_fields=[], search_params={"params": {"ef": ef}})[0]
        return [int(h["id"]) for h in hits]

    return search


def run_engine(engine: str, data: Path, sweep: list[int], timeout: float) -> dict:
    out = data.with_suffix(f".{engine}.json")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.vector_scale_bench",
            "--engine-worker",
            engine,
            str(data),
            str(out),
            ",".join(map(str, sweep)),
        ],
        cwd=Path(__file__).resolve().parents[1],
    )
    peak = baseline = 0.0
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        now = pss_mb(tree(process.pid))
        baseline = baseline or now
        peak = max(peak, now)
        if time.monotonic() > deadline:
            process.kill()
            print(f"{engine}: no answer in {timeout:.0f} s; left out", flush=True)
            return {}
        time.sleep(0.5)
    if process.returncode or not out.exists():
        print(f"{engine}: exit {process.returncode}; left out", flush=True)
        return {}
    result = json.loads(out.read_text())
    result["peak_pss_mb"] = peak
    print(f"{engine}: {json.dumps(result)}", flush=True)
    return result


# ------------------------------------------------------------------ the run


def run(args: argparse.Namespace) -> dict:
    rng = np.random.default_rng(args.seed)
    basis = rng.standard_normal((LATENT_DIMENSIONS, args.dimensions), dtype=np.float32)
    vectors = make_vectors(args.chunks, args.dimensions, "latent", rng, basis)
    queries = make_vectors(args.queries, args.dimensions, "latent", rng, basis)
    workdir = Path(tempfile.mkdtemp(prefix="sluice-scale-", dir=args.workdir))
    workdir.chmod(0o755)
    server = EmbeddedPostgres(workdir / "pg", cleanup="delete")
    admin = server.start()
    report: dict = {
        "chunks": args.chunks,
        "dimensions": args.dimensions,
        "not_ready": args.not_ready,
        "queries": args.queries,
        "ef_search": args.ef_search,
        "rescore": args.rescore,
        "text_characters": args.text_characters,
        "cpus": os.cpu_count(),
        "sluice": {},
        "engines": {},
    }
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"ALTER SYSTEM SET shared_buffers = '{int(args.shared_buffers_mb)}MB'")
            conn.execute("ALTER SYSTEM SET fsync = off")
            conn.execute("ALTER SYSTEM SET synchronous_commit = off")
            conn.execute("ALTER SYSTEM SET max_wal_size = '8GB'")
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
        cid, gid, ready_rows, metadata = load(url, vectors, args.not_ready, rng, args.text_characters)
        ready_vectors = vectors[ready_rows]
        truth_rows = []
        for block in range(0, len(queries), 100):
            scores = queries[block : block + 100] @ ready_vectors.T
            truth_rows.extend(np.argpartition(-scores, 10, axis=1)[:, :10])
        truth = [{int(ready_rows[i]) + 1 for i in row} for row in truth_rows]  # chunk id = row + 1 (COPY order)
        rare = np.array([r for r in ready_rows if metadata[r // DOC_CHUNKS]["group"] == "rare"])
        rare_truth = [{int(rare[i]) + 1 for i in np.argsort(-s)[:10]} for s in queries @ vectors[rare].T]
        print(f"exact top-10 of {len(queries)} queries; {len(rare):,} chunks in the 1 % filter", flush=True)
        for precision in args.precisions:
            report["sluice"][precision] = measure(
                url, reader_url, key, cid, gid, queries, truth, rare_truth, precision, args, workdir / "pg"
            )
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if args.engines:
        data = Path(args.workdir or tempfile.gettempdir()) / f"scale-{args.chunks}.npz"
        np.savez(data, vectors=ready_vectors, ids=ready_rows + 1, queries=queries, truth=np.array([sorted(t) for t in truth]))
        try:
            for engine in args.engines:
                report["engines"][engine] = run_engine(engine, data, args.engine_sweep, args.engine_timeout)
        finally:
            data.unlink(missing_ok=True)
    return report


def print_table(report: dict) -> None:
    print()
    print(
        f"{report['chunks']:,} chunks x {report['dimensions']}, {report['not_ready']:.0%} of documents not READY,"
        f" {report['queries']} queries one at a time, top_k 10, ef_search {report['ef_search']},"
        f" binary re-scores {report['rescore']}, chunk text ~{report.get('text_characters', 0)} characters,"
        f" {report['cpus']} CPUs"
    )
    header = (
        f"{'engine / index':<24} | {'build':>7} | {'index':>7} | {'memory':>7} | {'p50':>7} {'p99':>7} |"
        f" {'SQL p50':>7} {'SQL p99':>7} | {'recall':>6} | {'QPS 1':>6} {'QPS 8':>6} | {'1% filter p50':>13}"
    )
    print(header)
    print("-" * len(header))
    for precision, r in report["sluice"].items():
        print(
            f"{'Sluice ' + precision:<24} | {r['build_s']:>6.0f}s | {r['index_mb']:>5.0f}MB | {r['pg_pss_mb']:>5.0f}MB |"
            f" {r['grpc'][0]:>5.2f}ms {r['grpc'][1]:>5.2f}ms | {r['sql'][0]:>5.2f}ms {r['sql'][1]:>5.2f}ms |"
            f" {r['recall']:>6.3f} | {r['qps1']:>6.0f} {r['qps8']:>6.0f} | {r['filtered'][0]:>9.2f}ms"
            f" {'' if r['index_used'] else '(index NOT used)'}"
        )
        for point in r.get("ef_points", []):
            print(
                f"{'Sluice ' + precision + ' ef ' + str(point['ef']):<24} | {'':>7} | {'':>7} | {'':>7} |"
                f" {point['grpc'][0]:>5.2f}ms {point['grpc'][1]:>5.2f}ms | {point['sql'][0]:>5.2f}ms {point['sql'][1]:>5.2f}ms |"
                f" {point['recall']:>6.3f} | {'':>6} {'':>6} |"
            )
    for engine, r in report["engines"].items():
        for point in r.get("points", []):
            print(
                f"{engine + ' ef ' + str(point['knob']):<24} | {r['build_s']:>6.0f}s | {r['disk_mb']:>5.0f}MB |"
                f" {r['peak_pss_mb']:>5.0f}MB | {point['p'][0]:>5.2f}ms {point['p'][1]:>5.2f}ms | {'':>7} {'':>7} |"
                f" {point['recall']:>6.3f} | {'':>6} {'':>6} |"
            )
    print(
        "Sluice: memory = PostgreSQL's processes' PSS after the queries; table",
        ", ".join(f"{r['table_mb']:.0f} MB" for r in list(report["sluice"].values())[:1]),
        "(every precision keeps the float4 vectors). Engines: READY vectors only; index = their files on disk;"
        " memory = peak PSS of their process tree (includes the vectors they were given).",
    )


def fit(paths: list[str]) -> None:
    reports = sorted((json.loads(Path(p).read_text()) for p in paths), key=lambda r: r["chunks"])
    n = np.array([r["chunks"] for r in reports], dtype=float)
    target = 10_000_000
    print(f"fitted on {', '.join(f'{int(x):,}' for x in n)} chunks; projected to {target:,}")
    for precision in reports[0]["sluice"]:
        rows = [r["sluice"].get(precision) for r in reports]
        if any(r is None for r in rows):
            continue
        line = [f"{precision:<8}"]
        for name, values in (
            ("gRPC p50", [r["grpc"][0] for r in rows]),
            ("gRPC p99", [r["grpc"][1] for r in rows]),
            ("SQL p50", [r["sql"][0] for r in rows]),
        ):
            b, a = np.polyfit(np.log10(n), values, 1)
            line.append(f"{name} {a + b * math.log10(target):.2f} ms (a + b·log10 n, b {b:.2f})")
        k, c = np.polyfit(np.log(n), np.log([r["build_s"] for r in rows]), 1)
        line.append(f"build {math.exp(c) * target**k / 60:.0f} min (n^{k:.2f})")
        k2, c2 = np.polyfit(np.log(n), np.log([r["index_mb"] for r in rows]), 1)
        line.append(f"index {math.exp(c2) * target**k2 / 1024:.1f} GB")
        print("; ".join(line))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--engine-worker"]:
        engine_main(argv[1], argv[2], argv[3], [int(x) for x in argv[4].split(",")])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--not-ready", type=float, default=0.5)
    parser.add_argument(
        "--text-characters",
        type=int,
        default=1000,
        help="each chunk's text (and search_terms) about this long, as the default chunking makes them; 0: 'chunk <n>'",
    )
    parser.add_argument("--ef-search", type=int, default=50, help="search's (50 since 2026-12-03; 40 before)")
    parser.add_argument(
        "--more-ef-search",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[],
        help="also measure the same index at these ef_search values, before --ef-search (latency and recall; e.g. 40,64)",
    )
    parser.add_argument("--rescore", type=int, default=100, help="binary: candidates re-scored exactly")
    parser.add_argument("--precisions", type=lambda s: [x for x in s.split(",") if x], default=list(vector_index.PRECISIONS))
    parser.add_argument("--engines", type=lambda s: [x for x in s.split(",") if x], default=["lancedb", "chroma", "milvus"])
    parser.add_argument("--engine-sweep", type=lambda s: [int(x) for x in s.split(",")], default=[40, 100])
    parser.add_argument("--engine-timeout", type=float, default=3600)
    parser.add_argument("--qps-seconds", type=float, default=10)
    parser.add_argument("--shared-buffers-mb", type=int, default=2048)
    parser.add_argument("--maintenance-work-mem-mb", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", default=None, help="where the database and the engines' files go")
    parser.add_argument("--json", default=None, help="write the figures here too (for --fit)")
    parser.add_argument("--fit", nargs="+", default=None, help="fit the curve to these JSON reports and stop")
    args = parser.parse_args(argv)
    if args.fit:
        fit(args.fit)
        return
    report = run(args)
    print_table(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
