"""The web console's files (docs/console.md): `/` is its page, `/console/assets/<name>` its hashed
assets, read from the built directory (console/dist). Every answer carries the console's
Content-Security-Policy and the headers beside it; nothing else of the gateway changes."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

# docs/console.md#content-security-policy: no inline script, nothing from another origin. pdf.js
# draws pages from blob: images and runs its worker from a same-origin file.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; "
    "worker-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_ASSET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".map": "application/json",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".woff2": "font/woff2",
}
NOT_BUILT = (
    "Sluice's web console is not built.\n\n"
    "Build it with `make venv` (or `cd console && npm ci && npm run build`), then reload this page;\n"
    "or point SLUICE_GATEWAY_CONSOLE_DIR at a built console (its dist directory).\n"
    "The HTTP/JSON API is served here all the same (/openapi.json).\n"
)


def default_console_dir() -> str:
    """The repository's console/dist when this package runs from a checkout and it was built."""
    built = Path(__file__).resolve().parents[4] / "console" / "dist"
    return str(built) if (built / "index.html").is_file() else ""


def console_routes(console_dir: str) -> list[Route]:
    root = Path(console_dir) if console_dir else None

    async def index(request: Request) -> Response:
        page = root / "index.html" if root else None
        if page is None or not page.is_file():
            return PlainTextResponse(NOT_BUILT, headers={**SECURITY_HEADERS, "Cache-Control": "no-cache"})
        # no-cache: the page names the hashed assets of the build, so it must be asked for again.
        return Response(
            page.read_bytes(), media_type="text/html; charset=utf-8", headers={**SECURITY_HEADERS, "Cache-Control": "no-cache"}
        )

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        path = root / "assets" / name if root and _ASSET_NAME.match(name) else None
        if path is None or not path.is_file():
            return PlainTextResponse("not found\n", status_code=404, headers=SECURITY_HEADERS)
        # The names carry a hash of their content: a new build has new names, so keep them a year.
        return Response(
            path.read_bytes(),
            media_type=_MEDIA_TYPES.get(path.suffix, "application/octet-stream"),
            headers={**SECURITY_HEADERS, "Cache-Control": "public, max-age=31536000, immutable"},
        )

    return [
        Route("/", index, methods=["GET", "HEAD"]),
        Route("/console/assets/{name}", asset, methods=["GET", "HEAD"]),
    ]


__all__ = ["CONTENT_SECURITY_POLICY", "SECURITY_HEADERS", "console_routes", "default_console_dir"]
