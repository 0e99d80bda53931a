"""Retrieval quality on real documents: Sluice's three search modes beside bm25s and exact search.

    .venv/bin/python -m bench.retrieval_bench --set en|zh|readme|all [--db-dir DIR] [--model all-MiniLM-L6-v2]
        [--dimensions 384] [--limit N] [--workers 1] [--json OUT]

For each eval set (bench/evalsets; built into .sluice/evalsets on first use, then reused):

1. An embedded PostgreSQL, migrated; a collection on the local embedder (`--model`, default the
   `make run` default all-MiniLM-L6-v2) with the default chunking, as `sluice collections create`
   makes it.
2. The set's documents uploaded through the real pipeline: an in-process ingest-api and real
   worker processes (`python -m sluice_worker.main`: unstructured parsing, chunking, the model),
   until every document is READY.
3. A search service started fresh as a subprocess (`python -m sluice_search.main`, with this
   process's environment: SLUICE_SEARCH_RRF_K=… and the like on the command line take effect),
   and every query in every mode (VECTOR, KEYWORD, HYBRID) through the public Search RPC,
   top_k 10, one at a time, timed at the client.
4. In the same run, two references: bm25s 0.3.16 (default parameters; English stop words for
   en, jieba tokens for zh) over the whole documents as uploaded, no chunking; and exact search
   with the same model over the very chunks Sluice stored (read from the database, embedded
   again with the model, cosine by numpy brute force, a document's best chunk first).

With `--db-dir DIR` the PostgreSQL data lives in DIR and is kept: a second run with the same
set, model and limit finds the collection READY and goes straight to step 3 (seconds, for
ranking work). Migrations are applied on every start; a change to what ingestion writes needs
a fresh DIR (or a migration that backfills). The chunk embeddings of the exact reference are
cached in DIR as well.

Metrics (sluice_common.evaluation, docs/evaluation.md): hit@1, hit@3, hit@10, MRR@10, nDCG@10
and p50 latency (the references' latencies are in-process, without gRPC).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
import psycopg
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sluice.v1 import collection_pb2, document_service_pb2_grpc, search_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import search_service_pb2 as pb
from sluice_common.channels import keyed_channel
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database, user_uri
from sluice_common.evaluation import Hit, Query, evaluate, load_queries, score
from sluice_ingest.migrations import upgrade
from sluice_ingest.tenants import bootstrap_keys

from bench.evalsets import SETS, EvalSet, ensure

REPO = Path(__file__).resolve().parents[1]
MODES = {"VECTOR": pb.SEARCH_MODE_VECTOR, "KEYWORD": pb.SEARCH_MODE_KEYWORD, "HYBRID": pb.SEARCH_MODE_HYBRID}
ROWS = ("bm25s-whole-docs", "exact-ST", "VECTOR", "KEYWORD", "HYBRID")
# Hand-written questions over a set's documents (docs/evaluation.md, "Labelled questions"): how a
# user asks ("how do I …"), not a summary. Run beside the set's own queries, through Search only.
QUESTIONS = {"zh": Path(__file__).resolve().parent / "evalsets" / "zh_questions.jsonl"}
COLUMNS = (("hit@1", "hit@1"), ("hit@3", "hit@3"), ("hit@10", "hit@10"), ("MRR@10", "mrr@10"), ("nDCG@10", "ndcg@10"))
TOP_K = 10
EXACT_CHECK = 64  # chunks embedded again to check the stored vectors (exact_reference)


# ------------------------------------------------------------------ services


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_serving(address: str, process: subprocess.Popen, what: str, timeout: float = 120) -> None:
    channel = grpc.insecure_channel(address)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                if status.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if process.poll() is not None:
                raise SystemExit(f"{what} exited with code {process.returncode} while starting")
            if time.monotonic() > deadline:
                raise SystemExit(f"{what} did not report SERVING within {timeout:.0f} s")
            time.sleep(0.2)
    finally:
        channel.close()


def start_subprocess(module: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    out = log.open("ab")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", module], env={**os.environ, **env}, cwd=REPO, stdout=out, stderr=subprocess.STDOUT
        )
    finally:
        out.close()


def stop_processes(processes: list[subprocess.Popen], timeout: float = 60) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def start_search(reader_url: str, logs: Path) -> tuple[subprocess.Popen, str]:
    """sluice-search as a subprocess with this environment (SLUICE_SEARCH_* settings included)."""
    address = f"127.0.0.1:{free_port()}"
    process = start_subprocess(
        "sluice_search.main",
        {
            "SLUICE_SEARCH_DATABASE_URL": reader_url,
            "SLUICE_SEARCH_BIND": address,
            "SLUICE_LOG_LEVEL": os.environ.get("SLUICE_LOG_LEVEL", "WARNING"),
            "SLUICE_RATE_LIMIT_PER_SECOND": "0",
            "SLUICE_METRICS_PORT": "0",
        },
        logs / "search.log",
    )
    wait_serving(address, process, f"sluice-search (log {logs / 'search.log'})")
    return process, address


# ------------------------------------------------------------------ ingestion


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def ensure_search_role(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'sluice_search'").fetchone()
        if not exists:
            conn.execute("CREATE ROLE sluice_search LOGIN IN ROLE sluice_search_reader")
    return user_uri(url, "sluice_search")


def collection_state(url: str, collection: str) -> dict[str, str] | None:
    """filename → status of the collection's documents, None when the collection does not exist."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT id FROM collections WHERE name = %s", (collection,)).fetchone()
        if row is None:
            return None
        return dict(conn.execute("SELECT filename, status FROM documents WHERE collection_id = %s", (row[0],)).fetchall())


def upload(stub, collection: str, path: Path) -> None:
    content = path.read_bytes()

    def messages():
        yield ds.UploadDocumentRequest(metadata=ds.UploadDocumentMetadata(collection=collection, filename=path.name))
        for start in range(0, len(content), 256 * 1024):
            yield ds.UploadDocumentRequest(data=content[start : start + 256 * 1024])
        yield ds.UploadDocumentRequest(
            trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
        )

    stub.UploadDocument(messages(), timeout=120)


def ingest(url: str, keys: dict[str, str], collection: str, documents: list[Path], args, logs: Path) -> None:
    """Upload what is missing through ingest-api and let real workers make it READY."""
    from sluice_ingest.settings import IngestSettings

    from bench.worker_bench import IngestInThread

    ingest_api = IngestInThread(
        IngestSettings(database_url=url, bind="127.0.0.1:0", log_level="WARNING", rate_limit_per_second=0.0)
    )
    channel = keyed_channel(ingest_api.address, keys["client"])
    stub = document_service_pb2_grpc.DocumentServiceStub(channel)
    workers: list[subprocess.Popen] = []
    try:
        state = collection_state(url, collection)
        if state is None:
            stub.CreateCollection(
                ds.CreateCollectionRequest(
                    collection=collection_pb2.Collection(
                        name=collection,
                        embedder=collection_pb2.EmbedderConfig(
                            provider=collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS,
                            model=args.model,
                            dimensions=args.dimensions,
                        ),
                        description=f"eval set, bench/retrieval_bench.py, model {args.model}",
                    )
                )
            )
            state = {}
        missing = [p for p in documents if p.name not in state]
        if "FAILED" in state.values():  # an earlier run's failures get another chance
            from sluice.v1 import document_pb2

            failed = stub.ListDocuments(
                ds.ListDocumentsRequest(collection=collection, status=document_pb2.DOCUMENT_STATUS_FAILED, page_size=1000)
            ).documents
            for document in failed:
                stub.RetryDocument(ds.RetryDocumentRequest(id=document.id))
        started = time.monotonic()
        for n, path in enumerate(missing, start=1):
            upload(stub, collection, path)
            if n % 100 == 0:
                print(f"  uploaded {n}/{len(missing)}", flush=True)
        workers = [
            start_subprocess(
                "sluice_worker.main",
                {
                    "SLUICE_INGEST_ADDRESS": ingest_api.address,
                    "SLUICE_API_KEY": keys["worker"],
                    "SLUICE_WORKER_ID": f"retrieval-bench-{i}",
                    "SLUICE_CLAIM_WAIT_SECONDS": "2",
                    "SLUICE_LOG_LEVEL": "WARNING",
                    "SLUICE_METRICS_PORT": "0",
                },
                logs / f"worker-{i}.log",
            )
            for i in range(args.workers)
        ]
        wait_ready(url, collection, len(documents), workers, started)
    finally:
        stop_processes(workers)
        channel.close()
        ingest_api.stop()


def wait_ready(url: str, collection: str, expected: int, workers: list[subprocess.Popen], started: float) -> None:
    last = 0.0
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            ready, failed, chunks = conn.execute(
                "SELECT count(*) FILTER (WHERE d.status = 'READY'), count(*) FILTER (WHERE d.status = 'FAILED'),"
                " coalesce(sum(d.chunk_count) FILTER (WHERE d.status = 'READY'), 0)"
                " FROM documents d JOIN collections c ON c.id = d.collection_id WHERE c.name = %s",
                (collection,),
            ).fetchone()
            now = time.monotonic()
            if ready + failed >= expected:
                print(f"  {ready} READY, {failed} FAILED, {chunks} chunks in {now - started:.0f} s", flush=True)
                return
            if now - last > 15:
                print(f"  {ready + failed}/{expected} done, {chunks} chunks, {now - started:.0f} s", flush=True)
                last = now
            if all(w.poll() is not None for w in workers):
                raise SystemExit("every worker exited; see their logs")
            time.sleep(0.5)


# ------------------------------------------------------------------ Sluice's modes


def run_modes(address: str, key: str, collection: str, queries: list[Query], modes: list[str]) -> dict[str, dict]:
    channel = keyed_channel(address, key)
    stub = search_service_pb2_grpc.SearchServiceStub(channel)
    results = {}
    try:
        for mode in modes:  # warm-up, not counted: the first query of a collection loads the model
            stub.Search(
                pb.SearchRequest(collection=collection, query=queries[0].query, top_k=TOP_K, mode=MODES[mode]), timeout=300
            )
        for mode in modes:
            value = MODES[mode]
            ranked, latencies, errors = {}, {}, {}
            for query in queries:
                request = pb.SearchRequest(collection=collection, query=query.query, top_k=TOP_K, mode=value)
                started = time.perf_counter()
                try:
                    response = stub.Search(request, timeout=60)
                except grpc.RpcError as error:  # counted as a miss, and reported
                    errors[query.id] = f"{error.code().name}: {error.details()}"
                    continue
                latencies[query.id] = time.perf_counter() - started
                ranked[query.id] = list(response.hits)
            if errors:
                first = next(iter(errors.items()))
                print(f"  {mode}: {len(errors)} queries failed (counted as misses), e.g. {first[0]!r}: {first[1]}", flush=True)
            results[mode] = {"ranked": ranked, "latencies": latencies, "errors": errors}
    finally:
        channel.close()
    return results


# ------------------------------------------------------------------ references


def zh_tokens(text: str) -> list[str]:
    import jieba

    return [t for t in (w.strip().lower() for w in jieba.lcut(text)) if t and any(c.isalnum() for c in t)]


def bm25s_reference(evalset: EvalSet, documents: list[Path]) -> dict:
    """bm25s 0.3.16 with default parameters over the whole documents, no chunking."""
    import bm25s

    names = [p.name for p in documents]
    texts = [p.read_text(encoding="utf-8") for p in documents]
    retriever = bm25s.BM25()
    if evalset.name == "zh":
        import jieba

        jieba.setLogLevel(60)
        retriever.index([zh_tokens(t) for t in texts], show_progress=False)

        def tokens(query: str):
            return [zh_tokens(query)]
    else:
        retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)

        def tokens(query: str):
            return bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)

    ranked, latencies = {}, {}
    k = min(TOP_K, len(names))
    for query in evalset.queries:
        started = time.perf_counter()
        query_tokens = tokens(query.query)
        if any(query_tokens[0]):
            rows, _ = retriever.retrieve(query_tokens, k=k, show_progress=False, n_threads=1)
            found = [names[i] for i in rows[0]]
        else:
            found = []
        latencies[query.id] = time.perf_counter() - started
        ranked[query.id] = [Hit(filename=name) for name in found]
    return {"ranked": ranked, "latencies": latencies}


def stored_chunks(url: str, collection: str) -> tuple[list[str], list[str], np.ndarray]:
    """(filename, text, stored vector) of every chunk of the collection's ACTIVE generation (READY docs)."""
    from pgvector.psycopg import register_vector

    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        rows = conn.execute(
            "SELECT d.filename, ch.text, ch.embedding FROM chunks ch JOIN documents d ON d.id = ch.document_id"
            " JOIN collections c ON c.id = ch.collection_id"
            " JOIN collection_generations g ON g.id = ch.generation_id AND g.state = 'ACTIVE'"
            " WHERE c.name = %s AND d.status = 'READY' ORDER BY d.filename, ch.chunk_index",
            (collection,),
        ).fetchall()
    return [r[0] for r in rows], [r[1] for r in rows], np.asarray([r[2].to_numpy() for r in rows], dtype=np.float32)


def exact_reference(url: str, collection: str, queries: list[Query], args, cache_dir: Path | None) -> dict:
    """The same model, the same chunks, exact cosine search (numpy brute force over every chunk).

    The chunk vectors are the model's own output for the stored chunk texts. Embedding thousands
    of chunks again costs as much as the ingestion did, so by default the vectors Sluice stored
    are used after checking, on a seeded sample of EXACT_CHECK chunks embedded again here, that
    they are what the model gives (mean cosine printed); `--exact-reembed` embeds every chunk
    again (cached in --db-dir). With --db-dir the whole result is cached too, keyed by the chunks,
    the model and the queries: it does not depend on search's settings, so a rerun for a ranking
    change does not embed anything again."""
    import asyncio

    from sluice_common.embedders import get_embedder

    filenames, texts, stored = stored_chunks(url, collection)
    key = hashlib.sha256(
        "\x00".join(
            [*filenames, *texts, args.model, str(args.exact_reembed), *(f"{q.id}\x01{q.query}" for q in queries)]
        ).encode()
    ).hexdigest()[:16]
    result_cache = cache_dir / f"exact-result-{slug(args.model)}-{key}.json" if cache_dir else None
    if result_cache is not None and result_cache.is_file():
        cached = json.loads(result_cache.read_text())
        return {**cached, "ranked": {q: [Hit(filename=f) for f in names] for q, names in cached["ranked"].items()}}
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    embedder = get_embedder("sentence_transformers", args.model, args.dimensions)
    loop = asyncio.new_event_loop()
    try:
        if args.exact_reembed:
            digest = hashlib.sha256(("\x00".join(texts) + args.model).encode()).hexdigest()[:16]
            cache = cache_dir / f"exact-{slug(args.model)}-{digest}.npy" if cache_dir else None
            if cache is not None and cache.is_file():
                vectors = np.load(cache)
            else:
                started = time.monotonic()
                vectors = np.asarray(loop.run_until_complete(embedder.embed_documents(texts)), dtype=np.float32)
                print(f"  exact reference: embedded {len(texts)} chunks in {time.monotonic() - started:.0f} s", flush=True)
                if cache is not None:
                    np.save(cache, vectors)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            sample = np.arange(len(texts))
        else:
            sample = np.sort(np.random.default_rng(18).choice(len(texts), min(EXACT_CHECK, len(texts)), replace=False))
            vectors = stored
            check = np.asarray(loop.run_until_complete(embedder.embed_documents([texts[i] for i in sample])), dtype=np.float32)
            check /= np.linalg.norm(check, axis=1, keepdims=True)
            agreement = float(np.mean(np.sum(check * stored[sample], axis=1)))
        if args.exact_reembed:
            agreement = float(np.mean(np.sum(vectors * stored, axis=1)))
        ranked, latencies = {}, {}
        for query in queries:
            started = time.perf_counter()
            q = np.asarray(loop.run_until_complete(embedder.embed_query(query.query)), dtype=np.float32)
            scores = vectors @ (q / np.linalg.norm(q))
            order = np.argsort(-scores, kind="stable")[:TOP_K]
            latencies[query.id] = time.perf_counter() - started
            ranked[query.id] = [Hit(filename=filenames[i]) for i in order]
    finally:
        loop.close()
    result = {
        "ranked": ranked,
        "latencies": latencies,
        "chunks": len(texts),
        "stored_vs_exact_cosine": agreement,
        "checked_chunks": len(sample),
    }
    if result_cache is not None:
        result_cache.write_text(json.dumps({**result, "ranked": {q: [h.filename for h in hits] for q, hits in ranked.items()}}))
    return result


# ------------------------------------------------------------------ one set


def first_ranks(queries: list[Query], ranked: dict) -> dict[str, int | None]:
    out = {}
    for query in queries:
        result = score(ranked.get(query.id, ()), query.relevant)
        out[query.id] = round(1 / result.mrr) if result.mrr else None
    return out


def run_set(admin: str, evalset: EvalSet, args, logs: Path, cache_dir: Path | None) -> dict:
    database = f"eval_{slug(args.model)}"
    ensure_database(admin, database)
    url = database_uri(admin, database)
    upgrade(url)
    reader_url = ensure_search_role(url)
    keys = bootstrap_keys(url)
    collection = f"{evalset.name}-{args.limit or 'all'}"
    documents = evalset.wanted_documents()
    state = collection_state(url, collection) or {}
    ready = {name for name, status in state.items() if status == "READY"}
    if ready >= {p.name for p in documents}:
        print(
            f"[{evalset.name}] collection {collection} already READY in {database} ({len(documents)} documents): reusing it",
            flush=True,
        )
    else:
        print(
            f"[{evalset.name}] ingesting {len(documents) - len(ready)} of {len(documents)} documents into {collection}"
            f" (model {args.model}, {args.workers} worker(s)) …",
            flush=True,
        )
        ingest(url, keys, collection, documents, args, logs)

    search, address = start_search(reader_url, logs)
    try:
        print(f"[{evalset.name}] {len(evalset.queries)} queries × {len(args.modes)} modes through Search …", flush=True)  # noqa: RUF001 - a times sign
        sluice = run_modes(address, keys["client"], collection, evalset.queries, args.modes)
        questions = labelled_questions(evalset, documents)
        asked = run_modes(address, keys["client"], collection, questions, args.modes) if questions else {}
    finally:
        stop_processes([search])
    print(f"[{evalset.name}] references: bm25s over whole documents, exact search over the stored chunks …", flush=True)
    runs = {"bm25s-whole-docs": bm25s_reference(evalset, documents)}
    runs["exact-ST"] = exact_reference(url, collection, evalset.queries, args, cache_dir)
    runs.update(sluice)

    summaries = {name: evaluate(evalset.queries, run["ranked"], run["latencies"]).as_dict() for name, run in runs.items()}
    with psycopg.connect(url, autocommit=True) as conn:
        chunks, failed = conn.execute(
            "SELECT coalesce(sum(d.chunk_count) FILTER (WHERE d.status = 'READY'), 0), count(*) FILTER (WHERE d.status = 'FAILED')"
            " FROM documents d JOIN collections c ON c.id = d.collection_id WHERE c.name = %s",
            (collection,),
        ).fetchone()
    return {
        "set": evalset.name,
        "collection": collection,
        "model": args.model,
        "documents": len(documents),
        "chunks": int(chunks),
        "failed_documents": int(failed),
        "queries": len(evalset.queries),
        "rows": summaries,
        "ratios": ratios(summaries),
        "stored_vs_exact_cosine": runs["exact-ST"]["stored_vs_exact_cosine"],
        "checked_chunks": runs["exact-ST"]["checked_chunks"],
        "first_relevant_rank": {name: first_ranks(evalset.queries, run["ranked"]) for name, run in runs.items()},
        "errors": {name: run["errors"] for name, run in runs.items() if run.get("errors")},
        "questions": {name: evaluate(questions, run["ranked"], run["latencies"]).as_dict() for name, run in asked.items()},
        "question_misses": {
            name: {
                q.id: [h.filename for h in run["ranked"].get(q.id, [])[:3]]
                for q in questions
                if not set(q.relevant) & {h.filename for h in run["ranked"].get(q.id, [])[:3]}
            }
            for name, run in asked.items()
        },
    }


def labelled_questions(evalset: EvalSet, documents: list[Path]) -> list[Query]:
    """The set's hand-written questions whose document this machine's set holds (a machine with
    other packages may lack a few: they are left out, and the table says how many remain)."""
    path = QUESTIONS.get(evalset.name)
    if path is None or not path.is_file():
        return []
    names = {p.name for p in documents}
    return [q for q in load_queries(path) if set(q.relevant) <= names]


def ratios(rows: dict) -> dict[str, float]:
    """MRR@10 ratios, those whose rows were measured (--modes may leave some out)."""
    mrr = {name: row["mrr@10"] for name, row in rows.items()}
    out = {}
    for mode in ("HYBRID", "KEYWORD"):
        if mode in mrr and mrr["bm25s-whole-docs"]:
            out[f"{mode}/bm25s"] = mrr[mode] / mrr["bm25s-whole-docs"]
    if {"VECTOR", "KEYWORD", "HYBRID"} <= set(mrr) and max(mrr["VECTOR"], mrr["KEYWORD"]):
        out["HYBRID/max(VECTOR,KEYWORD)"] = mrr["HYBRID"] / max(mrr["VECTOR"], mrr["KEYWORD"])
    return out


def print_table(result: dict) -> None:
    print()
    print(
        f"set {result['set']}: {result['documents']} documents, {result['chunks']} chunks, {result['queries']} queries,"
        f" model {result['model']}, top_k {TOP_K}"
        + (f", {result['failed_documents']} FAILED documents" if result["failed_documents"] else "")
    )
    header = f"{'':<17}" + "".join(f"{title:>9}" for title, _ in COLUMNS) + f"{'p50 ms':>9}"
    print(header)
    print("-" * len(header))
    for name in (n for n in ROWS if n in result["rows"]):
        row = result["rows"][name]
        p50 = f"{row['p50_ms']:>9.1f}" if row["p50_ms"] is not None else f"{'—':>9}"
        print(f"{name:<17}" + "".join(f"{row[key]:>9.3f}" for _, key in COLUMNS) + p50)
    for name, errors in result["errors"].items():
        print(f"{name}: {len(errors)} queries failed and count as misses: {', '.join(list(errors)[:5])}")
    if result["ratios"]:
        print("MRR@10 ratios: " + ", ".join(f"{name} {value:.2f}×" for name, value in result["ratios"].items()))  # noqa: RUF001 - a times sign
    if result.get("questions"):
        rows = result["questions"]
        count = next(iter(rows.values()))["queries"]
        print(
            f"labelled questions ({QUESTIONS[result['set']].name}, {count} hand-written):  "
            + "   ".join(f"{name} hit@3 {row['hit@3']:.3f} MRR@10 {row['mrr@10']:.3f}" for name, row in rows.items())
        )
        for name, misses in result["question_misses"].items():
            for qid, top in misses.items():
                print(f"  {name} misses {qid} in its top 3: {', '.join(top)}")
    print(
        "(bm25s and exact-ST latencies are in-process, without gRPC; the model's vectors vs those stored:"
        f" mean cosine {result['stored_vs_exact_cosine']:.4f} over {result['checked_chunks']} chunks)"
    )


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench.retrieval_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=[*SETS, "all"], default="all", help="eval set (default all)")
    parser.add_argument("--db-dir", type=Path, help="keep PostgreSQL's data here and reuse an ingested collection")
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="local model of the collection (default all-MiniLM-L6-v2)")
    parser.add_argument("--dimensions", type=int, default=384, help="the model's vector size (default 384)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N queries of each set, and their documents")
    parser.add_argument("--workers", type=int, default=1, help="worker processes for ingestion (default 1, as make run)")
    parser.add_argument("--json", dest="json_out", type=Path, metavar="OUT", help="write the figures to this file")
    parser.add_argument(
        "--modes",
        default="vector,keyword,hybrid",
        metavar="M1,M2",
        help="Sluice's search modes to measure (default vector,keyword,hybrid)",
    )
    parser.add_argument(
        "--exact-reembed",
        action="store_true",
        help="exact reference: embed every stored chunk again instead of checking a sample",
    )
    parser.add_argument("--rebuild-sets", action="store_true", help="rebuild the eval sets from their sources first")
    args = parser.parse_args(argv)
    args.modes = [m.strip().upper() for m in args.modes.split(",") if m.strip()]
    if not args.modes or set(args.modes) - set(MODES):
        parser.error(f"--modes: choose from {', '.join(m.lower() for m in MODES)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    names = list(SETS) if args.set == "all" else [args.set]
    evalsets = [ensure(name, force=args.rebuild_sets).limited(args.limit) for name in names]
    keep = args.db_dir is not None
    base = args.db_dir.resolve() if keep else Path(tempfile.mkdtemp(prefix="sluice-retrieval-"))
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o755)
    logs = base / "logs"
    logs.mkdir(exist_ok=True)
    fresh = not (base / "pg").exists()
    server = EmbeddedPostgres(base / "pg", cleanup="stop" if keep else "delete")
    admin = server.start()
    results = []
    try:
        if fresh:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET fsync = off")
                conn.execute("ALTER SYSTEM SET synchronous_commit = off")
                conn.execute("ALTER SYSTEM SET shared_buffers = '512MB'")
            server.stop()
            admin = server.start()
        for evalset in evalsets:
            result = run_set(admin, evalset, args, logs, base if keep else None)
            results.append(result)
            print_table(result)
    finally:
        server.stop()
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    if args.json_out:
        settings = {k: v for k, v in os.environ.items() if k.startswith("SLUICE_SEARCH_")}
        args.json_out.write_text(
            json.dumps(
                {
                    "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                    "commit": git_commit(),
                    "model": args.model,
                    "limit": args.limit,
                    "search_settings": settings,
                    "sets": {r["set"]: r for r in results},
                },
                indent=1,
                ensure_ascii=False,
            )
            + "\n"
        )
        print(f"\nfigures written to {args.json_out}")


if __name__ == "__main__":
    main()
