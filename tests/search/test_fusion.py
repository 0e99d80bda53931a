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
