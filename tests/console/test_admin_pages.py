"""The console's tenants-and-keys, sources and webhooks pages (console/src/pages/admin.tsx,
sources.tsx, webhooks.tsx) in Chromium on the whole stack: an admin creates a tenant and a key
whose secret is shown once (gone once the dialog closes, and after a reload) and revokes it (the
server refuses it then); other keys are told the page needs an admin key; Sync now runs a
local-folder source and the page shows the run's counts as ListSourceRuns has them; a webhook's
deliveries as ListWebhookDeliveries lists them, its URL as text; a reader key sees no write
button; axe-core on each page."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers import free_port

from .conftest import ConsoleStack, screenshot, sign_in
from .test_search_page import EXAMPLES, assert_accessible, assert_quiet, create_collection, upload, wait_ready

# The whole stack (sluice-dev) and a browser: left out by -m 'not slow'.
pytestmark = pytest.mark.slow

HASHING = {"provider": "EMBEDDER_PROVIDER_HASHING"}


@pytest.fixture
def accepting_page(browser: Any) -> Iterator[Any]:
    """A page whose confirm() dialogs are accepted (the shared `page` fixture dismisses them),
    with page errors and console errors recorded."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.dialogs = []
    page.errors = []

    def on_dialog(dialog: Any) -> None:
        page.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.accept()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and page.errors.append(message.text))
    yield page
    context.close()


def with_key(stack: ConsoleStack, key: str, method: str, body: dict[str, Any]) -> httpx.Response:
    with httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        return client.post(f"/sluice.v1.{method}", json=body)


@pytest.fixture(scope="module")
def synced(console_stack: ConsoleStack) -> dict[str, Any]:
    """A collection `synced` (hashing embedder) with a local-folder source `handbook` of three
    Markdown files under the stack's allowed root."""
    folder = console_stack.home / "sources" / "handbook"
    folder.mkdir(parents=True)
    for name in ("scaling-workers.md", "what-is-sluice.md"):
        (folder / name).write_bytes((EXAMPLES / name).read_bytes())
    (folder / "notes.md").write_text("# Notes\n\nA third page, so that the run lists three items.\n")
    (folder / "skipped.txt").write_text("not matched by the glob\n")
    create_collection(console_stack, "synced", HASHING)
    answer = console_stack.call(
        "SourceService/CreateSource",
        {"source": {"collection": "synced", "displayName": "handbook", "localFolder": {"path": str(folder), "glob": "**/*.md"}}},
    )
    assert answer.status_code == 200, answer.text
    source: dict[str, Any] = answer.json()
    return source


def test_an_admin_creates_a_tenant_and_a_key_shown_once_then_revokes_it(console_stack: ConsoleStack, accepting_page: Any) -> None:
    page = accepting_page
    sign_in(page, console_stack, "admin")
    page.goto(f"{console_stack.url}/#/admin")
    page.fill("#tenant-name", "console-tenant")
    page.fill("#tenant-collections", "3")
    page.click("button:text-is('Create tenant')")
    page.wait_for_selector("h2:text-is('Keys of console-tenant')")
    row = page.locator("tr", has=page.locator("td:text-is('console-tenant')"))
    assert "0 of 3" in row.inner_text()
    tenants = console_stack.call("AdminService/ListTenants", {}, "admin").json()["tenants"]
    assert any(t["name"] == "console-tenant" and t["quota"]["maxCollections"] == 3 for t in tenants)

    page.select_option("#key-role", label="reader: search and read only")
    page.fill("#key-name", "ci reader")
    page.click("button:text-is('Create key')")
    page.wait_for_selector("dialog.secret[open]")
    secret = page.input_value("#secret-value")
    assert secret.startswith("slk_")
    assert "shown this once" in page.inner_text("#secret-warning")
    assert_accessible(page, "admin page with the new key's dialog")
    page.click("dialog.secret button:text-is('Copy')")
    page.wait_for_selector("dialog.secret .ok:has-text('Copied')")
    assert page.evaluate("() => navigator.clipboard.readText()") == secret
    screenshot(page, "admin-new-key")
    # The key works, for its tenant and role.
    assert with_key(console_stack, secret, "DocumentService/ListCollections", {}).status_code == 200
    assert (
        with_key(console_stack, secret, "DocumentService/CreateCollection", {"collection": {"name": "nope"}}).status_code == 403
    )

    page.click("dialog.secret button:text-is('I have copied it, close')")
    page.wait_for_selector("dialog.secret", state="detached")
    assert secret not in page.content()
    storage = page.evaluate("() => JSON.stringify({...sessionStorage}) + JSON.stringify({...localStorage}) + location.href")
    assert secret not in storage
    prefix = secret[: secret.index("_", 4) + 1]
    page.reload()
    page.click("button[aria-label='Keys of console-tenant']")
    page.wait_for_selector(f"code:text-is('{prefix}')")
    assert secret not in page.content()

    # Escape closes a new key's dialog as well, and forgets it.
    page.select_option("#key-role", label="client: read and write the tenant's collections")
    page.click("button:text-is('Create key')")
    page.wait_for_selector("dialog.secret[open]")
    other = page.input_value("#secret-value")
    page.keyboard.press("Escape")
    page.wait_for_selector("dialog.secret", state="detached")
    assert other not in page.content()

    page.click(f"button[aria-label='Revoke {prefix}']")
    assert page.dialogs and page.dialogs[-1].startswith("confirm: Revoke " + prefix)
    revoked_row = page.locator("tr", has=page.locator(f"code:text-is('{prefix}')"))
    revoked_row.locator("td .bad").wait_for()
    assert revoked_row.locator("button").count() == 0
    deadline = time.monotonic() + 30
    while with_key(console_stack, secret, "DocumentService/ListCollections", {}).status_code != 401:
        assert time.monotonic() < deadline, "the revoked key is still accepted"
        time.sleep(0.5)
    keys = console_stack.call("AdminService/ListApiKeys", {"tenant": "console-tenant"}, "admin").json()["apiKeys"]
    assert [k["prefix"] for k in keys if "revokeTime" in k] == [prefix]
    assert_accessible(page, "admin page")
    assert not page.errors, page.errors


def test_a_client_key_is_told_the_page_needs_an_admin_key(console_stack: ConsoleStack, page: Any) -> None:
    sign_in(page, console_stack)
    page.goto(f"{console_stack.url}/#/admin")
    page.wait_for_selector("h1:text-is('Tenants and keys')")
    note = page.inner_text("main")
    assert "This page needs an admin key" in note
    assert page.locator("main button, main input, main table").count() == 0
    assert_accessible(page, "admin page for a client key")
    assert_quiet(page)


def test_sync_now_runs_a_source_and_shows_the_runs_counts(console_stack: ConsoleStack, synced: dict[str, Any], page: Any) -> None:
    sign_in(page, console_stack)
    page.goto(f"{console_stack.url}/#/sources/synced")
    row = page.locator("tr", has=page.locator("td:text-is('handbook')"))
    row.wait_for()
    assert "LOCAL_FOLDER" in row.inner_text() and "never synced" in row.inner_text()
    row.locator("button:text-is('Sync now')").click()
    page.wait_for_selector("h2:text-is('Runs of handbook')")
    # The page follows the run until it ends.
    page.wait_for_selector(".runs tbody .state-SUCCEEDED", timeout=180_000)
    runs = console_stack.call("SourceService/ListSourceRuns", {"name": synced["name"]}).json()["runs"]
    assert len(runs) == 1 and runs[0]["state"] == "SOURCE_RUN_STATE_SUCCEEDED"
    run = runs[0]
    cells = page.locator(".runs tbody tr").first.locator("td").all_inner_texts()
    assert cells[:8] == [
        "SUCCEEDED",
        "sync now",
        run.get("listed", "0"),
        run.get("uploaded", "0"),
        run.get("unchanged", "0"),
        run.get("deleted", "0"),
        run.get("failed", "0"),
        "",
    ]
    assert (run.get("listed"), run.get("uploaded")) == ("3", "3")
    page.wait_for_selector("tr:has(td:text-is('handbook')) .state-SUCCEEDED")
    assert "3 listed, 3 uploaded, 0 unchanged, 0 deleted" in row.inner_text()
    screenshot(page, "sources")
    assert_accessible(page, "sources page with a source's runs")
    assert_quiet(page)


@pytest.fixture
def receiver() -> Iterator[str]:
    """A webhook receiver on this machine: 204 for paths under /ok, 500 for the rest."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(204 if self.path.startswith("/ok") else 500)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(10)


def test_the_webhooks_page_lists_deliveries_and_shows_urls_as_text(console_stack: ConsoleStack, page: Any, receiver: str) -> None:
    create_collection(console_stack, "hooked", HASHING)
    hostile_url = f"{receiver}/ok/<script>alert(1)</script>"

    def subscribe(url: str, description: str) -> dict[str, Any]:
        made = console_stack.call(
            "WebhookService/CreateWebhook", {"webhook": {"collection": "hooked", "url": url, "description": description}}
        )
        assert made.status_code == 200, made.text
        webhook: dict[str, Any] = made.json()["webhook"]
        return webhook

    ok = subscribe(hostile_url, "<b>not bold</b>")
    failing = subscribe(f"{receiver}/fail", "always 500")
    wait_ready(
        console_stack, [upload(console_stack, "hooked", "what-is-sluice.md", (EXAMPLES / "what-is-sluice.md").read_bytes())]
    )

    def deliveries(webhook: dict[str, Any]) -> list[dict[str, Any]]:
        answer = console_stack.call("WebhookService/ListWebhookDeliveries", {"webhookId": webhook["id"], "pageSize": 50})
        assert answer.status_code == 200, answer.text
        found: list[dict[str, Any]] = answer.json().get("deliveries", [])
        return found

    deadline = time.monotonic() + 90
    while not (
        any(d["eventType"] == "document.ready" for d in deliveries(ok))
        and all(d.get("state") == "WEBHOOK_DELIVERY_STATE_DELIVERED" for d in deliveries(ok))
        and any(d.get("lastStatusCode") == 500 for d in deliveries(failing))
    ):
        assert time.monotonic() < deadline, (deliveries(ok), deliveries(failing))
        time.sleep(0.5)
    expected = deliveries(ok)
    sign_in(page, console_stack)
    page.goto(f"{console_stack.url}/#/webhooks/hooked")
    row = page.locator("tbody tr", has=page.locator("code.url", has_text="/ok/<script>alert(1)</script>"))
    row.wait_for()
    assert row.locator("code.url").inner_text() == hostile_url
    assert page.locator("main script, main b").count() == 0
    assert "<b>not bold</b>" in row.inner_text()
    row.locator("button:text-is('Deliveries')").click()
    rows = page.locator("section[aria-labelledby^='deliveries-'] table tbody tr")
    rows.first.wait_for()
    shown = [r.locator("td").all_inner_texts() for r in rows.all()]
    # Event, state, attempts and the last status code, in the API's order (newest first).
    assert [(c[0], c[2], c[3], c[4]) for c in shown] == [
        (d["eventType"], "DELIVERED", str(d.get("attempts", 0)), str(d.get("lastStatusCode", ""))) for d in expected
    ]
    # The body is the JSON POSTed, shown as text.
    rows.first.locator("details.more summary").click()
    assert expected[0]["documentId"] in page.locator("pre.payload").first.inner_text()
    screenshot(page, "webhooks")
    assert_accessible(page, "webhooks page with deliveries")

    # The failing subscription: its refusals with their status code and error.
    page.locator("tbody tr", has=page.locator(f"code.url:text-is('{receiver}/fail')")).locator(
        "button:text-is('Deliveries')"
    ).click()
    page.wait_for_selector("section[aria-labelledby^='deliveries-'] td.num:text-is('500')")
    errors = {d.get("lastError") for d in deliveries(failing) if d.get("lastStatusCode") == 500}
    refused = page.locator("section[aria-labelledby^='deliveries-'] tbody tr", has=page.locator("td.num:text-is('500')")).first
    assert refused.locator("td").nth(5).inner_text() in errors
    assert_quiet(page)


def test_a_reader_key_sees_no_write_button(console_stack: ConsoleStack, synced: dict[str, Any], page: Any) -> None:
    sign_in(page, console_stack, "reader")
    page.goto(f"{console_stack.url}/#/sources/synced")
    row = page.locator("tr", has=page.locator("td:text-is('handbook')"))
    row.wait_for()
    assert row.locator("button:text-is('Runs')").count() == 1
    assert page.locator("button:has-text('Sync')").count() == 0
    assert_accessible(page, "sources page for a reader")
    page.goto(f"{console_stack.url}/#/admin")
    page.wait_for_selector("text=This page needs an admin key")
    assert page.locator("button:text-is('Create key'), button:text-is('Create tenant'), button:has-text('Revoke')").count() == 0
    # The server refuses a sync from this key all the same.
    refused = console_stack.call("SourceService/SyncSource", {"name": synced["name"]}, "reader")
    assert refused.status_code == 403, refused.text
    assert_quiet(page)
