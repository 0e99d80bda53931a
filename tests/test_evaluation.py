"""sluice_common.evaluation: the metrics on hand-computed cases, and query-set loading errors."""

from __future__ import annotations

import json

import pytest
from sluice_common.evaluation import Hit, Query, QuerySetError, evaluate, load_queries, score, summarize


def hits(*names: str) -> list[Hit]:
    return [Hit(filename=name) for name in names]


def test_first_relevant_at_rank_three():
    result = score(hits("a", "b", "rel", "c"), ["rel"])
    assert result.hit_at == {1: 0.0, 3: 1.0, 10: 1.0}
    assert result.mrr == pytest.approx(1 / 3)
    # DCG = 1/log2(3+1) = 0.5; ideal = 1/log2(2) = 1.
    assert result.ndcg == pytest.approx(0.5)


def test_relevant_first_is_perfect():
    result = score(hits("rel", "a"), ["rel"])
    assert result.as_dict() == {"hit@1": 1.0, "hit@3": 1.0, "hit@10": 1.0, "mrr@10": 1.0, "ndcg@10": 1.0}


def test_a_document_counts_once_at_its_first_chunk():
    # rel at ranks 2 and 3 (two chunks of one document), rel2 at rank 5.
    # DCG = 1/log2(3) + 1/log2(6) = 0.63093 + 0.38685 = 1.01778; ideal (2 relevant) = 1 + 0.63093.
    result = score(hits("x", "rel", "rel", "y", "rel2"), ["rel", "rel2"])
    assert result.mrr == pytest.approx(0.5)
    assert result.hit_at == {1: 0.0, 3: 1.0, 10: 1.0}
    assert result.ndcg == pytest.approx(0.6240505200)


def test_repeated_chunks_of_one_relevant_document_gain_nothing_more():
    # Without the once-only rule this would be 1 + 0.63093 over an ideal of 1 (nDCG > 1).
    result = score(hits("rel", "rel", "rel"), ["rel"])
    assert result.ndcg == pytest.approx(1.0)


def test_a_relevant_hit_past_ten_does_not_count():
    result = score(hits(*[f"d{i}" for i in range(10)], "rel"), ["rel"])
    assert result.as_dict() == {"hit@1": 0.0, "hit@3": 0.0, "hit@10": 0.0, "mrr@10": 0.0, "ndcg@10": 0.0}


def test_the_ideal_has_at_most_ten_relevant_documents():
    relevant = [f"r{i}" for i in range(12)]
    # One relevant at rank 1 of 12 relevant: DCG 1; ideal = sum of 1/log2(r+1) for r = 1..10 = 4.54364.
    result = score(hits("r0", "x"), relevant)
    assert result.ndcg == pytest.approx(0.2200917663)


def test_no_hits_score_zero():
    assert score([], ["rel"]).as_dict() == {"hit@1": 0.0, "hit@3": 0.0, "hit@10": 0.0, "mrr@10": 0.0, "ndcg@10": 0.0}


def test_relevance_by_document_id_and_metadata_source():
    by_id = Hit(filename="other.txt", document_id="0b5c")
    by_source = Hit(filename="upload-17.txt", document_id="9f00", metadata={"source": "manuals/ls.1"})
    assert score([Hit(filename="x"), by_id], ["0b5c"]).mrr == pytest.approx(0.5)
    assert score([by_source], ["manuals/ls.1"]).mrr == 1.0
    # Other metadata values do not make a hit relevant.
    assert score([Hit(filename="x", metadata={"title": "rel"})], ["rel"]).mrr == 0.0


def test_search_hits_are_scored_as_they_come():
    from sluice.v1 import search_service_pb2 as pb

    response = pb.SearchResponse(
        hits=[
            pb.SearchHit(filename="a.txt", document_id="1"),
            pb.SearchHit(filename="b.txt", document_id="2", metadata={"source": "want"}),
        ]
    )
    assert score(response.hits, ["want"]).mrr == pytest.approx(0.5)


def test_summary_means_and_p50():
    queries = [Query("q1", "one", ("a",)), Query("q2", "two", ("b",)), Query("q3", "three", ("c",))]
    ranked = {"q1": hits("a"), "q2": hits("x", "b"), "q3": hits("x", "y", "z", "c")}
    summary = evaluate(queries, ranked, {"q1": 0.010, "q2": 0.030, "q3": 0.020})
    assert summary.queries == 3
    assert summary.metrics["hit@1"] == pytest.approx(1 / 3)
    assert summary.metrics["hit@3"] == pytest.approx(2 / 3)
    assert summary.metrics["hit@10"] == pytest.approx(1.0)
    assert summary.metrics["mrr@10"] == pytest.approx((1 + 1 / 2 + 1 / 4) / 3)
    # nDCG: 1, 1/log2(3) = 0.63093, 1/log2(5) = 0.43068.
    assert summary.metrics["ndcg@10"] == pytest.approx((1 + 0.6309297536 + 0.4306765581) / 3)
    assert summary.p50_ms == pytest.approx(20.0)


def test_summary_without_timings_has_no_p50():
    assert summarize([score(hits("a"), ["a"])]).p50_ms is None
    assert evaluate([Query("q", "x", ("a",))], {}).metrics["hit@10"] == 0.0  # a query with no hits counts as a miss


# ------------------------------------------------------------------ query sets


def write(tmp_path, *lines: str):
    path = tmp_path / "queries.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_queries(tmp_path):
    path = write(
        tmp_path,
        json.dumps({"id": "ls.1", "query": "list directory contents", "relevant": ["ls.1.txt"], "lang": "en"}),
        "",
        json.dumps(
            {"id": "zh-1", "query": "化学结构编辑器", "relevant": ["bkchem.txt", "bkchem.txt"], "lang": "zh", "source": "debian"},
            ensure_ascii=False,
        ),
    )
    queries = load_queries(path)
    assert [q.id for q in queries] == ["ls.1", "zh-1"]
    assert queries[1].query == "化学结构编辑器" and queries[1].relevant == ("bkchem.txt",) and queries[1].lang == "zh"
    assert queries[1].extra == {"source": "debian"}


@pytest.mark.parametrize(
    ("lines", "line", "message"),
    [
        (['{"id": "a", "query": "x", "relevant": ["d"]}', '{"id": "b", "query": "y", "relevant": ["d"]'], 2, "not valid JSON"),
        (['{"id": "a", "query": "x", "relevant": []}'], 1, '"relevant" must be a non-empty list'),
        (['{"id": "a", "query": "x", "relevant": "d.txt"}'], 1, '"relevant" must be a non-empty list'),
        (['{"id": "a", "query": "  ", "relevant": ["d"]}'], 1, '"query" must be a non-empty string'),
        (['{"query": "x", "relevant": ["d"]}'], 1, '"id" must be a non-empty string'),
        (['["a", "b"]'], 1, "expected a JSON object"),
        (
            ['{"id": "a", "query": "x", "relevant": ["d"]}', "", '{"id": "a", "query": "y", "relevant": ["e"]}'],
            3,
            "query id 'a' repeats line 1",
        ),
    ],
)
def test_bad_lines_name_their_line(tmp_path, lines, line, message):
    path = write(tmp_path, *lines)
    with pytest.raises(QuerySetError) as raised:
        load_queries(path)
    assert raised.value.line == line
    assert message in raised.value.message
    assert str(raised.value).startswith(f"{path}:{line}: ")


def test_bad_files(tmp_path):
    with pytest.raises(QuerySetError, match="no such file"):
        load_queries(tmp_path / "missing.jsonl")
    with pytest.raises(QuerySetError, match="no queries"):
        load_queries(write(tmp_path, "", "  "))
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b'{"id": "\xff"}\n')
    with pytest.raises(QuerySetError, match="not UTF-8"):
        load_queries(binary)
