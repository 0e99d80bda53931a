"""Keyword and hybrid latency at scale: KEYWORD and HYBRID beside VECTOR, on real text.

    .venv/bin/python -m bench.keyword_bench [--chunks 100000] [--queries 300] [--chunk-characters 1000]
        [--not-ready 0.5] [--busy] [--db-dir .sluice/keyword-bench-db] [--load-only]

Real text: the machine's manual pages (/usr/share/man, roff markup stripped), cut into chunks of
about `--chunk-characters` (the length collections really produce, not a toy 300), as many as
`--chunks`. Queries: the one-line summaries of the pages' NAME sections (the sentence after
"name -"), removed from the text, as a user would describe a page. Vectors come from the
hashing embedder (no model: the figures are the database's and the service's, not a model's;
VECTOR, KEYWORD and HYBRID all take the query as text, so all three pay the same embedding).

Loads one collection through the same triggers a commit fires (BM25 weights and statistics,
migration 0016), `--not-ready` of its documents not READY, builds the HNSW index, then starts
`sluice-search` as a subprocess and runs every query in each mode in turn, one at a time, over
gRPC. Prints p50/p99, the ratio of each mode to VECTOR (the baseline, in the same run), and
the mean number of hits.
`--db-dir` keeps the loaded database (loading ~100,000 chunks through the triggers takes half an
hour on two cores) and reuses it on the next run, applying any new migration to it first.
`--busy` runs a CPU hog on every core during the measurement. `--answers FILE` keeps every
answer of the gRPC run, or compares this run's with it: run an older version first with
`PYTHONPATH=<its services/search/src>` (the search subprocess imports it), then this one.
`--explain-cost` measures SearchRequest.explain instead (docs/search.md, "Why a hit ranked"): the
same queries with and without it, query by query in turns (which goes first alternates), through
gRPC; p50/p99 of each, their ratio, the median of the per-query ratios, and how many answers
differ (explain must change none).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import multiprocessing
import os
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
from sluice_common import textsearch, vector_index
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database, user_uri
from sluice_common.embedders import HashingEmbedder
from sluice_ingest.tenants import bootstrap_keys

from bench.search_bench import start_search

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
                    copy.write_row(
                        (doc, TENANT_ID, cid, gid, i, text, np.asarray(vector, dtype=np.float32), textsearch.search_terms(text))
                    )
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
        conn.execute("VACUUM ANALYZE chunks, keyword_chunks, documents, keyword_stats")
        sizes = conn.execute(
            "SELECT pg_size_pretty(pg_total_relation_size('chunks')), pg_size_pretty(pg_total_relation_size('keyword_chunks')),"
            " pg_size_pretty(pg_total_relation_size('keyword_stats')), avg(pg_column_size(search_bm25))::int FROM chunks"
        ).fetchone()
        print(
            f"chunks {sizes[0]}, keyword_chunks and its GIN {sizes[1]}, keyword_stats {sizes[2]}, BM25 vector {sizes[3]} bytes/chunk",
            flush=True,
        )
    return cid, gid, total


def hog(stop) -> None:
    x = 0
    while not stop.is_set():
        x += 1


def run(args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    pages = man_pages()
    print(f"{len(pages):,} manual pages with a summary", flush=True)
    keep = args.db_dir is not None
    workdir = Path(args.db_dir).resolve() if keep else Path(tempfile.mkdtemp(prefix="sluice-kwbench-"))
    server = EmbeddedPostgres(workdir / "pg", cleanup="stop" if keep else "delete")
    fresh = not (workdir / "pg" / "PG_VERSION").exists()
    admin = server.start()
    try:
        if fresh:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET shared_buffers = '1GB'")
                conn.execute("ALTER SYSTEM SET fsync = off")
                conn.execute("ALTER SYSTEM SET synchronous_commit = off")
            server.stop()
            admin = server.start()
        ensure_database(admin, "bench")
        url = database_uri(admin, "bench")
        from sluice_ingest.migrations import upgrade

        # On a kept database this applies the migrations written since it was loaded, over its chunks.
        started = time.perf_counter()
        upgrade(url)
        print(f"migrations applied in {time.perf_counter() - started:.1f} s", flush=True)
        key = bootstrap_keys(url)["client"]
        with psycopg.connect(url, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'sluice_search'").fetchone():
                conn.execute("CREATE ROLE sluice_search LOGIN IN ROLE sluice_search_reader")
            loaded = conn.execute(
                "SELECT c.id, g.id, (SELECT count(*) FROM chunks k WHERE k.generation_id = g.id)"
                " FROM collections c JOIN collection_generations g ON g.collection_id = c.id AND g.state = 'ACTIVE'"
                " WHERE c.name = 'bench' AND c.tenant_id = %s",
                (TENANT_ID,),
            ).fetchone()
            done = (
                loaded is not None
                and conn.execute(
                    "SELECT 1 FROM pg_indexes WHERE indexname = %s", (vector_index.index_name(loaded[1]),)
                ).fetchone()
                is not None
            )
        reader_url = user_uri(url, "sluice_search")
        order = rng.permutation(len(pages))
        pages = [pages[i] for i in order]
        if done:
            cid, gid, total = loaded
            print(f"reusing {total:,} chunks in {workdir / 'pg'}", flush=True)
        else:
            if loaded is not None:
                raise SystemExit(f"{workdir} holds a half-loaded collection: delete the folder and load again")
            cid, gid, total = load(url, pages, args, rng)
        queries = [summary for _, summary, _ in pages[: args.queries]]
        if args.load_only:
            return
        if args.profile:
            asyncio.run(profile(reader_url, cid, gid, queries[: args.profile], args))
            return

        stop = multiprocessing.Event()
        hogs = [multiprocessing.Process(target=hog, args=(stop,)) for _ in range(multiprocessing.cpu_count() if args.busy else 0)]
        for h in hogs:
            h.start()
        load_before = os.getloadavg()[0]
        try:
            with query_model(url, cid, args.query_model):
                if args.explain_cost:
                    explained = measure_explain(reader_url, key, queries, args)
                else:
                    results = measure(reader_url, key, queries, args)
        finally:
            stop.set()
            for h in hogs:
                h.join()
        print()
        if args.explain_cost:
            report_explain(explained, total, len(queries), load_before, args)
            return
        print(
            f"{total:,} chunks of ~{args.chunk_characters} characters from manual pages, {args.not_ready:.0%} of documents"
            f" not READY, {len(queries)} queries (page summaries), top_k=10, one at a time"
            f"{', every core busy' if args.busy else ''}"
            f"{f', queries embedded by {args.query_model} (stored vectors: hashing)' if args.query_model else ''};"
            f" load average {load_before:.1f} before,"
            f" {os.getloadavg()[0]:.1f} after"
        )
        header = f"{'mode':>8} | {'gRPC p50':>9} {'gRPC p99':>9} | {'p50 × VECTOR':>12} {'p99 × VECTOR':>12} | {'hits':>5}"  # noqa: RUF001 - a times sign
        print(header)
        print("-" * len(header))
        vector_p50, vector_p99 = results["VECTOR"]["grpc"]
        for mode, r in results.items():
            p50, p99 = r["grpc"]
            print(
                f"{mode:>8} | {p50:>7.2f}ms {p99:>7.2f}ms | {p50 / vector_p50:>11.2f}x {p99 / vector_p99:>11.2f}x |"
                f" {r['hits']:>5.1f}"
            )
        print("target (issue 18): KEYWORD and HYBRID p50 ≤ 1.5× VECTOR p50 at 100,000 chunks")  # noqa: RUF001 - a times sign
    finally:
        server.stop()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def query_model(url: str, cid: int, model: str):
    """With `--query-model`, the collection says its embedder is that local model while search is
    measured, then hashing again: VECTOR and HYBRID then embed each query with the model, as they
    do in a collection on it (`make run`'s default is all-MiniLM-L6-v2), and walk the same HNSW
    graph over the same stored vectors (hashing ones: the answers mean nothing, the work is the
    same). Without it, VECTOR's p50 has no model in it, which no user's has."""
    if not model:
        yield
        return

    def claim(provider: str, name: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "UPDATE collections SET embedder_provider = %s, embedder_model = %s WHERE id = %s", (provider, name, cid)
            )
            conn.execute(
                "UPDATE collection_generations SET embedder_provider = %s, embedder_model = %s"
                " WHERE collection_id = %s AND state = 'ACTIVE'",
                (provider, name, cid),
            )

    claim("sentence_transformers", model)
    try:
        yield
    finally:
        claim("hashing", "hashing-v1")


def _load_against(path: str):
    """Another version's keyword.py (`--against`), loaded as a module of its own inside sluice_search
    (its `from . import rows` is this version's rows.py), called as this version's keyword.search is."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sluice_search.keyword_against", path)
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    return other


class TimedCursor:
    """keyword.search reads every statement's rows through a cursor of its own (rows.fetch): each
    statement is timed from its execute to its fetch, and EXPLAINed first when asked. Its BEGIN
    (its snapshot, sluice_common.db.one_snapshot) goes through conn.execute: no rows, no plan, not
    one of the statements counted (the query's total has it)."""

    def __init__(self, cursor, conn, real_execute, log: list, explain: dict) -> None:
        self.cursor, self.conn, self.real_execute, self.log, self.explain = cursor, conn, real_execute, log, explain

    async def execute(self, query, params=None, **kw):
        self.text = (
            query if isinstance(query, bytes) else query.as_bytes(self.conn) if hasattr(query, "as_bytes") else query.encode()
        )
        if self.explain["on"]:
            plan = await self.real_execute(b"EXPLAIN (ANALYZE, BUFFERS) " + self.text, params)
            print("\n".join(r[0] for r in await plan.fetchall()))
        self.started = time.perf_counter()
        await self.cursor.execute(query, params, **kw)
        return self

    async def fetchall(self):
        rows = await self.cursor.fetchall()
        self.log.append((self.text, time.perf_counter() - self.started, len(rows)))
        return rows

    async def fetchone(self):
        rows = await self.fetchall()
        return rows[0] if rows else None


async def profile(reader_url: str, cid: int, gid: int, queries: list[str], args) -> None:
    """Where a KEYWORD query's time goes: each statement keyword.search runs, timed in-process on
    search's own role and session settings (no gRPC), and EXPLAIN (ANALYZE, BUFFERS) of the
    statements of the first `--explain` queries."""
    from psycopg import sql
    from sluice_search import keyword
    from sluice_search.rows import HIT_COLUMNS, KeywordHitRow

    if args.first_candidates:
        keyword.FIRST_CANDIDATES = args.first_candidates

    scope = sql.SQL("{} AND c.tenant_id = {}").format(vector_index.generation_predicate(gid), sql.Literal(TENANT_ID))
    async with await psycopg.AsyncConnection.connect(reader_url, autocommit=True, prepare_threshold=5) as conn:
        await conn.execute("SELECT set_config('sluice.tenant_id', %s, false)", (str(TENANT_ID),))
        await conn.execute("SET random_page_cost = 1.1")
        if args.plan_cache_mode:
            await conn.execute(sql.SQL("SET plan_cache_mode = {}").format(sql.Identifier(args.plan_cache_mode)))
        log: list[tuple[bytes, float, int]] = []
        explain = {"on": False}
        real_execute = conn.execute
        real_cursor = conn.cursor

        def timed_cursor(*a, **kw):
            return TimedCursor(real_cursor(*a, **kw), conn, real_execute, log, explain)

        conn.cursor = timed_cursor  # type: ignore[method-assign]
        for q in queries[:3]:  # warm
            await keyword.search(
                conn,
                gid,
                textsearch.query_terms(q),
                args.limit,
                scope,
                HIT_COLUMNS,
                sql.SQL(""),
                {},
                KeywordHitRow,
                args.exact or None,
            )
        other = _load_against(args.against) if args.against else None
        per_query, against, differ = [], [], 0
        for n, q in enumerate(queries):
            explain["on"] = n < args.explain
            if explain["on"]:
                print(f"\n=== {q!r} terms {textsearch.query_terms(q)}")
            terms = textsearch.query_terms(q)
            runs = [("this", keyword), ("against", other)] if other else [("this", keyword)]
            answers = {}
            for name, module in runs if n % 2 == 0 else runs[::-1]:
                log.clear()
                started = time.perf_counter()
                answers[name] = await module.search(
                    conn, gid, terms, args.limit, scope, HIT_COLUMNS, sql.SQL(""), {}, KeywordHitRow, args.exact or None
                )
                total = time.perf_counter() - started - (sum(t for _, t, _ in log) if explain["on"] else 0)
                if not explain["on"]:
                    if name == "this":
                        per_query.append((total, [(t, rows) for _, t, rows in log]))
                    else:
                        against.append(total)
            if other and [(r.id, round(float(r.rank), 4)) for r in answers["this"]] != [
                (r.id, round(float(r.rank), 4)) for r in answers["against"]
            ]:
                differ += 1
                print(f"different answers for {q!r}")
        totals = np.asarray([t for t, _ in per_query]) * 1000
        statements = np.asarray([len(s) for _, s in per_query])
        first = np.asarray([s[0][0] for _, s in per_query]) * 1000
        rest = np.asarray([sum(t for t, _ in s[1:]) for _, s in per_query]) * 1000
        print(
            f"\nin-process KEYWORD, {len(per_query)} queries: p50 {np.percentile(totals, 50):.2f} ms,"
            f" p99 {np.percentile(totals, 99):.2f} ms; statements per query: mean {statements.mean():.2f},"
            f" max {statements.max()}; first statement p50 {np.percentile(first, 50):.2f} ms;"
            f" the others (scoring rounds) p50 {np.percentile(rest, 50):.2f} ms, mean {rest.mean():.2f} ms"
        )
        if other:
            base = np.asarray(against) * 1000
            print(
                f"against {args.against}, the same queries taking turns: p50 {np.percentile(base, 50):.2f} ms,"
                f" p99 {np.percentile(base, 99):.2f} ms; this / that p50 {np.percentile(totals, 50) / np.percentile(base, 50):.2f};"
                f" per query, median of this / that {np.median(totals / base):.2f}; {differ} answers differ"
            )


def compare_answers(path: str, answers: dict[str, list[list]], queries: list[str]) -> None:
    """Write every answer (chunk ids and scores, per mode and query) to `path`, or, when it exists
    (another version's run), compare with it and print the queries whose answers differ."""
    import json

    file = Path(path)
    if not file.exists():
        file.write_text(json.dumps({"queries": queries, "answers": answers}))
        print(f"answers written to {path}")
        return
    before = json.loads(file.read_text())
    if before["queries"] != queries:
        print(f"{path} holds other queries: not compared")
        return
    for mode, theirs in before["answers"].items():
        differ = [q for q, a, b in zip(queries, answers[mode], theirs, strict=True) if a != b]
        print(f"{mode}: {len(differ)} of {len(queries)} answers differ from {path}")
        for q in differ[:5]:
            print(f"  {q!r}")


def measure(reader_url: str, key: str, queries: list[str], args) -> dict:
    from sluice_search.settings import SearchSettings

    # The ef_search search ships with (40 until 2026-12-03, 50 since).
    process, address = start_search(reader_url, SearchSettings.model_fields["search_hnsw_ef_search"].default)
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
        answers: dict[str, list[list]] = {m: [] for m in MODES}
        for n, q in enumerate(queries):
            names = list(MODES)
            names = names[n % 3 :] + names[: n % 3]  # take turns going first
            for name in names:
                started = time.perf_counter()
                response = stub.Search(pb.SearchRequest(collection="bench", query=q, top_k=10, mode=MODES[name]), metadata=auth)
                seconds[name].append(time.perf_counter() - started)
                hits[name].append(len(response.hits))
                answers[name].append([[h.chunk_id, round(h.score, 5)] for h in response.hits])
        channel.close()
        for name in MODES:
            ms = np.asarray(seconds[name]) * 1000
            results[name] = {
                "grpc": (float(np.percentile(ms, 50)), float(np.percentile(ms, 99))),
                "hits": float(np.mean(hits[name])),
            }
        if args.answers:
            compare_answers(args.answers, answers, queries)
    finally:
        process.terminate()
        process.wait(30)
    return results


def measure_explain(reader_url: str, key: str, queries: list[str], args) -> dict:
    """Each mode's queries with and without explain, query by query in turns, through gRPC."""
    from sluice_search.settings import SearchSettings

    modes = [m.strip().upper() for m in args.explain_modes.split(",") if m.strip()]
    process, address = start_search(reader_url, SearchSettings.model_fields["search_hnsw_ef_search"].default)
    seconds: dict[tuple[str, bool], list[float]] = {(m, e): [] for m in modes for e in (False, True)}
    differ: dict[str, int] = dict.fromkeys(modes, 0)
    try:
        channel = grpc.insecure_channel(address)
        auth = (("authorization", f"Bearer {key}"),)
        stub = search_service_pb2_grpc.SearchServiceStub(channel)

        def ask(q: str, mode: str, explain: bool) -> tuple[float, list]:
            started = time.perf_counter()
            response = stub.Search(
                pb.SearchRequest(collection="bench", query=q, top_k=10, mode=MODES[mode], explain=explain), metadata=auth
            )
            elapsed = time.perf_counter() - started
            return elapsed, [(h.chunk_id, h.score, h.first_stage_score, h.text) for h in response.hits]

        for q in queries[: args.warmup]:
            for mode in modes:
                ask(q, mode, False)
                ask(q, mode, True)
        for n, q in enumerate(queries):
            for mode in modes:
                answers = {}
                for explain in (False, True) if n % 2 == 0 else (True, False):  # take turns going first
                    elapsed, answers[explain] = ask(q, mode, explain)
                    seconds[(mode, explain)].append(elapsed)
                differ[mode] += answers[False] != answers[True]
        channel.close()
    finally:
        process.terminate()
        process.wait(30)
    return {"modes": modes, "seconds": seconds, "differ": differ}


def report_explain(result: dict, total: int, queries: int, load_before: float, args) -> None:
    print(
        f"SearchRequest.explain: {total:,} chunks of ~{args.chunk_characters} characters from manual pages,"
        f" {args.not_ready:.0%} of documents not READY, {queries} queries (page summaries), top_k=10, through gRPC,"
        f" with and without explain in turns"
        f"{f', queries embedded by {args.query_model}' if args.query_model else ', hashing query vectors'}"
        f"{', every core busy' if args.busy else ''}; load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    header = (
        f"{'mode':>8} | {'plain p50':>9} {'plain p99':>9} | {'explain p50':>11} {'explain p99':>11} |"
        f" {'p50 ratio':>9} {'p99 ratio':>9} {'per-query':>9} | differ"
    )
    print(header)
    print("-" * len(header))
    for mode in result["modes"]:
        plain = np.asarray(result["seconds"][(mode, False)]) * 1000
        explained = np.asarray(result["seconds"][(mode, True)]) * 1000
        p50, p99 = np.percentile(plain, 50), np.percentile(plain, 99)
        e50, e99 = np.percentile(explained, 50), np.percentile(explained, 99)
        paired = float(np.median(explained / plain))
        print(
            f"{mode:>8} | {p50:>7.2f}ms {p99:>7.2f}ms | {e50:>9.2f}ms {e99:>9.2f}ms |"
            f" {e50 / p50:>8.3f}x {e99 / p99:>8.3f}x {paired:>8.3f}x | {result['differ'][mode]} of {queries}"
        )
    print("bar (issue 34): explain at most 1.2x a plain HYBRID search")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--chunk-characters", type=int, default=1000)
    parser.add_argument("--not-ready", type=float, default=0.5)
    parser.add_argument("--busy", action="store_true")
    parser.add_argument(
        "--query-model",
        default="",
        metavar="MODEL",
        help="embed the queries with this local model (e.g. all-MiniLM-L6-v2), as a collection on it does",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--db-dir",
        help="keep the database here and reuse it when it is loaded already"
        " (e.g. .sluice/keyword-bench-db; pending migrations are applied to it)",
    )
    parser.add_argument("--load-only", action="store_true", help="load (or upgrade) the database and stop")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="instead of the gRPC run: time each statement of N KEYWORD queries in-process",
    )
    parser.add_argument(
        "--first-candidates",
        type=int,
        default=0,
        metavar="N",
        help="with --profile: keyword.FIRST_CANDIDATES (the first round's posting budget)",
    )
    parser.add_argument(
        "--against",
        default="",
        metavar="KEYWORD_PY",
        help="with --profile: another keyword.py (e.g. an older one), run in turns with this one, its answers compared",
    )
    parser.add_argument("--limit", type=int, default=10, help="with --profile: hits asked (HYBRID asks 50)")
    parser.add_argument("--exact", type=int, default=0, help="with --profile: hits that must be exact (HYBRID: 10)")
    parser.add_argument(
        "--answers",
        default="",
        metavar="JSON",
        help="write every gRPC answer (chunk ids, scores) there, or compare with it when it exists"
        " (run another version first: PYTHONPATH=<its src> for the search subprocess)",
    )
    parser.add_argument("--plan-cache-mode", default="", help="with --profile: PostgreSQL's plan_cache_mode")
    parser.add_argument(
        "--explain-cost",
        action="store_true",
        help="instead of the modes' comparison: each query with and without SearchRequest.explain, in turns",
    )
    parser.add_argument("--explain-modes", default="HYBRID", metavar="M1,M2", help="with --explain-cost: the modes measured")
    parser.add_argument(
        "--explain",
        type=int,
        default=3,
        metavar="N",
        help="with --profile: EXPLAIN (ANALYZE, BUFFERS) the statements of the first N queries",
    )
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
