"""GET /v1/documents/{id}/content: a document's original bytes over plain HTTP (docs/http.md,
"Downloading a document"), streamed from ingest-api's DownloadDocument as they arrive.

The original may be hostile (an HTML page with scripts, an SVG): it is always an attachment,
never sniffed, and sandboxed by its own Content-Security-Policy, so it can never run as a page of
the origin that serves the console."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from urllib.parse import quote

import grpc
from sluice.v1 import document_service_pb2 as ds
from starlette.requests import Request
from starlette.responses import Response

from . import metrics
from .backends import Backends, forwarded_metadata
from .connect import StreamResponse, credentials_error, error_response
from .errors import GatewayError
from .methods import METHODS

DOWNLOAD = METHODS["/sluice.v1.DocumentService/DownloadDocument"]
LABEL = "download"
# What an upload accepts as a media type (ingest-api's MIME_TYPE); anything else is served as bytes.
MEDIA_TYPE = re.compile(r"^[\w.+-]+/[\w.+-]+$")


def content_disposition(filename: str) -> str:
    """Always an attachment; the name as RFC 6266 gives it (an ASCII fallback, then UTF-8)."""
    fallback = "".join(ch if " " <= ch <= "~" and ch not in '"\\' else "_" for ch in filename) or "document"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"


def download_headers(header: ds.DownloadDocumentHeader) -> dict[str, str]:
    media_type = header.mime_type if MEDIA_TYPE.match(header.mime_type) else "application/octet-stream"
    return {
        "Content-Type": media_type,
        "Content-Length": str(header.size_bytes),
        "Content-Disposition": content_disposition(header.filename),
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox; default-src 'none'",
        "Cache-Control": "private, no-store",
        "ETag": f'"{header.content_sha256}"',
        "X-Content-SHA256": header.content_sha256,
    }


async def download(request: Request, backends: Backends) -> Response:
    """The header message decides the answer (an error is JSON, as every other call's); the
    bytes then follow as ingest-api sends them, and the gRPC call ends with the response."""
    if (refusal := credentials_error(request)) is not None:
        return error_response(refusal, LABEL)
    call = backends.callable(DOWNLOAD)(
        ds.DownloadDocumentRequest(id=request.path_params["id"]), metadata=forwarded_metadata(request.headers)
    )
    try:
        first = await call.read()
    except grpc.RpcError as error:
        return error_response(error, LABEL)
    if first is grpc.aio.EOF or first.WhichOneof("payload") != "header":  # pragma: no cover - ingest-api sends it first
        call.cancel()
        return error_response(
            GatewayError(grpc.StatusCode.INTERNAL, "the download stream did not start with its header", "INTERNAL"), LABEL
        )

    if request.method == "HEAD":  # the headers alone (Starlette answers HEAD on a GET route)
        call.cancel()
        metrics.REQUESTS.labels(LABEL, "ok").inc()
        return Response(headers=download_headers(first.header))

    async def body() -> AsyncIterator[bytes]:
        try:
            while (message := await call.read()) is not grpc.aio.EOF:
                yield message.data
        finally:
            call.cancel()  # the client went away, or the stream ended: either way the call is done

    metrics.REQUESTS.labels(LABEL, "ok").inc()
    return StreamResponse(body(), headers=download_headers(first.header))


__all__ = ["content_disposition", "download", "download_headers"]
