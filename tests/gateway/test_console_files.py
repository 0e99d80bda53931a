"""The gateway serves the web console's files (docs/console.md, "Served by the gateway"): `/` and
`/console/assets/<name>` from SLUICE_GATEWAY_CONSOLE_DIR with the console's CSP and headers, a
plain page saying how to build it when it is not built, and nothing else of the gateway changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from sluice_gateway.app import create_app
from sluice_gateway.console import CONTENT_SECURITY_POLICY
from sluice_gateway.settings import GatewaySettings
from starlette.testclient import TestClient


def client(console_dir: str) -> TestClient:
    return TestClient(create_app(GatewaySettings(gateway_console_dir=console_dir, log_json=False)))


@pytest.fixture
def built(tmp_path: Path) -> Path:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text('<!doctype html><script type="module" src="/console/assets/main-ABC.js"></script>')
    (tmp_path / "assets" / "main-ABC.js").write_text("console.log(1)")
    (tmp_path / "assets" / "pdf.worker-XYZ.mjs").write_text("export {}")
    (tmp_path / "secret.txt").write_text("not an asset")
    return tmp_path


def assert_console_headers(headers: dict[str, str] | object) -> None:
    assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY  # type: ignore[index]
    assert headers["x-content-type-options"] == "nosniff"  # type: ignore[index]
    assert headers["referrer-policy"] == "no-referrer"  # type: ignore[index]


def test_the_page_and_its_hashed_assets(built: Path) -> None:
    with client(str(built)) as http:
        page = http.get("/")
        assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["cache-control"] == "no-cache"
        assert_console_headers(page.headers)
        for name, media_type in (
            ("main-ABC.js", "text/javascript; charset=utf-8"),
            ("pdf.worker-XYZ.mjs", "text/javascript; charset=utf-8"),
        ):
            asset = http.get(f"/console/assets/{name}")
            assert asset.status_code == 200 and asset.headers["content-type"] == media_type
            assert asset.headers["cache-control"] == "public, max-age=31536000, immutable"
            assert_console_headers(asset.headers)
        assert http.head("/").status_code == 200


@pytest.mark.parametrize(
    "path", ["/console/assets/missing.js", "/console/assets/..%2Fsecret.txt", "/console/assets/.hidden", "/console/secret.txt"]
)
def test_nothing_outside_the_assets_is_served(built: Path, path: str) -> None:
    with client(str(built)) as http:
        answer = http.get(path)
        assert answer.status_code in (404, 405)  # /console/x is an RPC path's shape: POST only
        assert "not an asset" not in answer.text


def test_an_unbuilt_console_says_how_to_build_it(tmp_path: Path) -> None:
    with client(str(tmp_path / "nothing")) as http:
        page = http.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
        assert "npm run build" in page.text and "make venv" in page.text
        assert_console_headers(page.headers)


def test_the_api_paths_are_unchanged(built: Path) -> None:
    with client(str(built)) as http:
        # An RPC path is still an RPC (here: no key), and a GET of an unknown path still 404s.
        rpc = http.post("/sluice.v1.DocumentService/ListCollections", json={})
        assert rpc.status_code == 401 and rpc.json()["code"] == "unauthenticated"
        assert http.get("/nothing/here").status_code in (404, 405)
        assert "content-security-policy" not in rpc.headers
        assert http.get("/openapi.json").status_code == 200
