"""The Connect protocol's unary shape for every unary RPC, server streams as Connect streams
or server-sent events, and uploads from a raw HTTP body (docs/http.md)."""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import grpc
from google.protobuf import json_format, message
from google.protobuf.descriptor import FieldDescriptor
from sluice.v1 import document_service_pb2 as ds
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from . import codec, metrics
from .backends import Backends, credentials_refusal, forwarded_metadata
from .codec import to_json
from .errors import GatewayError, connect_code, describe
from .methods import METHODS, UPLOAD, Method
from .metrics import UNKNOWN

JSON_TYPES = ("application/json", "")
PROTO_TYPE = "application/proto"
CONNECT_STREAM_JSON = "application/connect+json"
CONNECT_STREAM_PROTO = "application/connect+proto"
CONNECT_STREAM_TYPES = (CONNECT_STREAM_JSON, CONNECT_STREAM_PROTO)
COMPRESSED = 0x01  # envelope flags (the Connect protocol)
END_STREAM = 0x02
UPLOAD_PIECE = 256 * 1024  # bytes per data message of an upload
# An upload body up to this size is read whole before it is sent, so that it can be sent again:
# when ingest-api ends an upload before the gateway has written all of it (a missing key, a full
# gate, an unknown collection), grpc's asyncio client can report its own INTERNAL "Internal error
# from Core" instead of ingest-api's status (grpc/grpc#36066: a failed write overwrites the status
# that already arrived). A refused upload stored nothing, so sending it again is safe, and the
# next attempt almost always gets the real status. Larger bodies are streamed as they arrive and
# get UPLOAD_ENDED_EARLY (UNAVAILABLE) instead of a bare INTERNAL.
UPLOAD_RESENDABLE_BYTES = 1024 * 1024
UPLOAD_ATTEMPTS = 4
LOST_STATUS_DETAILS = "Internal error from Core"
SHA256_HEX = re.compile(r"^[0-9a-fA-F]{64}$")
URLSAFE_TO_STANDARD = str.maketrans("-_", "+/")  # the Connect protocol says URL-safe; either is taken


_NUMBERS = frozenset((int, float))
_INTEGERS = (
    FieldDescriptor.CPPTYPE_INT32,
    FieldDescriptor.CPPTYPE_INT64,
    FieldDescriptor.CPPTYPE_UINT32,
    FieldDescriptor.CPPTYPE_UINT64,
)


@dataclass(frozen=True)
class _Shape:
    """What parse_json copies without json_format for one message type: its top-level repeated
    float and double fields, as (name, json_name), and its top-level singular string, integer,
    bool and enum fields outside any oneof, by JSON name, as (name, the JSON type taken, the
    enum's numbers by name)."""

    float_lists: tuple[tuple[str, str], ...]
    scalars: dict[str, tuple[str, type, dict[str, int] | None]]


def _shape(descriptor: Any) -> _Shape:
    kinds = (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE)
    float_lists = tuple((f.name, f.json_name) for f in descriptor.fields if f.is_repeated and f.type in kinds)
    scalars: dict[str, tuple[str, type, dict[str, int] | None]] = {}
    for f in descriptor.fields:
        if f.is_repeated or f.message_type is not None or f.containing_oneof is not None:
            continue  # a oneof's members too: json_format refuses two of them, setattr would not
        if f.cpp_type == FieldDescriptor.CPPTYPE_STRING and f.type == FieldDescriptor.TYPE_STRING:
            scalars[f.json_name] = (f.name, str, None)
        elif f.cpp_type in _INTEGERS:
            scalars[f.json_name] = (f.name, int, None)
        elif f.cpp_type == FieldDescriptor.CPPTYPE_BOOL:
            scalars[f.json_name] = (f.name, bool, None)
        elif f.cpp_type == FieldDescriptor.CPPTYPE_ENUM and f.enum_type.full_name != "google.protobuf.NullValue":
            scalars[f.json_name] = (f.name, str, {v.name: v.number for v in f.enum_type.values})
    return _Shape(float_lists, scalars)


SHAPES: dict[str, _Shape] = {}


def parse_json(body: bytes, msg: message.Message) -> None:
    """The protobuf JSON mapping into `msg`, in two parts (docs/http.md, "Speed"). A query vector
    (a top-level list of plain numbers) is copied in directly: json_format checks each of its
    384 floats in Python, which was 3 ms of a 10 ms search. When every other key is the JSON name
    of a plain top-level field with a value of its own JSON type (a string, an integer, a
    boolean, an enum's name), those are set directly too, since json_format spends more time
    deciding than setting; protobuf still checks each value (an integer out of range, say), and
    anything unusual (a field's proto name, a number given as a string, a nested message, a
    failed check) sends the whole document through json_format and its errors."""
    document = codec.loads(body) if body.strip() else {}
    if not isinstance(document, dict):
        raise ValueError("the body is a JSON object")
    descriptor = msg.DESCRIPTOR
    shape = SHAPES.get(descriptor.full_name)
    if shape is None:
        shape = SHAPES[descriptor.full_name] = _shape(descriptor)
    direct: list[tuple[str, list[float]]] = []
    for name, json_name in shape.float_lists:
        for key in (json_name, name):
            values = document.get(key)
            if isinstance(values, list) and set(map(type, values)) <= _NUMBERS:
                direct.append((name, values))
                del document[key]
                break
    if not _set_scalars(document, msg, shape):
        json_format.ParseDict(document, msg)
    for name, values in direct:
        getattr(msg, name).extend(values)


def _set_scalars(document: dict[str, Any], msg: message.Message, shape: _Shape) -> bool:
    """Every key of `document` set on `msg` directly, or nothing set and False (see parse_json)."""
    found = []
    for key, value in document.items():
        scalar = shape.scalars.get(key)
        if scalar is None or type(value) is not scalar[1]:
            return False
        found.append((scalar, value))
    try:
        for (name, _, numbers), value in found:
            if numbers is None:
                setattr(msg, name, value)
            elif value in numbers:
                setattr(msg, name, numbers[value])
            else:
                raise ValueError(value)
    except (TypeError, ValueError):
        msg.Clear()
        return False
    return True


def error_response(error: grpc.RpcError | GatewayError, method: str = UNKNOWN) -> JSONResponse:
    if isinstance(error, GatewayError):
        metrics.REQUESTS.labels(method, connect_code(error.code)).inc()
        return JSONResponse(error.body(), status_code=error.http_status)
    status, body, headers = describe(error)
    metrics.REQUESTS.labels(method, body["code"]).inc()
    return JSONResponse(body, status_code=status, headers=headers)


def sse(event: str, data: dict[str, Any], event_id: str = "") -> str:
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {event}\ndata: {codec.dumps(data).decode()}\n\n"


def envelope(flags: int, payload: bytes) -> bytes:
    """One message of a Connect stream: a flags byte, the payload's length (4 bytes, big-endian), the payload."""
    return bytes((flags,)) + len(payload).to_bytes(4, "big") + payload


def end_of_stream(error: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> bytes:
    """The Connect stream's last message: `{}` when it ended well, else `{"error": …}`; headers
    of the error (Retry-After) as its `metadata`."""
    body: dict[str, Any] = {}
    if error is not None:
        body["error"] = error
    if headers:
        body["metadata"] = {name.lower(): [value] for name, value in headers.items()}
    return envelope(END_STREAM, json.dumps(body, separators=(",", ":")).encode())


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


class StreamResponse(StreamingResponse):
    """A streaming answer that also listens for the client going away, whatever ASGI version the
    server speaks: on `http.disconnect` the body's generator is cancelled at its await (the
    backend read), and its `finally` cancels the gRPC call. Without this, Starlette under ASGI
    2.4 would only notice when a write failed, and an idle watch would hold its backend stream
    open for as long as it stayed idle (docs/http.md, "Server streams")."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async with anyio.create_task_group() as group:

            async def respond() -> None:
                with contextlib.suppress(OSError):
                    await self.stream_response(send)
                group.cancel_scope.cancel()

            group.start_soon(respond)
            await self.listen_for_disconnect(receive)
            group.cancel_scope.cancel()


def credentials_error(request: Request) -> GatewayError | None:
    """401 for a call whose key is missing or cannot be a key, decided before its body is read
    (backends.credentials_refusal)."""
    refusal = credentials_refusal(request.headers)
    return None if refusal is None else GatewayError(grpc.StatusCode.UNAUTHENTICATED, refusal[1], refusal[0])


# Compressions a Connect client may name; the gateway reads none of them (identity only).
KNOWN_COMPRESSIONS = frozenset({"gzip", "br", "zstd", "deflate", "snappy"})


class ConnectHandlers:
    def __init__(self, backends: Backends, *, call_timeout: float, max_json_bytes: int, get_max_age: int = 0) -> None:
        self.backends = backends
        self.call_timeout = call_timeout
        self.max_json_bytes = max_json_bytes
        self.get_max_age = get_max_age

    def timeout_of(self, request: Request) -> float:
        """Connect-Timeout-Ms when the caller sets one, else the gateway's default."""
        return self.stream_timeout_of(request) or self.call_timeout

    def stream_timeout_of(self, request: Request) -> float | None:
        """Connect-Timeout-Ms when the caller sets one (at most the unary default), else None:
        a stream lasts as long as its client stays."""
        header = request.headers.get("connect-timeout-ms", "")
        if header.isdigit() and 0 < int(header) < 10**10:
            return min(int(header) / 1000, self.call_timeout)
        return None

    async def body(self, request: Request) -> bytes:
        body = b""
        async for piece in request.stream():
            body += piece
            if len(body) > self.max_json_bytes:
                raise GatewayError(
                    grpc.StatusCode.RESOURCE_EXHAUSTED, f"request body over {self.max_json_bytes} bytes", "REQUEST_TOO_LARGE"
                )
        return body

    async def parse(self, request: Request, method: Method) -> message.Message:
        content_type = media_type(request)
        body = await self.body(request)
        if content_type == PROTO_TYPE:
            return decode_proto(body, method)
        if content_type not in JSON_TYPES:
            raise GatewayError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Content-Type {content_type!r} is not supported: send application/json (or application/proto)",
                "INVALID_BODY",
            )
        return decode_json(body, method)

    async def rpc(self, request: Request) -> Response:
        """POST /sluice.v1.<Service>/<Method>."""
        path = request.scope["path"]
        method = METHODS.get(path)
        if method is None:
            return error_response(
                GatewayError(grpc.StatusCode.NOT_FOUND, f"no such method: {path} (see /openapi.json)", "METHOD_NOT_FOUND")
            )
        if method == UPLOAD:
            return error_response(
                GatewayError(
                    grpc.StatusCode.UNIMPLEMENTED,
                    "UploadDocument is a client stream: POST the file as the body of /v1/collections/{collection}/documents "
                    "(docs/http.md, Uploads)",
                    "USE_UPLOAD_PATH",
                ),
                method.label,
            )
        if method.kind in ("client_stream", "bidi"):
            # A client stream is many messages; an HTTP body here is one (docs/http.md, "OpenAPI").
            return error_response(
                GatewayError(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"{method.label} is a client stream, which the gateway does not serve: call it over gRPC "
                    "(docs/http.md, OpenAPI)",
                    "CLIENT_STREAM_NOT_SERVED",
                ),
                method.label,
            )
        if media_type(request) in CONNECT_STREAM_TYPES:
            return await self.connect_stream(request, method)
        started = time.perf_counter()
        if (refusal := credentials_error(request)) is not None:
            return error_response(refusal, method.label)
        try:
            msg = await self.parse(request, method)
        except GatewayError as error:
            return error_response(error, method.label)
        if method.kind == "server_stream":
            return await self.sse_stream(request, method, msg)
        return await self.unary(request, method, msg, started, binary=media_type(request) == PROTO_TYPE)

    async def rpc_get(self, request: Request) -> Response:
        """GET /sluice.v1.<Service>/<Method>?encoding=json&message=…: a unary call in the Connect
        protocol's GET shape, for the methods marked NO_SIDE_EFFECTS (docs/http.md, "GET
        requests"). Nothing here is particular to one method: whatever the .proto marks is served,
        with the same key, tenant header, limits and errors as a POST; 405 for any other method."""
        method = METHODS[request.scope["path"]]
        started = time.perf_counter()
        refusal: Response | None = None
        if not method.takes_get:
            refusal = error_response(
                GatewayError(grpc.StatusCode.UNIMPLEMENTED, get_refusal(method), "GET_NOT_ALLOWED"), method.label
            )
            refusal.status_code = 405  # the Connect protocol's answer (connect-go's too), not 501
            refusal.headers["Allow"] = "POST"
        elif (unauthenticated := credentials_error(request)) is not None:
            refusal = error_response(unauthenticated, method.label)
        else:
            try:
                msg, binary = self.decode_get(request, method)
            except GatewayError as error:
                refusal = error_response(error, method.label)
        if refusal is not None:
            refusal.headers["Cache-Control"] = "no-store"
            return refusal
        response = await self.unary(request, method, msg, started, binary=binary)
        # A cache (the browser's, a proxy's, a CDN's) keys the answer by the URL, the key that
        # asked and the tenant an admin key named: one key's or tenant's results are never served
        # for another (docs/http.md, "GET requests").
        response.headers["Vary"] = "Authorization, X-Sluice-Tenant"
        if response.status_code == 200 and self.get_max_age > 0:
            response.headers["Cache-Control"] = f"max-age={self.get_max_age}, s-maxage={self.get_max_age}"
        else:
            response.headers["Cache-Control"] = "no-store"
        return response

    def decode_get(self, request: Request, method: Method) -> tuple[message.Message, bool]:
        """The request message of a Connect GET, and whether the answer is binary: `encoding`
        (json or proto), `message` (the message, percent-encoded, or URL-safe base64 with
        `base64=1`), `compression` (identity only) and `connect` (v1, when given)."""
        query = request.query_params
        version = query.get("connect")
        if version is not None and version != "v1":
            raise GatewayError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"connect={version!r} is not supported: use connect=v1",
                "UNSUPPORTED_PROTOCOL_VERSION",
            )
        encoding = query.get("encoding", "")
        if encoding not in ("json", "proto"):
            raise GatewayError(
                grpc.StatusCode.INVALID_ARGUMENT,
                "a GET names its encoding: ?encoding=json (or proto)&message=…",
                "INVALID_ENCODING",
            )
        compression = query.get("compression", "identity").lower()
        if compression != "identity":
            # A compression Connect clients may send is a feature this gateway lacks (501, as the
            # Connect protocol answers it); any other value is the caller's mistake (400), not a
            # server error (Schemathesis, tests/gateway/test_schemathesis.py).
            known = compression in KNOWN_COMPRESSIONS
            raise GatewayError(
                grpc.StatusCode.UNIMPLEMENTED if known else grpc.StatusCode.INVALID_ARGUMENT,
                f"compression {compression!r} is not supported: send the message uncompressed"
                + ("" if known else " (compression=identity, or leave it out)"),
                "UNSUPPORTED_ENCODING",
            )
        text = query.get("message", "")
        if len(text) > self.max_json_bytes:
            raise GatewayError(
                grpc.StatusCode.RESOURCE_EXHAUSTED, f"message over {self.max_json_bytes} bytes", "REQUEST_TOO_LARGE"
            )
        if query.get("base64") == "1":
            try:
                body = base64.b64decode(text.translate(URLSAFE_TO_STANDARD) + "=" * (-len(text) % 4), validate=True)
            except (binascii.Error, ValueError):
                raise GatewayError(
                    grpc.StatusCode.INVALID_ARGUMENT, "message is not base64 (URL-safe alphabet)", "INVALID_BASE64"
                ) from None
        else:
            body = text.encode()
        binary = encoding == "proto"
        return (decode_proto(body, method) if binary else decode_json(body, method)), binary

    async def unary(self, request: Request, method: Method, msg: message.Message, started: float, *, binary: bool) -> Response:
        """Forward one unary call and answer it, in JSON or (binary) protobuf."""
        parsed = time.perf_counter()
        try:
            reply = await self.backends.callable(method)(
                msg, metadata=forwarded_metadata(request.headers), timeout=self.timeout_of(request)
            )
        except grpc.RpcError as error:
            return error_response(error, method.label)
        answered = time.perf_counter()
        if binary:
            response: Response = Response(reply.SerializeToString(), media_type=PROTO_TYPE)
        else:
            response = Response(codec.dumps(to_json(reply)), media_type="application/json")
        done = time.perf_counter()
        # Where the time went, for a browser's network panel or `curl -v` (docs/http.md#speed).
        response.headers["Server-Timing"] = (
            f"parse;dur={(parsed - started) * 1000:.2f}, backend;dur={(answered - parsed) * 1000:.2f}, "
            f"encode;dur={(done - answered) * 1000:.2f}"
        )
        metrics.REQUESTS.labels(method.label, "ok").inc()
        metrics.LATENCY.labels(method.label).observe(done - started)
        return response

    def open_stream(self, request: Request, method: Method, msg: message.Message) -> Any:
        """The backend's server stream for `msg`, with the caller's key and Connect-Timeout-Ms.
        Last-Event-ID resumes a WatchCollection after that cursor (an explicit after_cursor wins)."""
        last_id = request.headers.get("last-event-id", "")
        if last_id and isinstance(msg, ds.WatchCollectionRequest) and not msg.after_cursor:
            msg.after_cursor = last_id
            msg.ClearField("start_from_oldest")
        return self.backends.callable(method)(
            msg, metadata=forwarded_metadata(request.headers), timeout=self.stream_timeout_of(request)
        )

    async def sse_stream(self, request: Request, method: Method, msg: message.Message) -> Response:
        """A server stream as server-sent events: `event: message` per message (`id:` the
        cursor where it has one, so Last-Event-ID resumes a WatchCollection), `event: error`
        with a Connect error if it fails midway, `event: end` when it ends. A failure before
        the first message is an ordinary JSON error with its HTTP status."""
        call = self.open_stream(request, method, msg)
        try:
            first = await call.read()
        except grpc.RpcError as error:
            return error_response(error, method.label)

        async def events() -> AsyncIterator[str]:
            item = first
            async with following(method, call) as outcome:
                try:
                    while item is not grpc.aio.EOF:
                        yield sse("message", to_json(item), getattr(item, "cursor", ""))
                        item = await call.read()
                    yield sse("end", {})
                except grpc.RpcError as error:
                    body = describe(error)[1]
                    outcome.append(body["code"])
                    yield sse("error", body)

        return StreamResponse(
            events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )

    async def connect_stream(self, request: Request, method: Method) -> Response:
        """A server stream in the Connect protocol (`application/connect+json` or `+proto`):
        the request is one enveloped message, the answer is 200 with one enveloped message per
        stream message and an end-of-stream message (flag 0x02) carrying the error, if any, and
        its metadata. Every failure, a bad request included, is in that last message."""
        content_type = media_type(request)
        binary = content_type == CONNECT_STREAM_PROTO
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        try:
            if method.kind != "server_stream":
                raise GatewayError(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"{method.label} is not a server stream: call it with Content-Type application/json",
                    "NOT_A_STREAM",
                )
            if (unauthenticated := credentials_error(request)) is not None:
                raise unauthenticated
            encoding = request.headers.get("connect-content-encoding", "identity").lower()
            if encoding != "identity":
                raise GatewayError(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"Connect-Content-Encoding {encoding!r} is not supported: send messages uncompressed",
                    "UNSUPPORTED_ENCODING",
                )
            msg = decode_envelope(await self.body(request), method, binary)
        except GatewayError as error:
            metrics.REQUESTS.labels(method.label, connect_code(error.code)).inc()
            return Response(end_of_stream(error.body()), media_type=content_type, headers=headers)
        call = self.open_stream(request, method, msg)

        async def frames() -> AsyncIterator[bytes]:
            async with following(method, call) as outcome:
                try:
                    while (item := await call.read()) is not grpc.aio.EOF:
                        payload = item.SerializeToString() if binary else codec.dumps(to_json(item))
                        yield envelope(0, payload)
                    yield end_of_stream()
                except grpc.RpcError as error:
                    _, body, error_headers = describe(error)
                    outcome.append(body["code"])
                    yield end_of_stream(body, error_headers)

        return StreamResponse(frames(), media_type=content_type, headers=headers)

    async def upload(self, request: Request) -> Response:
        """POST /v1/collections/{collection}/documents: the raw file as the body."""
        if (refusal := credentials_error(request)) is not None:
            return error_response(refusal, "upload")
        try:
            metadata = upload_metadata(request)
        except GatewayError as error:
            return error_response(error, "upload")
        length = request.headers.get("content-length", "")
        body: bytes | None = None
        if length.isdigit() and int(length) <= UPLOAD_RESENDABLE_BYTES:
            try:
                body = await request.body()
            except ClientDisconnect:
                return error_response(
                    GatewayError(grpc.StatusCode.CANCELLED, "the client went away during the upload", "UPLOAD_INCOMPLETE"),
                    "upload",
                )

        async def messages() -> AsyncIterator[ds.UploadDocumentRequest]:
            yield ds.UploadDocumentRequest(metadata=metadata)
            digest, size, buffer = hashlib.sha256(), 0, bytearray()
            try:
                async for piece in _pieces(request, body):
                    digest.update(piece)
                    size += len(piece)
                    buffer += piece
                    while len(buffer) >= UPLOAD_PIECE:
                        yield ds.UploadDocumentRequest(data=bytes(buffer[:UPLOAD_PIECE]))
                        del buffer[:UPLOAD_PIECE]
            except ClientDisconnect:
                return  # no trailer: ingest-api stores nothing (UPLOAD_INCOMPLETE)
            if buffer:
                yield ds.UploadDocumentRequest(data=bytes(buffer))
            # The gateway's own count and hash of what it received; the client's sha256 (if
            # any) went in the metadata, so a mismatch is refused as CHECKSUM_MISMATCH.
            yield ds.UploadDocumentRequest(trailer=ds.UploadDocumentTrailer(size_bytes=size, sha256=digest.hexdigest()))

        for attempt in range(1, UPLOAD_ATTEMPTS + 1):
            try:
                document = await self.backends.callable(UPLOAD)(messages(), metadata=forwarded_metadata(request.headers))
                break
            except grpc.RpcError as error:
                if not _status_lost(error):
                    return error_response(error, "upload")
                if body is None or attempt == UPLOAD_ATTEMPTS:
                    return error_response(
                        GatewayError(
                            grpc.StatusCode.UNAVAILABLE,
                            "ingest-api ended the upload before the gateway had sent all of it, and its reason was lost"
                            " on the way (grpc/grpc#36066); nothing was stored: send the file again",
                            "UPLOAD_ENDED_EARLY",
                        ),
                        "upload",
                    )
        metrics.REQUESTS.labels("upload", "ok").inc()
        return JSONResponse(to_json(document))


async def _pieces(request: Request, body: bytes | None) -> AsyncIterator[bytes]:
    """The upload's body: from memory when it was read whole, else as the client sends it."""
    if body is None:
        async for piece in request.stream():
            yield piece
    elif body:
        yield body


def _status_lost(error: grpc.RpcError) -> bool:
    """grpc's asyncio client's own INTERNAL in place of the server's status (grpc/grpc#36066)."""
    code = getattr(error, "code", None)
    details = getattr(error, "details", None)
    return callable(code) and code() == grpc.StatusCode.INTERNAL and callable(details) and details() == LOST_STATUS_DETAILS


def get_refusal(method: Method) -> str:
    """Why `method` takes no GET, and what to send instead."""
    if method.kind == "server_stream":
        # The Connect protocol has GET for unary calls only.
        return (
            f"{method.label} is a server stream: POST it (server-sent events or a Connect stream); "
            "only unary methods marked NO_SIDE_EFFECTS take GET (see /openapi.json)"
        )
    return f"{method.label} has side effects: call it with POST (only methods marked NO_SIDE_EFFECTS take GET; see /openapi.json)"


@contextlib.asynccontextmanager
async def following(method: Method, call: Any) -> AsyncIterator[list[str]]:
    """Book-keeping of one forwarded stream: open in the gauge while it runs; counted with its
    outcome (`ok`, the error's code appended by the caller, or `cancelled` when the HTTP
    client went away); the backend call cancelled whatever happened, so no stream outlives
    its client."""
    outcome: list[str] = []
    metrics.STREAMS_OPEN.labels(method.label).inc()
    try:
        yield outcome
    except BaseException:  # the client went away (cancelled), or the server is stopping
        outcome.append("cancelled")
        metrics.STREAMS_CANCELLED.labels(method.label).inc()
        raise
    finally:
        call.cancel()
        metrics.STREAMS_OPEN.labels(method.label).dec()
        metrics.REQUESTS.labels(method.label, outcome[0] if outcome else "ok").inc()


def decode_proto(body: bytes, method: Method) -> message.Message:
    msg = method.request_class()
    try:
        msg.ParseFromString(body)
    except message.DecodeError as error:
        raise GatewayError(
            grpc.StatusCode.INVALID_ARGUMENT, f"the body is not a {msg.DESCRIPTOR.full_name}: {error}", "INVALID_BODY"
        ) from None
    return msg


def decode_json(body: bytes, method: Method) -> message.Message:
    msg = method.request_class()
    try:
        parse_json(body, msg)
    except (json_format.ParseError, ValueError) as error:
        raise GatewayError(
            grpc.StatusCode.INVALID_ARGUMENT, f"the body is not a JSON {msg.DESCRIPTOR.full_name}: {error}", "INVALID_JSON"
        ) from None
    return msg


def decode_envelope(body: bytes, method: Method, binary: bool) -> message.Message:
    """The one enveloped request message of a Connect server stream."""
    if len(body) < 5:
        raise GatewayError(
            grpc.StatusCode.INVALID_ARGUMENT,
            "a Connect stream request is one enveloped message (flags, 4-byte length, message)",
            "INVALID_ENVELOPE",
        )
    flags, length = body[0], int.from_bytes(body[1:5], "big")
    if flags & COMPRESSED:
        raise GatewayError(
            grpc.StatusCode.UNIMPLEMENTED, "compressed messages are not supported: send them uncompressed", "UNSUPPORTED_ENCODING"
        )
    if flags != 0 or len(body) != 5 + length:
        raise GatewayError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"a Connect stream request is exactly one enveloped message ({len(body)} bytes, the envelope announces {length} + 5)",
            "INVALID_ENVELOPE",
        )
    payload = body[5:]
    return decode_proto(payload, method) if binary else decode_json(payload, method)


# Content-Types that say nothing of the file: ingest-api detects its type from the name and bytes.
# curl's --data-binary sends application/x-www-form-urlencoded unless told otherwise, and a form
# encoding is never a document's type (docs/http.md, "Uploads").
UNTYPED_BODIES = frozenset({"", "application/octet-stream", "application/x-www-form-urlencoded"})


def upload_metadata(request: Request) -> ds.UploadDocumentMetadata:
    """The upload's first message from the path, the query and the headers (docs/http.md, Uploads)."""
    query, headers = request.query_params, request.headers
    filename = (
        query.get("filename") or headers.get("x-sluice-filename") or _disposition_filename(headers.get("content-disposition", ""))
    )
    if not filename:
        raise GatewayError(
            grpc.StatusCode.INVALID_ARGUMENT,
            "name the file: ?filename=report.pdf (or an X-Sluice-Filename header)",
            "FILENAME_MISSING",
        )
    content_type = headers.get("content-type", "").split(";")[0].strip()
    mime_type = query.get("mime_type") or ("" if content_type.lower() in UNTYPED_BODIES else content_type)
    sha256 = query.get("sha256") or headers.get("x-sluice-sha256", "")
    if sha256 and not SHA256_HEX.match(sha256):
        raise GatewayError(grpc.StatusCode.INVALID_ARGUMENT, "sha256 must be 64 hex digits", "INVALID_CHECKSUM")
    length = headers.get("content-length", "")
    metadata = ds.UploadDocumentMetadata(
        collection=request.path_params["collection"],
        filename=filename,
        mime_type=mime_type,
        request_id=query.get("request_id") or headers.get("idempotency-key", ""),
        expected_sha256=sha256.lower(),
        expected_size_bytes=int(length) if length.isdigit() else 0,
    )
    for key, value in query.multi_items():
        if key.startswith("metadata."):
            metadata.metadata[key.removeprefix("metadata.")] = value
    typed = query.get("typed_metadata") or headers.get("x-sluice-typed-metadata", "")
    if typed:
        try:
            parsed = json_format.Parse(json.dumps({"typedMetadata": json.loads(typed)}), ds.UploadDocumentMetadata())
        except (ValueError, json_format.ParseError) as error:
            raise GatewayError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"typed_metadata is not a JSON map of MetadataValue: {error}",
                "INVALID_METADATA",
            ) from None
        metadata.MergeFrom(parsed)
    return metadata


def _disposition_filename(disposition: str) -> str:
    found = re.search(r'filename="?([^";]+)"?', disposition)
    return found.group(1) if found else ""
