"""GET /v1/collections/{collection}/bundle: a collection's bundle over plain HTTP (docs/http.md,
"Exporting a collection"; docs/bundles.md), streamed from ingest-api's ExportCollection as it
arrives; POST to the same path answers 501 pointing at the CLI and the SDKs, which stream
ImportCollection over gRPC (a bundle is one upload of up to SLUICE_MAX_BUNDLE_BYTES, checked by
its trailer, which a plain HTTP body does not carry).

The bundle's size and SHA-256 come in ExportCollection's trailer, after the bytes: the gateway
checks them as the bytes go through and, when they do not match or the stream fails, ends the
response without its last chunk, so a client never takes a cut bundle for a whole one."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from sluice.v1 import document_service_pb2 as ds
from starlette.requests import Request
from starlette.responses import Response

from . import metrics
from .backends import Backends, forwarded_metadata
from .connect import StreamResponse, credentials_error, error_response
from .download import content_disposition
from .errors import GatewayError
from .methods import METHODS

EXPORT = METHODS["/sluice.v1.DocumentService/ExportCollection"]
LABEL = "bundle"


class BundleCut(Exception):
    """The export stream failed or did not match its trailer after the headers went out."""


def bundle_headers(header: ds.ExportCollectionHeader) -> dict[str, str]:
    return {
        "Content-Type": "application/x-tar",
        "Content-Disposition": content_disposition(f"{header.collection}.bundle"),
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "private, no-store",
        "X-Sluice-Bundle-Format-Version": str(header.format_version),
        "X-Sluice-Bundle-Documents": str(header.document_count),
        "X-Sluice-Bundle-Chunks": str(header.chunk_count),
    }


async def export(request: Request, backends: Backends) -> Response:
    """The header message decides the answer (an error is JSON, as every other call's); the bytes
    then follow as ingest-api sends them, checked against the trailer."""
    if (refusal := credentials_error(request)) is not None:
        return error_response(refusal, LABEL)
    call = backends.callable(EXPORT)(
        ds.ExportCollectionRequest(name=request.path_params["collection"]), metadata=forwarded_metadata(request.headers)
    )
    try:
        first = await call.read()
    except grpc.RpcError as error:
        return error_response(error, LABEL)
    if first is grpc.aio.EOF or first.WhichOneof("payload") != "header":  # pragma: no cover - ingest-api sends it first
        call.cancel()
        return error_response(
            GatewayError(grpc.StatusCode.INTERNAL, "the export stream did not start with its header", "INTERNAL"), LABEL
        )
    if request.method == "HEAD":  # the headers alone (Starlette answers HEAD on a GET route)
        call.cancel()
        metrics.REQUESTS.labels(LABEL, "ok").inc()
        return Response(headers=bundle_headers(first.header))

    async def body() -> AsyncIterator[bytes]:
        digest, size, trailer = hashlib.sha256(), 0, None
        try:
            while (message := await call.read()) is not grpc.aio.EOF:
                if message.WhichOneof("payload") == "data":
                    digest.update(message.data)
                    size += len(message.data)
                    yield message.data
                else:
                    trailer = message.trailer
            if trailer is None or trailer.size_bytes != size or trailer.sha256 != digest.hexdigest():
                raise BundleCut("the export did not match its trailer")
        except grpc.RpcError as error:
            raise BundleCut(f"the export stream failed: {error.code()}") from None
        finally:
            call.cancel()  # the client went away, or the stream ended: either way the call is done

    metrics.REQUESTS.labels(LABEL, "ok").inc()
    return StreamResponse(body(), headers=bundle_headers(first.header))


async def refuse_import(request: Request) -> Response:
    return error_response(
        GatewayError(
            grpc.StatusCode.UNIMPLEMENTED,
            "the gateway does not import bundles: use `sluice collections import FILE --as NAME` or the SDKs'"
            " import_collection, which stream ImportCollection over gRPC (docs/bundles.md)",
            "USE_CLI_OR_SDK",
        ),
        LABEL,
    )


class BundleRoute:
    """The path's ASGI endpoint: GET (and HEAD) export, POST is refused; `backends` is read per
    request (the channels are made in the app's lifespan)."""

    def __init__(self, backends: Callable[[], Backends]) -> None:
        self.backends = backends

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        if request.method == "POST":
            response = await refuse_import(request)
        else:
            response = await export(request, self.backends())
        await response(scope, receive, send)


__all__ = ["BundleRoute", "bundle_headers", "export", "refuse_import"]
