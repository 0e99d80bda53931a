"""HYBRID's fusion functions (fusion.py), on hand-made lists."""

from __future__ import annotations

import pytest
from sluice_search import fusion
from sluice_search.domain import Hit


def hits(*pairs: tuple[int, float]) -> list[Hit]:
    return [
        Hit(
            chunk_id=cid,
            text=f"chunk {cid}",
            score=score,
            document_id="d",
            filename="f",
            chunk_index=0,
            page_number=0,
            element_type="",
            metadata={},
        )
        for cid, score in pairs
    ]


def test_reciprocal_rank_sums_weighted_reciprocal_ranks():
    vector = hits((1, 0.9), (2, 0.8), (3, 0.7))
    keyword = hits((3, 12.0), (4, 9.0))
    fused = fusion.reciprocal_rank([vector, keyword], [1.0, 1.0], 60, 10)
    scores = {h.chunk_id: h.score for h in fused}
    assert scores[3] == pytest.approx(1 / 63 + 1 / 61)
    assert scores[1] == pytest.approx(1 / 61)
    assert [h.chunk_id for h in fused] == [3, 1, 2, 4]  # 2 and 4 tie (rank 2 each): the first list seen wins
    weighted = fusion.reciprocal_rank([vector, keyword], [0.0, 2.0], 60, 2)
    assert [h.chunk_id for h in weighted] == [3, 4]


def test_relative_score_normalises_each_list_and_keeps_a_clear_winner():
    vector = hits((1, 0.90), (2, 0.89), (3, 0.50))
    keyword = hits((2, 30.0), (4, 3.0), (1, 2.0))
    fused = fusion.relative_score([vector, keyword], [0.5, 0.5], 10)
    scores = {h.chunk_id: h.score for h in fused}
    assert scores[2] == pytest.approx(0.5 * (0.39 / 0.40) + 0.5 * 1.0)
    assert scores[1] == pytest.approx(0.5 * 1.0 + 0.0)
    assert scores[4] == pytest.approx(0.5 * (1.0 / 28.0))
    assert fused[0].chunk_id == 2
    # One hit in a list: it is that list's best.
    assert fusion.relative_score([hits((7, 0.2)), []], [0.5, 0.5], 10)[0].score == pytest.approx(0.5)


def test_fusion_keeps_the_keyword_highlights_and_copies_hits():
    vector = hits((1, 0.9))
    keyword = hits((1, 5.0))
    keyword[0].highlights = [(0, 5)]
    fused = fusion.relative_score([vector, keyword], [0.5, 0.5], 10)
    assert fused[0].highlights == [(0, 5)]
    assert vector[0].score == 0.9  # inputs untouched


def test_english_only_models_and_foreign_scripts():
    from sluice_search.domain import Collection

    minilm = Collection(1, "c", "sentence_transformers", "all-MiniLM-L6-v2:onnx-int8", 384)
    e5 = Collection(1, "c", "sentence_transformers", "multilingual-e5-small", 384)
    assert fusion.english_only(minilm) and not fusion.english_only(e5)
    assert fusion.mostly_non_latin("全文检索怎么用")
    assert fusion.mostly_non_latin("如何配置 HNSW 索引的参数")  # Han letters outnumber the Latin ones
    assert not fusion.mostly_non_latin("configure the HNSW index, café")
    assert not fusion.mostly_non_latin("1234 ???")


def _old_relative_score(lists, weights):
    """relative_score's sums as they were computed before the parts (one running sum per chunk)."""
    scores: dict[int, float] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        if not ranked:
            continue
        best, worst = max(h.score for h in ranked), min(h.score for h in ranked)
        for hit in ranked:
            normalised = (hit.score - worst) / (best - worst) if best > worst else 1.0
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + weight * normalised
    return scores


@pytest.mark.parametrize("seed", range(20))
def test_the_parts_add_up_to_the_fused_score_bit_for_bit(seed):
    """An explanation's parts (explain.py) are fusion's own: their sum is the score hits are
    ordered by, and the same score as before the parts existed, to the last bit."""
    import random

    rng = random.Random(seed)
    ids = rng.sample(range(1000), 80)
    vector = hits(*sorted(((cid, rng.uniform(-0.2, 0.9)) for cid in ids[:50]), key=lambda p: -p[1]))
    keyword = hits(*sorted(((cid, rng.uniform(0.0, 30.0)) for cid in ids[30:]), key=lambda p: -p[1]))
    share = rng.choice([0.5, 0.1, 0.37])
    weights = (share, 1.0 - share)
    parts = fusion.relative_score_parts([vector, keyword], weights)
    fused = fusion.relative_score([vector, keyword], weights, 100)
    old = _old_relative_score([vector, keyword], weights)
    for hit in fused:
        vector_part, keyword_part = parts[hit.chunk_id]
        assert (vector_part or 0.0) + (keyword_part or 0.0) == hit.score == old[hit.chunk_id]
        assert (vector_part is None) == (hit.chunk_id not in ids[:50])
        assert (keyword_part is None) == (hit.chunk_id not in ids[30:])
    rrf = fusion.reciprocal_rank_parts([vector, keyword], [2 * w for w in weights], 60)
    for hit in fusion.reciprocal_rank([vector, keyword], [2 * w for w in weights], 60, 100):
        assert fusion.total(rrf[hit.chunk_id]) == hit.score
