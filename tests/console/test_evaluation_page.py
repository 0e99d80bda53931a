"""The console's evaluation page (console/src/pages/evaluation.tsx) in Chromium on the whole stack:
a query set's bad lines reported one by one; a good set run in the three modes, its MRR@10,
hit@1 and recall@10 per mode equal to what sluice_common.evaluation computes from the Search API's
own answers; a run cancelled midway; the history of generations with a reindex gate's verdict,
its scores equal to GetCollection's; axe-core on the page."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from sluice_common.evaluation import Hit, Query, score, summarize

from .conftest import ConsoleStack, screenshot, sign_in
from .test_search_page import (  # noqa: F401  (examples_collection is a fixture)
    ASTRAL_SOURCE,
    EXAMPLES,
    assert_accessible,
    assert_quiet,
    examples_collection,
    fill_collection,
    search_api,
)

# The whole stack (sluice-dev) and a browser: left out by -m 'not slow'.
pytestmark = pytest.mark.slow

MODES = ("VECTOR", "KEYWORD", "HYBRID")
EXAMPLES_NAME = "examples"  # the examples_collection fixture's
GATE_TIMEOUT = 240.0

READ_SUMMARY = """() => Object.fromEntries([...document.querySelectorAll(".eval-results > table tbody tr")].map((tr) => [
    tr.querySelector("[data-mode]").dataset.mode,
    Object.fromEntries([...tr.querySelectorAll(".fig[data-name]")].map((f) => [f.dataset.name, f.dataset.value])),
]))"""


def document_ids(stack: ConsoleStack, collection: str) -> dict[str, str]:
    answer = stack.call("DocumentService/ListDocuments", {"collection": collection, "pageSize": 100})
    assert answer.status_code == 200, answer.text
    return {d["filename"]: d["id"] for d in answer.json()["documents"]}


def query_set(stack: ConsoleStack, collection: str) -> list[dict[str, Any]]:
    ids = document_ids(stack, collection)
    return [
        {"id": "crash", "query": "what happens when a worker crashes", "relevant": ["what-is-sluice.md"]},
        {"id": "scale", "query": "run more worker processes", "relevant": [ids["scaling-workers.md"]]},  # a document id
        {"id": "embed", "query": "which embedding model should a collection use", "relevant": ["embedders.html"]},
        {"id": "modes", "query": "keyword or vector search", "relevant": ["search-modes.txt", "what-is-sluice.md"], "lang": "en"},
        {"id": "prod", "query": "checklist before production", "relevant": ["operations-checklist.docx"]},
        {"id": "none", "query": "how to bake bread", "relevant": ["no-such-file.md"]},
        {"id": "astral", "query": "the gateway lease expires", "relevant": [ASTRAL_SOURCE]},  # metadata "source"
    ]


def expected_figures(stack: ConsoleStack, collection: str, queries: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each mode's figures as `sluice eval` computes them, from the Search API's answers (top_k 10)."""
    figures = {}
    for mode in MODES:
        results, recalls = [], []
        for q in queries:
            answer = search_api(stack, collection=collection, query=q["query"], topK=10, mode=f"SEARCH_MODE_{mode}")
            hits = [Hit(h.get("filename", ""), h.get("documentId", ""), h.get("metadata", {})) for h in answer.get("hits", [])]
            query = Query(q["id"], q["query"], tuple(q["relevant"]))
            results.append(score(hits, query.relevant))
            found = {label for h in hits[:10] for label in (h.filename, h.document_id, h.metadata.get("source", ""))}
            recalls.append(len(set(query.relevant) & found) / len(set(query.relevant)))
        summary = summarize(results)
        figures[mode] = {**summary.metrics, "recall@10": sum(recalls) / len(recalls)}
    return figures


@pytest.mark.usefixtures("examples_collection")
def test_a_bad_file_is_reported_line_by_line(console_stack: ConsoleStack, page: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        "\n".join(
            [
                '{"id": "a", "query": "workers", "relevant": ["scaling-workers.md"]}',
                "not json",
                '{"id": "a", "query": "again", "relevant": ["x.md"]}',
                '{"id": "b", "query": "", "relevant": ["x.md"]}',
                "",
                '{"id": "c", "query": "q", "relevant": []}',
                "[1, 2]",
            ]
        )
    )
    sign_in(page, console_stack)
    page.goto(f"{console_stack.url}/#/evaluation/{EXAMPLES_NAME}")
    page.set_input_files("#eval-file", str(bad))
    page.wait_for_selector(".line-errors li")
    errors = page.locator(".line-errors li").all_inner_texts()
    assert errors[0].startswith("bad.jsonl:2: not valid JSON")
    assert errors[1:] == [
        "bad.jsonl:3: query id 'a' repeats line 1",
        "bad.jsonl:4: query 'b': \"query\" must be a non-empty string",
        "bad.jsonl:6: query 'c': \"relevant\" must be a non-empty list of strings",
        "bad.jsonl:7: expected a JSON object, got list",
    ]
    assert "5 bad lines" in page.inner_text(".file-status")
    assert page.is_disabled("button:text-is('Run')")
    assert_accessible(page, "evaluation page with a bad file")
    assert_quiet(page)


@pytest.mark.usefixtures("examples_collection")
def test_a_run_shows_each_modes_figures_equal_to_the_api(console_stack: ConsoleStack, page: Any, tmp_path: Path) -> None:
    queries = query_set(console_stack, EXAMPLES_NAME)
    path = tmp_path / "examples.jsonl"
    path.write_text("\n".join(json.dumps(q) for q in queries) + "\n\n")
    sign_in(page, console_stack)
    page.goto(f"{console_stack.url}/#/evaluation/{EXAMPLES_NAME}")
    page.set_input_files("#eval-file", str(path))
    page.wait_for_selector("text=examples.jsonl: 7 queries.")
    page.select_option("#eval-concurrency", "2")
    page.click("button:text-is('Run')")
    page.wait_for_selector(".eval-results > table", timeout=180_000)
    shown = page.evaluate(READ_SUMMARY)
    expected = expected_figures(console_stack, EXAMPLES_NAME, queries)
    assert set(shown) == set(MODES)
    for mode in MODES:
        for name in ("mrr@10", "hit@1", "hit@3", "hit@10", "ndcg@10", "recall@10"):
            assert float(shown[mode][name]) == expected[mode][name], (mode, name, shown[mode][name], expected[mode][name])
    # The query nobody answers is a miss in every mode; the chart is drawn.
    assert 0 < expected["HYBRID"]["mrr@10"] < 1
    assert page.locator(".eval-results svg[role=img] rect").count() == 9
    assert page.inner_text("#eval-progress + .count") == f"{3 * len(queries)} / {3 * len(queries)}"
    page.click("details.more summary >> nth=2")
    hybrid = page.locator(".eval-results details.more").nth(2)
    assert hybrid.locator("tr", has=page.locator("td:text-is('none')")).locator("td").nth(3).inner_text() == "none"
    # Found through its metadata "source" alone.
    assert hybrid.locator("tr", has=page.locator("td:text-is('astral')")).locator("td").nth(3).inner_text() != "none"
    screenshot(page, "evaluation-run")
    assert_accessible(page, "evaluation page with results")
    assert_quiet(page)


@pytest.mark.usefixtures("examples_collection")
def test_a_run_can_be_cancelled(console_stack: ConsoleStack, page: Any, tmp_path: Path) -> None:
    texts = ["workers", "embedder", "search modes", "postgres backup", "lease", "chunks"]
    path = tmp_path / "many.jsonl"
    path.write_text(
        "\n".join(json.dumps({"id": f"q{i}", "query": texts[i % len(texts)], "relevant": ["x.md"]}) for i in range(150))
    )
    sign_in(page, console_stack)
    page.goto(f"{console_stack.url}/#/evaluation/{EXAMPLES_NAME}")
    page.set_input_files("#eval-file", str(path))
    page.wait_for_selector("text=many.jsonl: 150 queries.")
    page.select_option("#eval-concurrency", "1")
    page.click("button:text-is('Run')")
    page.wait_for_function("() => document.querySelector('#eval-progress')?.value >= 1")
    page.click("button:text-is('Cancel')")
    page.wait_for_selector(".progress .bad:text-is('cancelled')")
    done = int(page.inner_text("#eval-progress + .count").split(" / ")[0])
    assert done < 450
    assert page.locator(".eval-results").count() == 0
    assert page.is_enabled("button:text-is('Run')")
    assert_quiet(page)


def test_the_history_shows_the_reindex_gates_verdict(console_stack: ConsoleStack, page: Any) -> None:
    files = {name: (EXAMPLES / name).read_bytes() for name in ("scaling-workers.md", "what-is-sluice.md", "search-modes.txt")}
    fill_collection(console_stack, "gated", files)
    eval_queries = [
        {"id": "scale", "query": "run more worker processes", "relevant": ["scaling-workers.md"]},
        {"id": "modes", "query": "which search modes exist", "relevant": ["search-modes.txt"]},
    ]
    # A min ratio of 2: the new generation cannot reach twice the ACTIVE one's MRR, so the gate fails it.
    answer = console_stack.call(
        "DocumentService/ReindexCollection",
        {"name": "gated", "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}, "evalQueries": eval_queries, "minRatio": 2.0},
    )
    assert answer.status_code == 200, answer.text
    deadline = time.monotonic() + GATE_TIMEOUT
    while True:
        collection = console_stack.call("DocumentService/GetCollection", {"name": "gated"}).json()
        gated = [
            g
            for g in collection["generations"]
            if g.get("evaluation", {}).get("state") in ("EVALUATION_STATE_PASSED", "EVALUATION_STATE_FAILED")
        ]
        if gated:
            break
        assert time.monotonic() < deadline, collection["generations"]
        time.sleep(1)
    generation = gated[0]
    verdict = generation["evaluation"]
    assert verdict["state"] == "EVALUATION_STATE_FAILED", generation
    sign_in(page, console_stack)
    page.goto(f"{console_stack.url}/#/evaluation/gated")
    row = page.locator("section[aria-labelledby=eval-history] table tbody tr").nth(1)
    row.wait_for()
    cells = row.locator("td").all_inner_texts()
    assert cells[0] == str(generation["number"]) == "2"
    assert cells[1] == "CANCELLED"
    assert cells[7] == "FAILED"
    assert cells[8] == verdict["metric"] == "mrr@10"
    assert cells[9] == f"generation {verdict['activeGeneration']}"
    figures = row.locator(".fig").evaluate_all("(figs) => figs.map((f) => f.dataset.value)")
    assert [float(v) for v in figures] == [verdict.get("activeScore", 0.0), verdict.get("candidateScore", 0.0)]
    assert cells[13] == f"{verdict['minRatio']:.2f}"
    assert cells[14] == str(verdict["queries"]) == "2"
    assert page.locator("section[aria-labelledby=eval-history] svg[role=img] rect").count() == 2
    screenshot(page, "evaluation-history")
    assert_accessible(page, "evaluation page with the gate's history")
    assert_quiet(page)
