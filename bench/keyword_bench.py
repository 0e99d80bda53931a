"""Keyword and hybrid latency at scale: KEYWORD and HYBRID beside VECTOR, on real text.

    .venv/bin/python -m bench.keyword_bench [--chunks 100000] [--queries 300] [--chunk-characters 1000]
        [--not-ready 0.5] [--busy]

Real text: the machine's manual pages (/usr/share/man, roff markup stripped), cut into chunks of
about `--chunk-characters` (the length collections really produce, not a toy 300), as many as
`--chunks`. Queries: the one-line summaries of the pages' NAME sections (the sentence after
"name -"), removed from the text, as a user would describe a page. Vectors come from the
hashing embedder (no model: the figures are the database's and the service's, not a model's;
VECTOR, KEYWORD and HYBRID all take the query as text, so all three pay the same embedding).

Loads one collection through the same triggers a commit fires (BM25 weights and statistics,
migration 0016), `--not-ready` of its documents not READY, builds the HNSW index, then starts
`sluice-search` as a subprocess and runs every query in each mode in turn, one at a time, over
gRPC. Prints p50/p95, the ratio of each mode to VECTOR (the baseline, in the same run), and
the mean number of hits.
`--busy` runs a CPU hog on every core during the measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import multiprocessing
import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import grpc
import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from sluice.v1 import search_service_pb2 as pb
from sluice.v1 import search_service_pb2_grpc

from bench.search_bench import percentiles, start_search
from sluice_common import textsearch, vector_index
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database, user_uri
from sluice_common.embedders import HashingEmbedder
from sluice_ingest.tenants import bootstrap_keys

TENANT_ID = 1
DIMENSIONS = 384
MODES = {"VECTOR": pb.SEARCH_MODE_VECTOR, "KEYWORD": pb.SEARCH_MODE_KEYWORD, "HYBRID": pb.SEARCH_MODE_HYBRID}

_ROFF_ESCAPE = re.compile(r"\\f[BIRP0-9]|\\f\(..|\\\(..|\\[&|^e]|\\s[+-]?\d")


def man_pages(limit_pages: int | None = None) -> list[tuple[str, str, str]]:
    """(name, summary, text) of the manual pages on this machine, NAME line removed from text."""
    pages = []
    for path in sorted(Path("/usr/share/man").glob("man[1-8]/*.gz")):
        try:
            raw = gzip.decompress(path.read_bytes()).decode("utf-8", "replace")
        except (OSError, EOFError):
            continue
        if raw.startswith(".so "):
            continue
        lines, summary, in_name = [], "", False
        for line in raw.splitlines():
            if line.startswith((".SH", ".Sh")):
                in_name = "NAME" in line.upper()
                continue
            if line.startswith((".", "'")):
                continue
            text = _ROFF_ESCAPE.sub("", line.replace("\\-", "-")).replace("\\", "").strip()
            if in_name and not summary and " - " in text:
                summary = text.split(" - ", 1)[1].strip()
                continue
            if text:
                lines.append(text)
        body = " ".join(lines)
        if summary and len(body) > 400:
            pages.append((path.name, summary, body))
        if limit_pages and len(pages) >= limit_pages:
            break
    return pages


def chunk(text: str, size: int) -> list[str]:
    """Cut at sentence or word ends near `size` characters."""
    out, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind(". ", start + size // 2, end)
            end = cut + 1 if cut > 0 else max(text.rfind(" ", start + size // 2, end), start + size)
        out.append(text[start:end].strip())
        start = end
    return [c for c in out if c]


def load(url: str, pages, args, rng) -> tuple[int, int, int]:
    embedder = HashingEmbedder("hashing-v1", DIMENSIONS)
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        cid = conn.execute(
            "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions, chunk_max_characters,"
            " chunk_new_after_n_chars, chunk_overlap, max_attempts)"
            " VALUES (%s, 'bench', 'hashing', 'hashing-v1', %s, 1500, 1000, 0, 3) RETURNING id",
            (TENANT_ID, DIMENSIONS),
        ).fetchone()[0]
        (gid,) = conn.execute(
            "SELECT id FROM collection_generations WHERE collection_id = %s AND state = 'ACTIVE'", (cid,)
        ).fetchone()
        total, started = 0, time.perf_counter()
        for p, (name, _, body) in enumerate(pages):
            if total >= args.chunks:
                break
            texts = chunk(body, args.chunk_characters)[: args.chunks - total]
            ready = rng.random() >= args.not_ready
            doc = uuid.uuid4()
            conn.execute(
                "INSERT INTO documents (id, tenant_id, collection_id, filename, mime_type, status, content_sha256,"
                " size_bytes, error_message) VALUES (%s, %s, %s, %s, 'text/plain', %s, %s, 1, NULL)",
                (doc, TENANT_ID, cid, name, "READY" if ready else "EMBEDDING", f"{p:064x}"),
            )
            vectors = asyncio.run(embedder.embed_documents(texts))
            with conn.cursor().copy(
                "COPY chunks (document_id, tenant_id, collection_id, generation_id, chunk_index, text, embedding, search_terms)"
                " FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["uuid", "int8", "int8", "int8", "int4", "text", "vector", "text"])
                for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
                    copy.write_row((doc, TENANT_ID, cid, gid, i, text, np.asarray(vector, dtype=np.float32),
                                    textsearch.search_terms(text)))
            total += len(texts)
            if p % 100 == 0:  # as ingest-api's sweeper does (migration 0016)
                conn.execute("SELECT sluice_compact_keyword_stats(%s)", (gid,))
            if p % 500 == 0:
                print(f"  {total:,} chunks ({time.perf_counter() - started:.0f} s)", flush=True)
        conn.execute("SELECT sluice_compact_keyword_stats(%s)", (gid,))
        print(f"loaded {total:,} chunks from {p + 1:,} pages in {time.perf_counter() - started:.0f} s", flush=True)
        conn.execute("SET maintenance_work_mem = '1GB'")
        started = time.perf_counter()
        conn.execute(vector_index.create_index_sql(gid, DIMENSIONS))
        print(f"built HNSW index in {time.perf_counter() - started:.0f} s", flush=True)
        conn.execute("VACUUM ANALYZE chunks, documents, keyword_stats")
        sizes = conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('chunks')), pg_size_pretty(pg_relation_size('chunks_search_tsv')),"
            " pg_size_pretty(pg_total_relation_size('keyword_stats')), avg(pg_column_size(search_bm25))::int FROM chunks"
        ).fetchone()
        print(f"chunks {sizes[0]}, GIN {sizes[1]}, keyword_stats {sizes[2]}, BM25 vector {sizes[3]} bytes/chunk", flush=True)
    return cid, gid, total


def hog(stop) -> None:
    x = 0
    while not stop.is_set():
        x += 1


def run(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    pages = man_pages()
    print(f"{len(pages):,} manual pages with a summary", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="sluice-kwbench-"))
    server = EmbeddedPostgres(workdir / "pg", cleanup="delete")
    admin = server.start()
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_buffers = '1GB'")
            conn.execute("ALTER SYSTEM SET fsync = off")
            conn.execute("ALTER SYSTEM SET synchronous_commit = off")
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
        order = rng.permutation(len(pages))
        pages = [pages[i] for i in order]
        cid, gid, total = load(url, pages, args, rng)
        queries = [summary for _, summary, _ in pages[: args.queries]]

        stop = multiprocessing.Event()
        hogs = [multiprocessing.Process(target=hog, args=(stop,)) for _ in range(multiprocessing.cpu_count() if args.busy else 0)]
        for h in hogs:
            h.start()
        try:
            results = measure(reader_url, key, queries, args)
        finally:
            stop.set()
            for h in hogs:
                h.join()
        print()
        print(f"{total:,} chunks of ~{args.chunk_characters} characters from manual pages, {args.not_ready:.0%} of documents"
              f" not READY, {len(queries)} queries (page summaries), top_k=10, one at a time"
              f"{', every core busy' if args.busy else ''}")
        header = f"{'mode':>8} | {'gRPC p50':>9} {'gRPC p95':>9} | {'× VECTOR p50':>12} | {'hits':>5}"
        print(header)
        print("-" * len(header))
        vector_p50 = results["VECTOR"]["grpc"][0]
        for mode, r in results.items():
            print(f"{mode:>8} | {r['grpc'][0]:>7.2f}ms {r['grpc'][1]:>7.2f}ms | {r['grpc'][0] / vector_p50:>11.2f}x |"
                  f" {r['hits']:>5.1f}")
        print("target (issue 18): KEYWORD and HYBRID p50 ≤ 1.5× VECTOR p50 at 100,000 chunks")
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def measure(reader_url: str, key: str, queries: list[str], args) -> dict:
    process, address = start_search(reader_url, 40)
    results = {}
    try:
        channel = grpc.insecure_channel(address)
        auth = (("authorization", f"Bearer {key}"),)
        stub = search_service_pb2_grpc.SearchServiceStub(channel)
        for mode in MODES.values():
            for q in queries[: args.warmup]:
                stub.Search(pb.SearchRequest(collection="bench", query=q, top_k=10, mode=mode), metadata=auth)
        seconds: dict[str, list[float]] = {m: [] for m in MODES}
        hits: dict[str, list[int]] = {m: [] for m in MODES}
        for n, q in enumerate(queries):
            names = list(MODES)
            names = names[n % 3:] + names[: n % 3]  # take turns going first
            for name in names:
                started = time.perf_counter()
                response = stub.Search(pb.SearchRequest(collection="bench", query=q, top_k=10, mode=MODES[name]),
                                       metadata=auth)
                seconds[name].append(time.perf_counter() - started)
                hits[name].append(len(response.hits))
        channel.close()
        for name in MODES:
            results[name] = {"grpc": percentiles(seconds[name]), "hits": float(np.mean(hits[name]))}
    finally:
        process.terminate()
        process.wait(30)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--chunk-characters", type=int, default=1000)
    parser.add_argument("--not-ready", type=float, default=0.5)
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
