"""Fixtures of the console's browser tests (docs/console.md): the whole stack as `make run` starts
it (sluice-dev: embedded PostgreSQL, ingest-api, a real worker, search, the gateway serving the
built console) on free ports, once per test process; Chromium driven by Playwright (Debian's
package: Playwright cannot download browsers here, and `make venv` installs it); and a page that
records every dialog, console message, uncaught error and failed response, so a test can say
that nothing ran and nothing failed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from dev_stack import DevStack

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "console"
ARTIFACTS = ROOT / ".artifacts" / "console"
CHROMIUM_PATHS = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")


def chromium_executable() -> str | None:
    for path in CHROMIUM_PATHS:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium")


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = chromium_executable()
    if path is None:
        pytest.skip("Chromium is not installed and could not be (make venv installs Debian's chromium when run as root)")
    return path


@pytest.fixture(scope="session")
def console_built() -> Path:
    """console/dist, built now from the lockfile if `make venv` has not built it yet."""
    dist = CONSOLE / "dist"
    if not (dist / "index.html").is_file():
        if shutil.which("npm") is None:
            pytest.fail("the console is not built and npm is missing: run make venv")
        subprocess.run("npm ci --silent --no-audit --no-fund && npm run build --silent", shell=True, cwd=CONSOLE, check=True)
    return dist


@dataclass
class ConsoleStack:
    url: str
    keys: dict[str, str]
    tenant: str
    home: Path

    def api(self, role: str = "client") -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.keys[role]}"}, timeout=60)

    def call(self, method: str, body: dict[str, Any], role: str = "client") -> httpx.Response:
        """POST /sluice.v1.<method> with a JSON body (docs/http.md), e.g. call("SearchService/Search", {...})."""
        with self.api(role) as client:
            return client.post(f"/sluice.v1.{method}", json=body)


@pytest.fixture(scope="session")
def console_stack(tmp_path_factory: pytest.TempPathFactory, console_built: Path) -> Iterator[ConsoleStack]:
    home = tmp_path_factory.mktemp("console-stack")
    # Local-folder sources may read under home/sources (docs/sources.md: SLUICE_SOURCE_LOCAL_ROOTS);
    # webhooks may POST to a receiver on this machine (nothing leaves it).
    (home / "sources").mkdir()
    extra_env = {
        "SLUICE_GATEWAY_CONSOLE_DIR": str(console_built),
        "SLUICE_SOURCE_LOCAL_ROOTS": str(home / "sources"),
        "SLUICE_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
    }
    stack = DevStack(home, extra_env=extra_env)
    try:
        stack.wait_ready()
        credentials = json.loads((home / "credentials").read_text())
        keys = dict(credentials["keys"])
        running = ConsoleStack(f"http://127.0.0.1:{stack.gateway_port}", keys, credentials["tenant"], home)
        # A reader key of the same tenant, made through the public API with the admin key.
        made = running.call(
            "AdminService/CreateApiKey",
            {"tenant": running.tenant, "role": "API_KEY_ROLE_READER", "name": "console tests"},
            "admin",
        )
        assert made.status_code == 200, made.text
        keys["reader"] = made.json()["secret"]
        yield running
    finally:
        stack.stop()


# One browser a test file, not a session: Playwright's sync API keeps an asyncio event loop
# running in the thread that started it until it stops, and every test file that runs after the
# console's on the same xdist process (asyncio.run, pytest-asyncio) would find it there
# ("asyncio.run() cannot be called from a running event loop": 70 failures in one CI run).
@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path, args=["--no-sandbox"])
        yield launched
        launched.close()


@dataclass
class Watched:
    """What a page did that a person would not see: dialogs, console messages, errors, failed responses."""

    dialogs: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_responses: list[str] = field(default_factory=list)


def watch(page: Any) -> Watched:
    watched = Watched()

    def on_dialog(dialog: Any) -> None:
        watched.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("console", lambda message: message.type == "error" and watched.console_errors.append(message.text))
    page.on("pageerror", lambda error: watched.page_errors.append(str(error)))
    page.on(
        "response",
        lambda response: response.status >= 400 and watched.failed_responses.append(f"{response.status} {response.url}"),
    )
    return watched


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 900}, accept_downloads=True)
    opened = context.new_page()
    opened.watched = watch(opened)
    yield opened
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    try:
        opened.screenshot(path=str(ARTIFACTS / f"{name}-last.png"), full_page=True)
    finally:
        context.close()


def sign_in(page: Any, stack: ConsoleStack, role: str = "client") -> None:
    """Signs in on the console's page with `role`'s key (the server tells the console its role)."""
    page.goto(stack.url + "/")
    page.fill("#api-key", stack.keys[role])
    page.click("button[type=submit]")
    page.wait_for_selector("h1:text-is('Collections')")


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
