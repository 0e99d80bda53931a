"""The console's search playground (console/src/pages/search.tsx) in Chromium on the whole stack
(tests/console/conftest.py: sluice-dev with a real worker): hits for real documents, every
explain figure the page shows equal to what the Search API answers, the matched spans marked at
the right characters after astral-plane text (code points, not UTF-16 units), two settings side
by side, and axe-core finding no serious or critical violation.

Also the shared helpers of the issue-34 page tests: a collection made and filled through the
public HTTP API, axe-core run on a page."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from decimal import ROUND_HALF_DOWN, ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import psutil
import pytest

from .conftest import ARTIFACTS, ConsoleStack, screenshot, sign_in

# The whole stack (sluice-dev) and a browser: left out by -m 'not slow'.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "docs"
AXE = ROOT / "console" / "node_modules" / "axe-core" / "axe.min.js"
READY_TIMEOUT = 300.0
# Code points outside the BMP (emoji, CJK Extension B: two UTF-16 units each) before the words a KEYWORD search matches:
# an index counted in UTF-16 would mark the wrong characters.
ASTRAL_TEXT = (
    "🦆🐍𠜎𠜱𠝹 astral prefix 🦆🦆. When a gateway falters, its lease expires and another"
    " gateway takes the lease over. 𠀀𠀁 lease 🦆 expires.\n"
)
QUERY = "what happens when a worker crashes"
ASTRAL_SOURCE = "wiki/astral-page"


# --- helpers shared by the page tests (test_evaluation_page.py, test_admin_pages.py) -------------


def create_collection(stack: ConsoleStack, name: str, embedder: dict[str, Any] | None = None) -> None:
    body: dict[str, Any] = {"collection": {"name": name}}
    if embedder:
        body["collection"]["embedder"] = embedder
    answer = stack.call("DocumentService/CreateCollection", body)
    assert answer.status_code == 200, answer.text


def upload(stack: ConsoleStack, collection: str, filename: str, content: bytes, metadata: dict[str, str] | None = None) -> str:
    """One document through the gateway's upload route (docs/http.md), with string metadata; its id."""
    params: dict[str, str] = {"filename": filename, **{f"metadata.{k}": v for k, v in (metadata or {}).items()}}
    with stack.api() as client:
        answer = client.post(f"/v1/collections/{collection}/documents", params=params, content=content)
    assert answer.status_code == 200, answer.text
    document_id: str = answer.json()["id"]
    return document_id


def wait_ready(stack: ConsoleStack, ids: list[str]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    waiting = set(ids)
    while waiting:
        for document_id in sorted(waiting):
            answer = stack.call("DocumentService/GetDocument", {"id": document_id})
            assert answer.status_code == 200, answer.text
            status = answer.json().get("status")
            assert status != "DOCUMENT_STATUS_FAILED", {
                k: v for k, v in answer.json().items() if "error" in k.lower() or k in ("filename", "attempts")
            }
            if status == "DOCUMENT_STATUS_READY":
                waiting.discard(document_id)
        if waiting:
            assert time.monotonic() < deadline, f"not READY: {waiting}"
            time.sleep(0.5)


def fill_collection(
    stack: ConsoleStack, name: str, files: dict[str, bytes], embedder: dict[str, Any] | None = None
) -> dict[str, str]:
    """Creates `name` and uploads `files` (file name → bytes), all READY; file name → document id."""
    create_collection(stack, name, embedder)
    ids = {filename: upload(stack, name, filename, content) for filename, content in files.items()}
    wait_ready(stack, list(ids.values()))
    return ids


def search_api(stack: ConsoleStack, role: str = "client", **request: Any) -> dict[str, Any]:
    answer = stack.call("SearchService/Search", request, role)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def assert_accessible(page: Any, what: str) -> list[dict[str, Any]]:
    """axe-core (console/node_modules, the version console/package.json pins) on the page as it is
    now: no serious or critical violation. Evaluated through the DevTools protocol, which the
    page's CSP (script-src 'self') does not govern, so the console's CSP stays as served."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text(encoding="utf-8") + "\n;void 0")
    violations: list[dict[str, Any]] = page.evaluate(
        """async () => {
            const result = await window.axe.run(document, { resultTypes: ["violations"] });
            return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")) }));
        }"""
    )
    bad = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert not bad, f"{what}: {bad}"
    return violations


def assert_quiet(page: Any) -> None:
    watched = page.watched
    assert not watched.page_errors, watched.page_errors
    assert not watched.console_errors, watched.console_errors


def js_fixed(value: float, digits: int) -> str:
    """Number.prototype.toFixed: the exact value rounded, a tie to the larger number."""
    rounding = ROUND_HALF_UP if value >= 0 else ROUND_HALF_DOWN
    return str(Decimal(value).quantize(Decimal(1).scaleb(-digits), rounding=rounding))


@pytest.fixture(scope="session")
def examples_collection(console_stack: ConsoleStack) -> str:
    """`examples`: the six files of examples/docs and one Markdown page with astral-plane text,
    on the local embedder (all-MiniLM-L6-v2), every one READY."""
    # Imported by the other page tests, the fixture is defined once per module: made once.
    if console_stack.call("DocumentService/GetCollection", {"name": "examples"}).status_code == 200:
        return "examples"
    files = {path.name: path.read_bytes() for path in sorted(EXAMPLES.iterdir()) if path.is_file()}
    fill_collection(console_stack, "examples", files)
    # Relevant by its metadata "source" in the evaluation tests; a metadata filter's target here.
    wait_ready(console_stack, [upload(console_stack, "examples", "astral.md", ASTRAL_TEXT.encode(), {"source": ASTRAL_SOURCE})])
    return "examples"


# --- reading the page ---------------------------------------------------------------------------

READ_HITS = """(panel) => [...document.querySelectorAll(`ol.hits[data-panel=${panel}] > li.hit`)].map((li) => {
    const figures = {};
    for (const row of li.querySelectorAll("table.explain-table tr[data-name]")) {
        const name = row.dataset.name;
        if (name === "matchedTerms") { figures[name] = [...row.querySelectorAll("code")].map((c) => c.textContent); continue; }
        const fig = row.querySelector(".fig");
        figures[name] = fig ? { value: fig.dataset.value, text: fig.textContent } : null;
    }
    const score = li.querySelector(".fig[data-name=score]");
    const first = li.querySelector(".fig[data-name=firstStageScore]");
    return {
        chunkId: li.dataset.chunkId,
        documentId: li.dataset.documentId,
        link: li.querySelector("a.filename").getAttribute("href"),
        filename: li.querySelector("a.filename").textContent,
        text: li.querySelector("p.hit-text").textContent,
        marks: [...li.querySelectorAll("p.hit-text mark")].map((m) => m.textContent),
        score: { value: score.dataset.value, text: score.textContent },
        firstStageScore: { value: first.dataset.value, text: first.textContent },
        figures,
    };
})"""

FLOATS = (
    "keywordScore",
    "vectorSimilarity",
    "fusedScore",
    "keywordContribution",
    "vectorContribution",
    "vectorWeight",
    "rerankScore",
)
RANKS = ("keywordRank", "vectorRank", "firstStageRank")


def merged_spans(text: str, highlights: list[dict[str, int]]) -> list[str]:
    """The marked texts the page should show: spans in code points (Python's str indexes), merged."""
    spans = sorted((h.get("start", 0), h.get("end", 0)) for h in highlights)
    merged: list[list[int]] = []
    for start, end in spans:
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [text[start:end] for start, end in merged]


def assert_figure(shown: dict[str, str] | None, expected: float | int | None, name: str, rank: int) -> None:
    where = f"hit {rank}: {name}"
    if expected is None:
        assert shown is None, f"{where}: the API left it unset, the page shows {shown}"
        return
    assert shown is not None, f"{where}: the API says {expected}, the page shows nothing"
    if isinstance(expected, float) or name in FLOATS or name in ("score", "firstStageScore"):
        assert float(shown["value"]) == float(expected), f"{where}: page {shown['value']} != API {expected!r}"
        assert shown["text"] == js_fixed(float(expected), 4), f"{where}: shown {shown['text']!r}"
    else:
        assert int(shown["value"]) == int(expected), f"{where}: page {shown['value']} != API {expected}"
        assert shown["text"] == str(expected)


def assert_hits_equal_api(page_hits: list[dict[str, Any]], api_hits: list[dict[str, Any]]) -> None:
    assert [h["chunkId"] for h in page_hits] == [h["chunkId"] for h in api_hits]
    for rank, (shown, hit) in enumerate(zip(page_hits, api_hits, strict=True), start=1):
        assert shown["documentId"] == hit["documentId"]
        assert shown["filename"] == hit["filename"]
        assert shown["link"] == f"#/documents/{hit['documentId']}"
        assert shown["text"] == hit["text"], f"hit {rank}: the text is not shown as it is"
        assert shown["marks"] == merged_spans(hit["text"], hit.get("highlights", [])), f"hit {rank}"
        assert_figure(shown["score"], hit.get("score", 0.0), "score", rank)
        assert_figure(shown["firstStageScore"], hit.get("firstStageScore", 0.0), "firstStageScore", rank)
        explanation = hit["explanation"]
        figures = shown["figures"]
        for name in FLOATS:
            expected = explanation.get(name, 0.0 if name == "fusedScore" else None)
            assert_figure(figures[name], expected, name, rank)
        for name in RANKS:
            assert_figure(figures[name], explanation.get(name), name, rank)
        status = explanation.get("rerankStatus", "RERANK_STATUS_UNSPECIFIED")
        expected_status = "not asked" if status == "RERANK_STATUS_UNSPECIFIED" else status.removeprefix("RERANK_STATUS_")
        assert figures["rerankStatus"]["text"] == expected_status
        assert figures["matchedTerms"] == explanation.get("matchedTerms", []), f"hit {rank}"


def run_search(page: Any, stack: ConsoleStack, collection: str, query: str) -> None:
    page.goto(f"{stack.url}/#/search/{collection}")
    try:
        page.wait_for_selector(f"#search-collection option:text-is('{collection}')", state="attached")
    except Exception as err:
        raise AssertionError(
            f"the search page did not offer {collection}: {page.watched.page_errors} {page.watched.console_errors}"
        ) from err
    page.select_option("#search-collection", collection)
    page.fill("#search-query", query)


# --- the tests ------------------------------------------------------------------------------------


def test_hits_and_their_explain_figures_equal_the_api(console_stack: ConsoleStack, examples_collection: str, page: Any) -> None:
    sign_in(page, console_stack)
    run_search(page, console_stack, examples_collection, QUERY)
    assert page.is_checked("#a-explain")  # explain is on by default
    page.click("form.search-form button[type=submit]")
    page.wait_for_selector("ol.hits[data-panel=a] li.hit")
    page_hits = page.evaluate(READ_HITS, "a")
    api = search_api(console_stack, collection=examples_collection, query=QUERY, topK=10, mode="SEARCH_MODE_HYBRID", explain=True)
    assert len(api["hits"]) >= 3
    assert_hits_equal_api(page_hits, api["hits"])
    # Both lists took part in the fused scores the page shows.
    top = page_hits[0]["figures"]
    assert top["keywordScore"] is not None and top["vectorSimilarity"] is not None and top["vectorWeight"] is not None
    summary = page.inner_text("[data-panel-summary=a]")
    assert f"{len(api['hits'])} hits, hybrid search, generation {api['generation']}" in summary
    # The first hit's explanation is open: the screenshot of the page (docs/images/console-search.png).
    assert page.is_visible("ol.hits[data-panel=a] li.hit:first-child table.explain-table")
    screenshot(page, "search-explain")
    # The form and the first hit with its explanation, for docs/images/console-search.png.
    explained = page.locator("ol.hits[data-panel=a] li.hit:first-child").bounding_box()
    height = int(explained["y"] + explained["height"] + 12)
    page.screenshot(
        path=str(ARTIFACTS / "console-search.png"), clip={"x": 0, "y": 0, "width": 1360, "height": height}, full_page=True
    )
    assert_accessible(page, "search page with hits and an explanation open")
    # The link goes to the document's page, which the router knows.
    page.click("ol.hits[data-panel=a] li.hit:first-child a.filename")
    page.wait_for_function("(id) => location.hash === '#/documents/' + id", arg=page_hits[0]["documentId"])
    assert_quiet(page)


def test_highlights_are_cut_at_code_points_after_astral_text(
    console_stack: ConsoleStack, examples_collection: str, page: Any
) -> None:
    sign_in(page, console_stack)
    run_search(page, console_stack, examples_collection, "lease expires gateway")
    page.select_option("#a-mode", label="Keyword (BM25)")
    page.click("form.search-form button[type=submit]")
    page.wait_for_selector("ol.hits[data-panel=a] li.hit")
    page_hits = page.evaluate(READ_HITS, "a")
    api = search_api(
        console_stack,
        collection=examples_collection,
        query="lease expires gateway",
        topK=10,
        mode="SEARCH_MODE_KEYWORD",
        explain=True,
    )
    assert_hits_equal_api(page_hits, api["hits"])
    astral = next(h for h in page_hits if h["filename"] == "astral.md")
    # Python slices by code point: the marks are exactly the query's words (as the text has them).
    assert astral["marks"], astral
    assert {m.lower() for m in astral["marks"]} <= {"lease", "expires", "gateway"}, astral["marks"]
    assert astral["text"].startswith("🦆🐍𠜎")
    assert_quiet(page)


def test_two_settings_side_by_side(console_stack: ConsoleStack, examples_collection: str, page: Any) -> None:
    sign_in(page, console_stack)
    run_search(page, console_stack, examples_collection, QUERY)
    page.check("#search-two")
    page.select_option("#a-mode", label="Vector (embedding similarity)")
    page.select_option("#b-mode", label="Keyword (BM25)")
    page.select_option("#b-rerank", "off")
    page.click("form.search-form button[type=submit]")
    page.wait_for_selector("ol.hits[data-panel=a] li.hit")
    page.wait_for_selector("ol.hits[data-panel=b] li.hit")
    vector = search_api(
        console_stack, collection=examples_collection, query=QUERY, topK=10, mode="SEARCH_MODE_VECTOR", explain=True
    )
    keyword = search_api(
        console_stack,
        collection=examples_collection,
        query=QUERY,
        topK=10,
        mode="SEARCH_MODE_KEYWORD",
        explain=True,
        rerank={"disabled": True},
    )
    shown_a = page.evaluate(READ_HITS, "a")
    shown_b = page.evaluate(READ_HITS, "b")
    assert_hits_equal_api(shown_a, vector["hits"])
    assert_hits_equal_api(shown_b, keyword["hits"])
    assert [h["chunkId"] for h in shown_a] != [h["chunkId"] for h in shown_b]  # two modes, two lists
    assert "vector search" in page.inner_text("[data-panel-summary=a]")
    assert "keyword search" in page.inner_text("[data-panel-summary=b]")
    # Vector hits have no keyword side, keyword hits no vector side.
    assert shown_a[0]["figures"]["keywordScore"] is None and shown_a[0]["figures"]["vectorSimilarity"] is not None
    assert shown_b[0]["figures"]["vectorSimilarity"] is None and shown_b[0]["figures"]["keywordScore"] is not None
    # Each hit says where the other setting ranked the same chunk.
    b_ranks = {h["chunkId"]: rank for rank, h in enumerate(shown_b, start=1)}
    for rank, hit in enumerate(shown_a, start=1):
        other = page.inner_text(f"ol.hits[data-panel=a] > li.hit:nth-child({rank}) .other-rank")
        assert other == (f"#{b_ranks[hit['chunkId']]} in B" if hit["chunkId"] in b_ranks else "not in B")
    screenshot(page, "search-side-by-side")
    assert_accessible(page, "search page, two settings")
    assert_quiet(page)


def test_filters_narrow_the_hits_and_a_bad_value_is_refused_in_the_page(
    console_stack: ConsoleStack, examples_collection: str, page: Any
) -> None:
    sign_in(page, console_stack)
    run_search(page, console_stack, examples_collection, QUERY)
    page.click("details.filters > summary")
    page.fill("#filter-filenames", "scaling-workers.md, what-is-sluice.md")
    page.fill("#search-topk", "")
    page.fill("#search-topk", "1")
    page.click("form.search-form button[type=submit]")
    page.wait_for_selector("ol.hits[data-panel=a] li.hit")
    shown = page.evaluate(READ_HITS, "a")
    assert len(shown) == 1 and {h["filename"] for h in shown} <= {"scaling-workers.md", "what-is-sluice.md"}
    api = search_api(
        console_stack,
        collection=examples_collection,
        query=QUERY,
        topK=1,
        mode="SEARCH_MODE_HYBRID",
        explain=True,
        filter={"filenames": ["scaling-workers.md", "what-is-sluice.md"]},
    )
    assert [h["chunkId"] for h in shown] == [h["chunkId"] for h in api["hits"]]
    # A metadata pair instead: the one page whose source it is.
    page.fill("#filter-filenames", "")
    page.click("button:text-is('Add a key = value')")
    page.fill("#meta-key-0", "source")
    page.fill("#meta-value-0", ASTRAL_SOURCE)
    page.click("form.search-form button[type=submit]")
    page.wait_for_selector("ol.hits[data-panel=a] li.hit a.filename:text-is('astral.md')")
    shown = page.evaluate(READ_HITS, "a")
    assert {h["filename"] for h in shown} == {"astral.md"}
    page.click("button[aria-label='Remove metadata pair 1']")
    # A where condition whose number is not one: said on the page, nothing sent.
    page.click("button:text-is('Add a condition')")
    page.fill("#cond-key-0", "year")
    page.select_option("#cond-op-0", label=">")
    page.select_option("#cond-type-0", "number")
    page.fill("#cond-value-0", "twenty")
    page.click("form.search-form button[type=submit]")
    assert "is not a number" in page.inner_text("[role=alert]")
    assert_accessible(page, "search page with the filters open")
    assert_quiet(page)


def tab_to(page: Any, selector: str, presses: int = 80) -> None:
    """Presses Tab until the element matching `selector` has the focus."""
    for _ in range(presses):
        if page.evaluate("(s) => !!document.activeElement && document.activeElement.matches(s)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def test_the_keyboard_alone_searches_and_opens_an_explanation(
    console_stack: ConsoleStack, examples_collection: str, page: Any
) -> None:
    sign_in(page, console_stack)
    page.goto(f"{console_stack.url}/#/search/{examples_collection}")
    page.wait_for_selector(f"#search-collection option:text-is('{examples_collection}')", state="attached")
    tab_to(page, "#search-query")
    page.keyboard.type("how do I scale workers")
    page.keyboard.press("Enter")
    page.wait_for_selector("ol.hits[data-panel=a] li.hit:nth-child(2)")
    second = "ol.hits[data-panel=a] li.hit:nth-child(2) details.explain"
    assert not page.evaluate("(s) => document.querySelector(s).open", second)
    tab_to(page, f"{second} > summary")
    page.keyboard.press("Enter")
    assert page.evaluate("(s) => document.querySelector(s).open", second)
    assert page.is_visible(f"{second} table.explain-table")
    # The side-by-side switch and the second setting's mode, by keyboard too.
    tab_to(page, "#search-two", presses=200)
    page.keyboard.press("Space")
    page.wait_for_selector("#b-mode")
    assert_quiet(page)


@contextlib.contextmanager
def worker_paused(stack: ConsoleStack) -> Iterator[None]:
    """The stack's worker stopped (SIGSTOP) and continued after: a reindex stays BUILDING meanwhile."""
    workers = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        with contextlib.suppress(psutil.Error):
            if cmdline and cmdline[-1].endswith("sluice-worker") and process.environ().get("SLUICE_DEV_HOME") == str(stack.home):
                workers.append(process)
    assert workers, "the stack's worker was not found"
    for process in workers:
        process.suspend()
    try:
        yield
    finally:
        for process in workers:
            process.resume()


def test_the_building_generation_beside_the_active_one(console_stack: ConsoleStack, page: Any) -> None:
    files = {name: (EXAMPLES / name).read_bytes() for name in ("scaling-workers.md", "what-is-sluice.md")}
    fill_collection(console_stack, "reindexed", files)
    with worker_paused(console_stack):
        answer = console_stack.call(
            "DocumentService/ReindexCollection", {"name": "reindexed", "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}}
        )
        assert answer.status_code == 200, answer.text
        building = [g for g in answer.json()["generations"] if g["state"] == "GENERATION_STATE_BUILDING"]
        assert [g["number"] for g in building] == [2]
        sign_in(page, console_stack)
        run_search(page, console_stack, "reindexed", QUERY)
        page.check("#search-two")
        page.select_option("#b-mode", label="Hybrid (keyword and vector, fused)")
        page.select_option("#b-generation", label="building (generation 2, hashing-v1, 0/2 embedded)")
        page.click("form.search-form button[type=submit]")
        page.wait_for_selector("ol.hits[data-panel=a] li.hit")
        page.wait_for_selector("[data-panel-summary=b]")
        active = search_api(console_stack, collection="reindexed", query=QUERY, topK=10, mode="SEARCH_MODE_HYBRID", explain=True)
        candidate = search_api(
            console_stack, collection="reindexed", query=QUERY, topK=10, mode="SEARCH_MODE_HYBRID", explain=True, generation=2
        )
        assert_hits_equal_api(page.evaluate(READ_HITS, "a"), active["hits"])
        assert page.evaluate(READ_HITS, "b") == [] == candidate.get("hits", [])
        assert "generation 1 (all-MiniLM-L6-v2)" in page.inner_text("[data-panel-summary=a]")
        assert page.inner_text("[data-panel-summary=b]").startswith("0 hits, hybrid search, generation 2 (hashing-v1)")
        assert candidate["generation"] == 2 and candidate["embedderModel"] == "hashing-v1"
        screenshot(page, "search-building-generation")
    assert_quiet(page)


def test_a_hostile_documents_hits_stay_text(console_stack: ConsoleStack, page: Any) -> None:
    from .test_console_safety import HOSTILE_HTML, HOSTILE_NAME, assert_nothing_ran

    fill_collection(
        console_stack, "hostile-search", {HOSTILE_NAME: HOSTILE_HTML.encode()}, {"provider": "EMBEDDER_PROVIDER_HASHING"}
    )
    query = "hostile harbour pelican script alert img"
    sign_in(page, console_stack)
    run_search(page, console_stack, "hostile-search", query)
    page.check("#search-two")
    page.select_option("#a-mode", label="Keyword (BM25)")
    page.select_option("#b-mode", label="Hybrid (keyword and vector, fused)")
    page.click("form.search-form button[type=submit]")
    page.wait_for_selector("ol.hits[data-panel=a] li.hit")
    page.wait_for_selector("ol.hits[data-panel=b] li.hit")
    for panel, mode in (("a", "SEARCH_MODE_KEYWORD"), ("b", "SEARCH_MODE_HYBRID")):
        api = search_api(console_stack, collection="hostile-search", query=query, topK=10, mode=mode, explain=True)
        shown = page.evaluate(READ_HITS, panel)
        assert_hits_equal_api(shown, api["hits"])
        assert {h["filename"] for h in shown} == {HOSTILE_NAME}
    # Every explanation open, every mark drawn: still nothing of the document's runs or renders.
    page.evaluate("() => document.querySelectorAll('details.explain').forEach((d) => (d.open = true))")
    screenshot(page, "search-hostile")
    assert_nothing_ran(page)


def test_another_reranker_that_fails_is_reported_per_hit(
    console_stack: ConsoleStack, examples_collection: str, page: Any
) -> None:
    sign_in(page, console_stack)
    run_search(page, console_stack, examples_collection, QUERY)
    page.select_option("#a-rerank", "other")
    page.select_option("#a-provider", label="cross-encoder (on search's CPU)")
    page.fill("#a-model", "no-such-model")
    page.fill("#a-candidates", "20")
    page.click("form.search-form button[type=submit]")
    page.wait_for_selector("ol.hits[data-panel=a] li.hit")
    api = search_api(
        console_stack,
        collection=examples_collection,
        query=QUERY,
        topK=10,
        mode="SEARCH_MODE_HYBRID",
        explain=True,
        rerank={"reranker": {"provider": "RERANKER_PROVIDER_CROSS_ENCODER", "model": "no-such-model", "candidates": 20}},
    )
    rerank = api["rerank"]
    assert rerank["status"] == "RERANK_STATUS_FAILED", rerank
    # The hits in first-stage order, each saying the reranker failed; the summary says why.
    assert_hits_equal_api(page.evaluate(READ_HITS, "a"), api["hits"])
    assert {h["figures"]["rerankStatus"]["text"] for h in page.evaluate(READ_HITS, "a")} == {"FAILED"}
    summary = page.inner_text("[data-panel-summary=a]")
    assert "reranker cross_encoder no-such-model: FAILED" in summary
    assert rerank.get("message", "") in summary
    assert_quiet(page)
