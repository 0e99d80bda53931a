"""The console end to end in Chromium (docs/console.md), on the whole stack: sign in, create a
collection, drag a folder of real files in and upload another through the folder picker,
watch them turn READY live on the page, open the PDF and see its chunks' boxes over its page,
disable a chunk and see it leave search, all with the keyboard where a person would use it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import ConsoleStack, screenshot, sign_in

# The whole stack (sluice-dev) and a browser: left out by -m 'not slow'.
pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
FOLDER_FILES = ["report.pdf", "operations.md", "retrieval.html", "handbook.docx", "architecture.pptx", "sub/chinese.md"]
READY_TIMEOUT_MS = 240_000


def drag_in(page: Any, path: Path) -> None:
    """Drags `path` (a file or a folder) from the desktop onto the upload zone: Chromium's drag
    events with real files (DevTools' Input.dispatchDragEvent), as the operating system sends them."""
    box = page.locator("[data-testid=dropzone]").bounding_box()
    devtools = page.context.new_cdp_session(page)
    data = {"items": [], "files": [str(path)], "dragOperationsMask": 1}
    for kind in ("dragEnter", "dragOver", "drop"):
        devtools.send("Input.dispatchDragEvent", {"type": kind, "x": box["x"] + 20, "y": box["y"] + 20, "data": data})
    devtools.detach()


def create_collection(page: Any, name: str) -> None:
    page.fill("#new-collection", name)
    page.select_option("#new-embedder", label="hashing (fast, for trials)")
    page.click("form.inline button[type=submit]")
    page.wait_for_selector(f"table a:text-is('{name}')")


def keyword_hits(stack: ConsoleStack, collection: str, query: str) -> list[dict[str, Any]]:
    answer = stack.call(
        "SearchService/Search", {"collection": collection, "query": query, "topK": 20, "mode": "SEARCH_MODE_KEYWORD"}
    )
    assert answer.status_code == 200, answer.text
    hits: list[dict[str, Any]] = answer.json().get("hits", [])
    return hits


def assert_quiet(page: Any) -> None:
    watched = page.watched
    assert not watched.dialogs, watched.dialogs
    assert not watched.page_errors, watched.page_errors
    assert not watched.console_errors, watched.console_errors


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "handbook"
    for name in FOLDER_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FIXTURES / Path(name).name, root / name)
    (root / ".hidden.md").write_text("hidden files are skipped, as sluice upload skips them\n")
    return root


def test_drag_a_folder_in_watch_it_turn_ready_open_the_pdf_and_disable_a_chunk(
    console_stack: ConsoleStack, page: Any, folder: Path
) -> None:
    sign_in(page, console_stack)
    create_collection(page, "handbook")
    page.click("table a:text-is('handbook')")
    page.wait_for_selector(".stream.live")
    # Set once on this document: still there at the end means the page never reloaded.
    page.evaluate("window.__sameDocument = true")
    # Every status text the upload list ever shows, recorded as it changes.
    page.evaluate(
        """() => { window.__statuses = new Set();
        new MutationObserver(() => document.querySelectorAll('.upload-list .status').forEach(s => window.__statuses.add(s.textContent)))
          .observe(document.body, {subtree: true, childList: true, characterData: true}); }"""
    )

    # The folder dragged in as a person drags one (Chromium's own drag events: the page walks the
    # dropped directory with webkitGetAsEntry, subfolder included, hidden file left out).
    drag_in(page, folder)
    page.wait_for_selector(f"text={len(FOLDER_FILES)} of {len(FOLDER_FILES)} finished", timeout=READY_TIMEOUT_MS)
    ready = page.locator(".upload-list .status.READY")
    assert ready.count() == len(FOLDER_FILES), page.locator(".upload-list").inner_text()
    assert page.evaluate("window.__sameDocument") is True
    seen = set(page.evaluate("[...window.__statuses]"))
    assert "READY" in seen and seen - {"READY"}, f"only {seen} was shown: no status before READY"
    assert ".hidden.md" not in page.locator(".upload-list").inner_text()

    # Another folder through the folder picker.
    extra = folder.parent / "extra"
    extra.mkdir()
    (extra / "pelicans.txt").write_text("Pelicans glide over the harbour at dawn.\n")
    page.set_input_files("input[webkitdirectory]", str(extra))
    total = len(FOLDER_FILES) + 1
    page.wait_for_selector(f"text={total} of {total} finished", timeout=READY_TIMEOUT_MS)
    assert page.locator(".upload-list .status.READY").count() == total
    # The table shows them all, READY, without a reload.
    page.wait_for_function(f"() => document.querySelectorAll('table .status.READY').length === {total}", timeout=30_000)
    # The counts (GetCollection, read again while events arrive) catch up with the stream.
    page.wait_for_function(
        f"""() => [...document.querySelectorAll('.counts div')].some(d => d.querySelector('dt').textContent === 'Ready'
          && d.querySelector('dd').textContent === '{total}')""",
        timeout=30_000,
    )
    screenshot(page, "collection-after-upload")

    page.click("table a:text-is('report.pdf')")
    page.wait_for_selector("h1:text-is('report.pdf')")
    page.wait_for_selector(".pdf-page canvas")
    boxes = page.locator(".pdf-page .box")
    boxes.first.wait_for()
    assert boxes.count() >= 1
    # The page was drawn: its canvas holds pixels other than white.
    drawn = page.wait_for_function(
        """() => { const c = document.querySelector('.pdf-page canvas'); if (!c || !c.width) return false;
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 0; i < d.length; i += 4) if (d[i] < 200) return true; return false; }""",
        timeout=30_000,
    )
    assert drawn
    boxes.first.click()
    selected = page.locator(".chunk.selected")
    selected.wait_for()
    assert selected.get_attribute("data-chunk-index") == boxes.first.get_attribute("data-chunk-index")
    screenshot(page, "document-pdf-boxes")

    # Disable the chunk: it leaves search at once; enable it: it is back.
    document_id = page.locator(".fields code").first.inner_text()
    assert any(hit["documentId"] == document_id for hit in keyword_hits(console_stack, "handbook", "quarterly report throughput"))
    page.click("button[aria-label='Disable chunk 0']")
    page.wait_for_selector(".chunk .status:text-is('DISABLED')")
    assert not any(
        hit["documentId"] == document_id for hit in keyword_hits(console_stack, "handbook", "quarterly report throughput")
    )
    page.click("button[aria-label='Enable chunk 0']")
    page.wait_for_selector("button[aria-label='Disable chunk 0']")
    assert any(hit["documentId"] == document_id for hit in keyword_hits(console_stack, "handbook", "quarterly report throughput"))

    # The original comes back byte for byte through the download button.
    with page.expect_download() as download:
        page.click("text=Download the original")
    saved = download.value.path()
    assert Path(saved).read_bytes() == (FIXTURES / "report.pdf").read_bytes()
    assert download.value.suggested_filename == "report.pdf"
    assert_quiet(page)


def tab_to(page: Any, text: str, presses: int = 150) -> None:
    """Presses Tab until the focused element's text (or value, or its label's text) is `text`."""
    for _ in range(presses):
        page.keyboard.press("Tab")
        focused = page.evaluate(
            "() => { const e = document.activeElement; return (e && (e.textContent || e.value || e.labels?.[0]?.textContent || '')).trim(); }"
        )
        if focused == text:
            return
    raise AssertionError(f"{text!r} is not reachable with Tab")


def test_keyboard_alone_signs_in_opens_a_collection_and_a_document(
    console_stack: ConsoleStack, page: Any, tmp_path: Path
) -> None:
    upload = console_stack.api()
    with upload:
        assert (
            upload.post(
                "/sluice.v1.DocumentService/CreateCollection",
                json={"collection": {"name": "keyboard", "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}}},
            ).status_code
            == 200
        )
        stored = upload.post(
            "/v1/collections/keyboard/documents",
            params={"filename": "operations.md"},
            content=(FIXTURES / "operations.md").read_bytes(),
        )
        assert stored.status_code == 200, stored.text
    document_id = stored.json()["id"]
    wait_ready = console_stack.call("DocumentService/GetDocument", {"id": document_id})
    for _ in range(600):
        if wait_ready.json().get("status") == "DOCUMENT_STATUS_READY":
            break
        page.wait_for_timeout(200)
        wait_ready = console_stack.call("DocumentService/GetDocument", {"id": document_id})

    page.goto(console_stack.url + "/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "api-key"
    page.keyboard.type(console_stack.keys["client"])
    page.keyboard.press("Enter")
    page.wait_for_selector("h1:text-is('Collections')")
    tab_to(page, "keyboard")
    page.keyboard.press("Enter")
    page.wait_for_selector("h1:text-is('keyboard')")
    # Upload with the keyboard: Tab to the file picker, Enter opens the browser's file chooser.
    note = tmp_path / "typed-note.txt"
    note.write_text("A note chosen with the keyboard alone.\n")
    tab_to(page, "Choose files")
    # Tab reaches the native file input (the picker's focus ring is :focus-within); what Enter does
    # on it is the browser's own dialog. Headless Chromium opened it here on every run on a
    # developer's machine but fired no "filechooser" event in two clean-clone CI runs, so the files
    # are given to the focused input itself: the upload that follows is the console's, as typed.
    assert page.evaluate("document.activeElement.type") == "file"
    assert page.evaluate("document.activeElement.closest('label').textContent.trim()") == "Choose files"
    page.locator("input[type=file]:focus").set_input_files(str(note))
    page.wait_for_selector("text=1 of 1 finished", timeout=READY_TIMEOUT_MS)
    assert page.locator(".upload-list .status.READY").count() == 1
    tab_to(page, "operations.md")
    page.keyboard.press("Enter")
    page.wait_for_selector("h1:text-is('operations.md')")
    page.wait_for_selector(".chunk")
    tab_to(page, "Disable")
    page.keyboard.press("Enter")
    page.wait_for_selector(".chunk .status:text-is('DISABLED')")
    tab_to(page, "Enable")  # the same button, now Enable: focus stayed on it
    page.keyboard.press("Enter")
    page.wait_for_selector("button:text-is('Disable')")
    tab_to(page, "Sign out")
    page.keyboard.press("Enter")
    page.wait_for_selector("#api-key")
    assert page.evaluate("sessionStorage.length") == 0
    assert_quiet(page)


def test_failure_reasons_retry_reprocess_delete_and_pages_of_documents(console_stack: ConsoleStack, page: Any) -> None:
    with console_stack.api() as client:
        made = client.post(
            "/sluice.v1.DocumentService/CreateCollection",
            json={"collection": {"name": "lifecycle", "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}, "maxAttempts": 1}},
        )
        assert made.status_code == 200, made.text
        for i in range(100):  # 100 small notes: with the two below, two pages of documents
            stored = client.post(
                "/v1/collections/lifecycle/documents",
                params={"filename": f"note-{i:03}.txt"},
                content=f"Note {i} about the harbour.\n".encode(),
            )
            assert stored.status_code == 200, stored.text
    sign_in(page, console_stack)
    page.click("table a:text-is('lifecycle')")
    page.wait_for_selector(".stream.live")
    page.set_input_files(
        ".uploads input[type=file]:not([webkitdirectory])",
        [str(FIXTURES / "malformed" / "not-a-zip.docx"), str(FIXTURES / "operations.md")],
    )
    page.wait_for_selector("text=2 of 2 finished", timeout=READY_TIMEOUT_MS)

    # The failure and its reason, on the upload list and in the table.
    failed_row = page.locator("table tr", has=page.locator("a:text-is('not-a-zip.docx')"))
    failed_row.locator(".status.FAILED").wait_for()
    reason = failed_row.locator(".failure").inner_text()
    assert reason.strip(), "a FAILED document shows why"
    failed_id = failed_row.locator("a").get_attribute("href").rsplit("/", 1)[-1]
    before = console_stack.call("DocumentService/GetDocument", {"id": failed_id}).json()["updateTime"]
    failed_row.get_by_role("button", name="Retry not-a-zip.docx").click()
    for _ in range(1200):  # processed again (a retry starts its attempts over), FAILED again
        again = console_stack.call("DocumentService/GetDocument", {"id": failed_id}).json()
        if again["updateTime"] != before and again["status"] == "DOCUMENT_STATUS_FAILED":
            break
        page.wait_for_timeout(100)
    else:
        raise AssertionError(f"the retry was not processed: {again}")
    assert page.locator("[role=alert]").count() == 0, page.locator("[role=alert]").inner_text()
    failed_row.locator(".status.FAILED").wait_for()
    assert failed_row.locator(".failure").inner_text().strip()

    # Reprocess a READY document: processed again (here in well under the page's 150 ms between two
    # renders, so its stages may not show) and READY again on the page.
    ready_row = page.locator("table tr", has=page.locator("a:text-is('operations.md')"))
    ready_row.locator(".status.READY").wait_for()
    ready_id = ready_row.locator("a").get_attribute("href").rsplit("/", 1)[-1]
    before = console_stack.call("DocumentService/GetDocument", {"id": ready_id}).json()["updateTime"]
    ready_row.get_by_role("button", name="Reprocess operations.md").click()
    for _ in range(1200):
        again = console_stack.call("DocumentService/GetDocument", {"id": ready_id}).json()
        if again["updateTime"] != before and again["status"] == "DOCUMENT_STATUS_READY":
            break
        page.wait_for_timeout(100)
    else:
        raise AssertionError(f"the reprocess was not processed: {again}")
    ready_row.locator(".status.READY").wait_for()
    assert page.locator("[role=alert]").count() == 0

    # Delete, with its confirmation: the row leaves the page live.
    ready_row.get_by_role("button", name="Delete operations.md").click()
    ready_row.get_by_role("button", name="Confirm: delete operations.md").click()
    page.locator("table a:text-is('operations.md')").wait_for(state="detached", timeout=30_000)
    gone = console_stack.call("DocumentService/ListDocuments", {"collection": "lifecycle", "pageSize": 1000}).json()["documents"]
    assert "operations.md" not in {d["filename"] for d in gone}

    # 101 documents: a first page of 100, the next of 1, and back.
    page.reload()
    page.wait_for_selector("table .status")
    assert page.locator("table tbody tr").count() == 100
    page.get_by_role("button", name="Next page").click()
    page.wait_for_function("() => document.querySelectorAll('table tbody tr').length === 1")
    assert page.get_by_text("Page 2").count() == 1
    assert page.get_by_role("button", name="Next page").is_disabled()
    page.get_by_role("button", name="Previous page").click()
    page.wait_for_function("() => document.querySelectorAll('table tbody tr').length === 100")
    page.watched.console_errors.clear()  # the failed upload's document is not an error of the page
    assert_quiet(page)


def test_edit_a_chunk_search_finds_its_new_text_and_a_stale_edit_is_refused(console_stack: ConsoleStack, page: Any) -> None:
    with console_stack.api() as client:
        made = client.post(
            "/sluice.v1.DocumentService/CreateCollection",
            json={"collection": {"name": "edits", "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}}},
        )
        assert made.status_code == 200, made.text
        stored = client.post(
            "/v1/collections/edits/documents",
            params={"filename": "operations.md"},
            content=(FIXTURES / "operations.md").read_bytes(),
        )
        assert stored.status_code == 200, stored.text
    document_id = stored.json()["id"]
    sign_in(page, console_stack)
    page.goto(f"{console_stack.url}/#/documents/{document_id}")
    page.wait_for_selector(".chunk", timeout=READY_TIMEOUT_MS)
    original = page.locator(".chunk").first.locator(".chunk-text").inner_text()

    page.click("button[aria-label='Edit chunk 0']")
    page.fill(".chunk textarea", "Zebras migrate across the savanna every spring.")
    page.click(".chunk button:text-is('Save')")
    page.wait_for_selector(".chunk .status:text-is('EDITED')")
    assert (
        page.locator(".chunk").first.locator(".chunk-text").first.inner_text()
        == "Zebras migrate across the savanna every spring."
    )
    page.click('.chunk summary:text-is("The parser\'s text")')
    assert page.locator(".chunk").first.locator("details .chunk-text").inner_text() == original
    assert any(hit["documentId"] == document_id for hit in keyword_hits(console_stack, "edits", "zebras savanna"))

    # Someone else changes the chunk after this page read it: the page's edit carries the old
    # etag and is refused, with the reason shown.
    chunks = console_stack.call("DocumentService/ListChunks", {"documentId": document_id}).json()["chunks"]
    changed = console_stack.call("DocumentService/UpdateChunk", {"chunkId": chunks[0]["id"], "text": "Changed elsewhere."})
    assert changed.status_code == 200, changed.text
    page.click("button[aria-label='Edit chunk 0']")
    page.fill(".chunk textarea", "A stale edit.")
    page.click(".chunk button:text-is('Save')")
    banner = page.locator("[role=alert]")
    banner.wait_for()
    assert "CHUNK_CHANGED" in banner.inner_text()
    assert (
        console_stack.call("DocumentService/ListChunks", {"documentId": document_id}).json()["chunks"][0]["text"]
        == "Changed elsewhere."
    )
    page.watched.console_errors.clear()  # the refused call's 409, on purpose
    assert_quiet(page)


def test_an_unknown_collection_says_so_and_its_stream_stops(console_stack: ConsoleStack, page: Any) -> None:
    sign_in(page, console_stack)
    watches: list[str] = []
    page.on("request", lambda request: "WatchCollection" in request.url and watches.append(request.url))
    page.goto(f"{console_stack.url}/#/collections/no-such-collection")
    page.wait_for_selector(".stream.stopped")
    banners = page.locator("[role=alert]").all_inner_texts()
    assert banners and all("not found" in text and "COLLECTION_NOT_FOUND" in text for text in banners), banners
    page.wait_for_timeout(2500)  # a stream that failed for good is not opened again every second
    assert len(watches) == 1, watches
    page.watched.console_errors.clear()  # the 404 of ListDocuments, on purpose
    assert_quiet(page)
