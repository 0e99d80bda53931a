"""`sluice collections reindex`: start, follow to the switch, cancel; `collections get` shows generations."""

from __future__ import annotations

import json

from .test_cli import create, one_error_line


def test_reindex_follows_to_the_switch_and_get_shows_generations(sluice, stack, docs_folder):
    create(sluice, stack, "docs")
    assert sluice("upload", docs_folder, "--collection", "docs", *stack.args).code == 0
    result = sluice("collections", "reindex", "docs", "--embedder", "hashing", "--model", "hashing-v2", "--dimensions", "32",
                    *stack.args)
    assert result.code == 0, result.err
    assert "Reindexing docs into generation 2 (hashing embedder hashing-v2, 32 dimensions)" in result.out
    assert "Switched: docs now answers from generation 2 (hashing-v2)" in result.out
    shown = sluice("collections", "get", "docs", *stack.args)
    assert "GENERATION" in shown.out and "retired" in shown.out and "active" in shown.out
    collection = json.loads(sluice("--json", "collections", "get", "docs", *stack.args).out)
    assert [(g["number"], g["state"]) for g in collection["generations"]] == [
        (1, "GENERATION_STATE_RETIRED"), (2, "GENERATION_STATE_ACTIVE")]
    assert collection["embedder"]["model"] == "hashing-v2"
    search = json.loads(sluice("--json", "search", "rivers", "-c", "docs", *stack.args).out)
    assert search["hits"]
    unchanged = sluice("collections", "reindex", "docs", "--embedder", "hashing", "--model", "hashing-v2", "--dimensions", "32",
                       *stack.args)
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
