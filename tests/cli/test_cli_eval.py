"""`sluice eval` against the real ingest-api and search (the `stack` of conftest.py).

The figures `sluice eval` prints must be those of the hits `sluice search` returns for the
same queries, scored by sluice_common.evaluation; bad query files are named with their line;
errors end with one line and a non-zero exit code.
"""

from __future__ import annotations

import json

import pytest
from sluice_common.evaluation import Hit, load_queries, score, summarize

from .test_cli import create, one_error_line, upload

DOCUMENTS = {
    "weirs.txt": "A weir is a low dam across a river that raises the water level upstream.",
    "locks.txt": "A canal lock raises and lowers boats between stretches of water of different levels.",
    "sluices.txt": "A sluice gate controls the flow of water in a channel; it slides up and down.",
    "kettle.txt": "Descale the kettle every month with a little vinegar and rinse it well.",
}


@pytest.fixture
def evaluated(sluice, stack, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text + "\n")
    create(sluice, stack)
    results = upload(sluice, stack, folder)
    assert {r["status"] for r in results} == {"READY"}, results
    ids = {r["document"]["filename"]: r["document"]["id"] for r in results}
    queries = tmp_path / "queries.jsonl"
    lines = [
        {"id": "weir", "query": "low dam across a river", "relevant": ["weirs.txt"], "lang": "en"},
        {"id": "lock", "query": "boats between stretches", "relevant": ["locks.txt"], "lang": "en"},
        {"id": "gate-by-id", "query": "sluice gate flow channel", "relevant": [ids["sluices.txt"]], "lang": "en"},
        {"id": "kettle", "query": "vinegar", "relevant": ["kettle.txt"]},
        {"id": "two", "query": "water levels", "relevant": ["locks.txt", "weirs.txt"]},
    ]
    queries.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return queries


def expected_figures(sluice, stack, queries_path, mode: str) -> dict:
    """The metrics of the hits `sluice search` returns, as a reader would compute them."""
    results = []
    for query in load_queries(queries_path):
        found = json.loads(sluice("--json", "search", query.query, "-c", "docs", "--mode", mode, *stack.args).out)["hits"]
        hits = [Hit(h["filename"], h["document_id"], h.get("metadata", {})) for h in found]
        results.append(score(hits, query.relevant))
    return summarize(results).metrics


def test_eval_json_matches_the_searches(sluice, stack, evaluated):
    result = sluice("--json", "eval", evaluated, "--collection", "docs", *stack.args)
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["collection"] == "docs" and report["queries"] == 5 and report["top_k"] == 10
    assert list(report["modes"]) == ["vector", "keyword", "hybrid"]
    for mode, row in report["modes"].items():
        assert row["queries"] == 5
        assert row["p50_ms"] > 0
        expected = expected_figures(sluice, stack, evaluated, mode)
        assert {k: row[k] for k in expected} == pytest.approx(expected), mode
        assert all(0.0 <= row[k] <= 1.0 for k in expected)
    # Each query's words are in its document only: any keyword search finds every one.
    assert report["modes"]["keyword"]["hit@10"] == 1.0


def test_eval_table_and_options(sluice, stack, evaluated):
    result = sluice("eval", evaluated, "-c", "docs", "--modes", "keyword,hybrid", "-k", "3", *stack.args)
    assert result.code == 0, result.err
    assert "hit@1" in result.out and "MRR@10" in result.out and "nDCG@10" in result.out and "p50 ms" in result.out
    assert "KEYWORD" in result.out and "HYBRID" in result.out and "VECTOR" not in result.out
    assert "5 queries" in result.out and "top_k 3" in result.out

    gate = sluice("eval", evaluated, "-c", "docs", "--modes", "keyword", "--fail-under", "1.01", *stack.args)
    assert gate.code == 1 and "MRR@10 below 1.01 in keyword" in gate.err
    assert sluice("eval", evaluated, "-c", "docs", "--modes", "keyword", "--fail-under", "0", *stack.args).code == 0


def test_eval_errors(sluice, stack, evaluated, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "query": "water", "relevant": ["weirs.txt"]}\n\n{"id": "b", "query": "dam"}\n')
    result = sluice("eval", bad, "-c", "docs", *stack.args)
    assert result.code == 2 and one_error_line(result)
    assert f"{bad}:3:" in result.err and '"relevant" must be a non-empty list' in result.err

    as_json = sluice("--json", "eval", bad, "-c", "docs", *stack.args)
    error = json.loads(as_json.err)["error"]
    assert as_json.code == 2 and error["reason"] == "QUERY_SET_INVALID" and ":3:" in error["message"]

    missing = sluice("eval", tmp_path / "none.jsonl", "-c", "docs", *stack.args)
    assert missing.code == 2 and "no such file" in missing.err and one_error_line(missing)

    modes = sluice("eval", evaluated, "-c", "docs", "--modes", "vector,fuzzy", *stack.args)
    assert modes.code == 2 and "unknown mode fuzzy" in modes.err

    collection = sluice("eval", evaluated, "-c", "nope", *stack.args)
    assert collection.code == 3 and "does not exist" in collection.err and one_error_line(collection)
    assert "query 'weir' (vector)" in collection.err
