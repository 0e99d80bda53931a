"""The gateway's ASGI application (Starlette), separate from main() so tests serve it in-process."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from . import bundle, dify, metrics
from .backends import Backends
from .connect import ConnectHandlers
from .console import console_routes, default_console_dir
from .download import download
from .methods import METHODS
from .openapi import build_openapi
from .settings import GatewaySettings


def create_app(settings: GatewaySettings) -> ASGIApp:
    state: dict[str, object] = {}
    openapi = build_openapi()

    def handlers() -> ConnectHandlers:
        return state["handlers"]  # type: ignore[return-value]

    def backends() -> Backends:
        return state["backends"]  # type: ignore[return-value]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # The channels belong to the server's event loop: made here, closed here.
        state["backends"] = Backends(settings)
        state["handlers"] = ConnectHandlers(
            backends(),
            call_timeout=settings.gateway_call_timeout_seconds,
            max_json_bytes=settings.gateway_max_json_bytes,
            get_max_age=settings.gateway_get_max_age_seconds,
        )
        try:
            yield
        finally:
            await backends().close()

    async def rpc(request: Request) -> Response:
        return await handlers().rpc(request)

    async def upload(request: Request) -> Response:
        return await handlers().upload(request)

    async def document_content(request: Request) -> Response:
        return await download(request, backends())

    async def retrieval(request: Request) -> Response:
        response = await dify.retrieval(request, backends(), settings.gateway_call_timeout_seconds)
        code = "ok" if response.status_code == 200 else f"http_{response.status_code}"  # Dify's errors are HTTP's
        metrics.REQUESTS.labels("retrieval", code).inc()
        return response

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(openapi)

    async def healthz(request: Request) -> Response:
        answers = await backends().health()
        serving = all(a == "SERVING" for a in answers.values())
        return JSONResponse(
            {"status": "SERVING" if serving else "NOT_SERVING", "backends": answers}, status_code=200 if serving else 503
        )

    routes = Starlette(
        routes=[
            Route("/openapi.json", openapi_json, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/retrieval", retrieval, methods=["POST"]),
            Route("/v1/collections/{collection}/documents", upload, methods=["POST"]),
            Route("/v1/documents/{id}/content", document_content, methods=["GET"]),
            Route("/v1/collections/{collection}/bundle", bundle.BundleRoute(backends), methods=["GET", "POST"]),
            Route("/{service}/{method}", rpc, methods=["POST"]),
            *console_routes(settings.gateway_console_dir or default_console_dir()),
        ],
        lifespan=lifespan,
    )

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        """A POST (or a Connect GET) to an RPC's path goes straight to its handler; everything else (and the
        lifespan) through Starlette's routing. Its router and exception layers were a few
        hundred microseconds of every call on a busy machine (docs/http.md, "Speed")."""
        if scope["type"] == "http" and scope["path"] in METHODS and scope["method"] not in ("POST", "GET"):
            # Starlette's 405 would name the POST route's method alone; a method marked
            # NO_SIDE_EFFECTS takes a GET as well (docs/http.md, "GET requests").
            allowed = "GET, POST" if METHODS[scope["path"]].takes_get else "POST"
            refusal = PlainTextResponse("Method Not Allowed", status_code=405, headers={"Allow": allowed})
            await refusal(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] in METHODS and scope["method"] in ("POST", "GET"):
            request = Request(scope, receive)
            if scope["method"] == "POST":
                response = await handlers().rpc(request)
            else:  # the Connect protocol's GET, for methods marked NO_SIDE_EFFECTS
                response = await handlers().rpc_get(request)
            await response(scope, receive, send)
            return
        await routes(scope, receive, send)

    if not settings.cors_origins():
        return app
    # Browsers on the allowed origins may send the key and JSON, and read the error and timing
    # headers (docs/http.md#keys-limits-and-tls).
    return CORSMiddleware(
        app,
        allow_origins=settings.cors_origins(),
        allow_methods=["GET", "POST"],
        allow_headers=[
            "authorization",
            "x-sluice-tenant",
            "content-type",
            "connect-protocol-version",
            "connect-timeout-ms",
            "last-event-id",
            "idempotency-key",
            "x-sluice-filename",
            "x-sluice-sha256",
            "x-sluice-typed-metadata",
        ],
        expose_headers=["retry-after", "server-timing"],
        max_age=600,
    )
