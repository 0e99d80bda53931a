"""`sluice collections reindex`: start, follow to the switch, cancel; `collections get` shows generations."""

from __future__ import annotations

import json

from .test_cli import create, one_error_line


def test_reindex_follows_to_the_switch_and_get_shows_generations(sluice, stack, docs_folder):
    create(sluice, stack, "docs")
    assert sluice("upload", docs_folder, "--collection", "docs", *stack.args).code == 0
    result = sluice(
        "collections", "reindex", "docs", "--embedder", "hashing", "--model", "hashing-v2", "--dimensions", "32", *stack.args
    )
    assert result.code == 0, result.err
    assert "Reindexing docs into generation 2 (hashing embedder hashing-v2, 32 dimensions)" in result.out
    assert "Switched: docs now answers from generation 2 (hashing-v2)" in result.out
    shown = sluice("collections", "get", "docs", *stack.args)
    assert "GENERATION" in shown.out and "retired" in shown.out and "active" in shown.out
    collection = json.loads(sluice("--json", "collections", "get", "docs", *stack.args).out)
    assert [(g["number"], g["state"]) for g in collection["generations"]] == [
        (1, "GENERATION_STATE_RETIRED"),
        (2, "GENERATION_STATE_ACTIVE"),
    ]
    assert collection["embedder"]["model"] == "hashing-v2"
    search = json.loads(sluice("--json", "search", "rivers", "-c", "docs", *stack.args).out)
    assert search["hits"]
    unchanged = sluice(
        "collections", "reindex", "docs", "--embedder", "hashing", "--model", "hashing-v2", "--dimensions", "32", *stack.args
    )
    assert unchanged.code == 1 and one_error_line(unchanged) and "nothing to reindex" in unchanged.err


def test_reindex_no_wait_then_cancel(sluice, stack, docs_folder):
    create(sluice, stack, "docs")
    assert sluice("upload", docs_folder, "--collection", "docs", *stack.args).code == 0
    stack.worker.pause()
    started = sluice("collections", "reindex", "docs", "--embedder", "hashing", "--dimensions", "48", "--no-wait", *stack.args)
    assert started.code == 0 and "generation 2" in started.out
    cancelled = sluice("collections", "reindex", "docs", "--cancel", *stack.args)
    assert cancelled.code == 0 and "Cancelled the reindex of docs" in cancelled.out
    stack.worker.resume()
    again = sluice("collections", "reindex", "docs", "--cancel", *stack.args)
    assert again.code == 1 and one_error_line(again) and "no reindex in progress" in again.err


def test_reindex_with_an_eval_set_switches_or_is_refused(sluice, stack, docs_folder, tmp_path):
    """--eval-set hands the queries to ReindexCollection; search measures both generations and
    the switch happens only if the new one reaches --min-ratio times the current score."""
    create(sluice, stack, "docs")
    assert sluice("upload", docs_folder, "--collection", "docs", *stack.args).code == 0
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        json.dumps({"id": "q1", "query": "workers claim leased jobs", "relevant": ["beta.txt"]})
        + "\n"
        + json.dumps({"id": "q2", "query": "fuses keyword and vector ranks", "relevant": ["gamma.html"]})
        + "\n"
    )
    passed = sluice(
        "collections",
        "reindex",
        "docs",
        "--embedder",
        "hashing",
        "--model",
        "hashing-v2",
        "--dimensions",
        "32",
        "--eval-set",
        str(queries),
        *stack.args,
    )
    assert passed.code == 0, passed.err
    assert "Switched: docs now answers from generation 2" in passed.out
    collection = json.loads(sluice("--json", "collections", "get", "docs", *stack.args).out)
    verdict = collection["generations"][-1]["evaluation"]
    assert verdict["state"] == "EVALUATION_STATE_PASSED" and verdict["queries"] == 2
    # No generation can score twice a perfect one: refused, and search stays on generation 2.
    refused = sluice(
        "collections",
        "reindex",
        "docs",
        "--embedder",
        "hashing",
        "--dimensions",
        "16",
        "--eval-set",
        str(queries),
        "--min-ratio",
        "2",
        *stack.args,
    )
    assert refused.code == 1 and one_error_line(refused), refused.err
    assert "not switched; search keeps answering from generation 2" in refused.err
    collection = json.loads(sluice("--json", "collections", "get", "docs", *stack.args).out)
    assert collection["generations"][-1]["state"] == "GENERATION_STATE_CANCELLED"
    assert collection["embedder"]["model"] == "hashing-v2"


def test_reindex_eval_set_errors_are_usage_errors(sluice, stack, docs_folder, tmp_path):
    create(sluice, stack, "docs")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "q1", "query": "x"}\n')
    result = sluice(
        "collections", "reindex", "docs", "--embedder", "hashing", "--dimensions", "16", "--eval-set", str(bad), *stack.args
    )
    assert result.code == 2 and one_error_line(result) and "relevant" in result.err
    result = sluice(
        "collections", "reindex", "docs", "--embedder", "hashing", "--dimensions", "16", "--min-ratio", "0.9", *stack.args
    )
    assert result.code == 2 and "--min-ratio needs --eval-set" in result.err
