"""The console's safety in Chromium (docs/console.md): a hostile document's markup stays text
everywhere the console shows it; a reader key sees no write action and the server refuses the
write anyway; the console's answers carry their Content-Security-Policy; axe-core finds no serious
or critical accessibility violation on the console's pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import CONSOLE, ConsoleStack, screenshot, sign_in, watch

# The whole stack (sluice-dev) and a browser: left out by -m 'not slow'.
pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
READY_TIMEOUT_S = 240

HOSTILE_HTML = """<!doctype html>
<html><head><title>Hostile <script>window.__pwned = 'title'</script></title></head>
<body>
<h1>Hostile page <img src="x" onerror="window.__pwned = 'img'; alert('img')"></h1>
<p>Follow <a href="javascript:window.__pwned = 'link'; alert('link')">this javascript: link</a> to the harbour.</p>
<script>window.__pwned = 'script'; alert('script')</script>
<svg xmlns="http://www.w3.org/2000/svg" onload="window.__pwned = 'svg'"><script>window.__pwned = 'svg-script'; alert('svg')</script>
<text>pelican</text></svg>
<iframe src="javascript:parent.__pwned = 'iframe'" srcdoc="<script>parent.__pwned = 'srcdoc'</script>"></iframe>
<p>Escaped markup is text too: &lt;img src=x onerror="window.__pwned = 'text'; alert('text')"&gt;
&lt;script&gt;window.__pwned = 'text-script'&lt;/script&gt; &lt;a href="javascript:alert(1)"&gt;click&lt;/a&gt;
&lt;iframe srcdoc="&lt;script&gt;parent.__pwned='x'&lt;/script&gt;"&gt;&lt;/iframe&gt;</p>
<table><tr><th>Cell <img src="x" onerror="window.__pwned = 'table'"></th><th>Other</th></tr>
<tr><td>&lt;script&gt;alert('cell')&lt;/script&gt;</td><td><a href="javascript:alert('cell')">cell link</a></td></tr></table>
</body></html>
"""
HOSTILE_NAME = "<img src=x onerror=alert('name')>.html"


def wait_ready(stack: ConsoleStack, document_id: str) -> dict[str, Any]:
    import time

    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        doc: dict[str, Any] = stack.call("DocumentService/GetDocument", {"id": document_id}).json()
        if doc.get("status") in ("DOCUMENT_STATUS_READY", "DOCUMENT_STATUS_FAILED"):
            return doc
        assert time.monotonic() < deadline, f"{document_id} is still {doc.get('status')}"
        time.sleep(0.2)


def collection_with(stack: ConsoleStack, name: str, files: dict[str, bytes], params: dict[str, str] | None = None) -> list[str]:
    """Creates `name` (hashing embedder) with `files` uploaded through the gateway; their ids, READY."""
    with stack.api() as client:
        made = client.post(
            "/sluice.v1.DocumentService/CreateCollection",
            json={"collection": {"name": name, "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}}},
        )
        assert made.status_code == 200, made.text
        ids = []
        for filename, content in files.items():
            stored = client.post(
                f"/v1/collections/{name}/documents", params={"filename": filename, **(params or {})}, content=content
            )
            assert stored.status_code == 200, stored.text
            ids.append(stored.json()["id"])
    for document_id in ids:
        assert wait_ready(stack, document_id)["status"] == "DOCUMENT_STATUS_READY"
    return ids


def assert_nothing_ran(page: Any) -> None:
    watched = page.watched
    assert not watched.dialogs, f"a dialog opened: {watched.dialogs}"
    assert page.evaluate("window.__pwned") is None, f"injected script ran: {page.evaluate('window.__pwned')}"
    assert not watched.page_errors, watched.page_errors
    # A CSP refusal is a console error too: markup that tried to run and was stopped fails here.
    assert not watched.console_errors, watched.console_errors
    # No element of the document's made it into the page: only the console's own markup.
    foreign = page.evaluate(
        "[...document.querySelectorAll('img, iframe, script:not([src]), svg, object, embed, frame')].map(e => e.outerHTML.slice(0, 120))"
    )
    assert not foreign, foreign
    hrefs = page.evaluate("[...document.querySelectorAll('[href]')].map(e => e.getAttribute('href'))")
    assert all(not h.lower().lstrip().startswith("javascript:") for h in hrefs), hrefs


def test_a_hostile_document_stays_text_everywhere(console_stack: ConsoleStack, page: Any, tmp_path: Path) -> None:
    # One through the console's file picker, one with a hostile file name and metadata through the API.
    collection_with(
        console_stack,
        "hostile",
        {HOSTILE_NAME: HOSTILE_HTML.encode()},
        {"metadata.note": "<script>window.__pwned = 'metadata'</script>", "metadata.link": "javascript:alert('metadata')"},
    )
    hostile_file = tmp_path / "hostile.html"
    hostile_file.write_text(HOSTILE_HTML + "<!-- the picker's copy: other bytes, another document -->\n")

    sign_in(page, console_stack)
    page.click("table a:text-is('hostile')")
    page.wait_for_selector(".stream.live")
    page.set_input_files(".uploads input[type=file]:not([webkitdirectory])", str(hostile_file))
    page.wait_for_selector("text=1 of 1 finished", timeout=READY_TIMEOUT_S * 1000)
    assert page.locator(".upload-list .status.READY").count() == 1, page.locator(".upload-list").inner_text()
    page.wait_for_function("() => document.querySelectorAll('table .status.READY').length === 2", timeout=30_000)
    assert page.locator(f'table a:text-is("{HOSTILE_NAME}")').count() == 1
    assert_nothing_ran(page)

    for name in ("hostile.html", HOSTILE_NAME):
        page.click(f'table a:text-is("{name}")')
        page.wait_for_selector(".chunk")
        texts = page.locator(".chunk-text").all_inner_texts()
        # The escaped markup is on the page as the characters it is.
        assert any("onerror" in text and "<img" in text for text in texts), texts
        for details in page.locator("details").all():
            details.locator("summary").click()
        for button in page.locator("button:text-is('Edit')").all()[:1]:
            button.click()  # the chunk's text in a textarea: text again
        assert_nothing_ran(page)
        screenshot(page, f"hostile-{'picker' if name == 'hostile.html' else 'api'}")
        page.go_back()
        page.wait_for_selector("table .status.READY")
    assert page.get_by_text("<script>window.__pwned = 'metadata'</script>").count() == 0  # metadata is on the document page only
    page.click(f'table a:text-is("{HOSTILE_NAME}")')
    page.wait_for_selector(".fields")
    assert page.get_by_text("javascript:alert('metadata')", exact=True).count() == 1
    assert page.get_by_text("<script>window.__pwned = 'metadata'</script>", exact=True).count() == 1
    assert_nothing_ran(page)


def test_a_reader_key_sees_no_write_action_and_the_server_refuses_one(console_stack: ConsoleStack, page: Any) -> None:
    [document_id] = collection_with(console_stack, "readable", {"operations.md": (FIXTURES / "operations.md").read_bytes()})

    sign_in(page, console_stack, "reader")
    assert page.locator("text=read-only key").count() == 1
    assert page.locator("#new-collection").count() == 0
    page.click("table a:text-is('readable')")
    page.wait_for_selector("table .status.READY")
    assert page.locator(".uploads").count() == 0
    assert page.locator("table button").count() == 0  # no retry, reprocess or delete
    page.click("table a:text-is('operations.md')")
    page.wait_for_selector(".chunk")
    for action in ("Disable", "Enable", "Edit", "Delete", "Retry", "Reprocess", "Save"):
        assert page.locator(f"button:text-is('{action}')").count() == 0, action
    assert page.locator("text=Download the original").count() == 1  # reading the original is allowed
    screenshot(page, "reader-document")

    # The server refuses the reader's writes whatever the page shows.
    with console_stack.api("reader") as client:
        refused = client.post("/sluice.v1.DocumentService/DeleteDocument", json={"id": document_id})
        assert refused.status_code == 403
        assert (refused.json()["code"], refused.json()["reason"]) == ("permission_denied", "ROLE_NOT_ALLOWED")
        upload = client.post("/v1/collections/readable/documents", params={"filename": "x.txt"}, content=b"text")
        assert upload.status_code == 403


def test_the_server_tells_the_console_each_keys_role(console_stack: ConsoleStack, page: Any) -> None:
    """AdminService.GetCaller at sign-in: a reader key's session is read-only without anyone saying
    so, an admin key's shows the tenants page, and a worker key is refused with a reason."""
    sign_in(page, console_stack, "reader")
    assert page.evaluate("sessionStorage.getItem('sluice.console.role')") == "reader"
    page.click("text=Sign out")
    sign_in(page, console_stack, "admin")
    assert page.evaluate("sessionStorage.getItem('sluice.console.role')") == "admin"
    page.click("text=Sign out")
    page.fill("#api-key", console_stack.keys["worker"])
    page.click("button[type=submit]")
    banner = page.locator("[role=alert]")
    banner.wait_for()
    assert "worker key serves workers only" in banner.inner_text()
    assert page.evaluate("sessionStorage.getItem('sluice.console.key')") is None


CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; "
    "worker-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def test_the_console_is_served_with_its_security_headers_beside_the_api(console_stack: ConsoleStack) -> None:
    with httpx.Client(base_url=console_stack.url, timeout=30) as client:
        index = client.get("/")
        assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
        assert index.headers["content-security-policy"] == CSP
        assert index.headers["x-content-type-options"] == "nosniff"
        assert index.headers["referrer-policy"] == "no-referrer"
        assert index.headers["cache-control"] == "no-cache"
        assert "<script>" not in index.text and " on" not in index.text.lower().replace("\n", " ").split("<body>")[0]
        scripts = [part.split('"')[0] for part in index.text.split('src="')[1:]]
        assert scripts and all(s.startswith("/console/assets/") for s in scripts)
        asset = client.get(scripts[0])
        assert asset.status_code == 200 and asset.headers["content-type"].startswith("text/javascript")
        assert asset.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert asset.headers["content-security-policy"] == CSP
        assert client.get("/console/assets/nothing-here.js").status_code == 404
        assert client.get("/console/assets/..%2F..%2Fpackage.json").status_code == 404
        # Nothing is fetched from another origin: every URL in the page and its entry is the gateway's.
        assert "https://" not in index.text and "http://" not in index.text
    # The API beside it is unchanged.
    listed = console_stack.call("DocumentService/ListCollections", {})
    assert listed.status_code == 200


AXE = CONSOLE / "node_modules" / "axe-core" / "axe.min.js"


def axe_violations(page: Any) -> list[str]:
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in found
        if v["impact"] in ("serious", "critical")
    ]


def test_axe_finds_no_serious_violation_on_the_console_pages(console_stack: ConsoleStack, browser: Any) -> None:
    if not AXE.is_file():
        pytest.fail("axe-core is missing from console/node_modules: run make venv")
    collection_with(console_stack, "accessible", {"report.pdf": (FIXTURES / "report.pdf").read_bytes()})
    # axe is injected as a script of the test's: this context lets it past the page's CSP.
    context = browser.new_context(viewport={"width": 1360, "height": 900}, bypass_csp=True)
    page = context.new_page()
    page.watched = watch(page)
    try:
        found: dict[str, list[str]] = {}
        page.goto(console_stack.url + "/")
        page.wait_for_selector("#api-key")
        found["sign-in"] = axe_violations(page)
        sign_in(page, console_stack)
        page.wait_for_selector("table a:text-is('accessible')")
        found["collections"] = axe_violations(page)
        page.click("table a:text-is('accessible')")
        page.wait_for_selector("table .status.READY")
        found["collection"] = axe_violations(page)
        page.click("table a:text-is('report.pdf')")
        page.wait_for_selector(".pdf-page .box")
        found["document"] = axe_violations(page)
        assert not any(found.values()), found
    finally:
        context.close()
