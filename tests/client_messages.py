"""Every message a client can read, in every test of the suite, is scanned for server
internals: a path, a traceback, an object address, SQL or a secret (issue 21; the rule is in
docs/operations.md, What a client is told).

A pytest plugin (tests/conftest.py loads it). Every gRPC channel a test process opens, sync
or asyncio, by a test, a fixture, the Python SDK, the CLI run in-process or the gateway in its
thread, gets a client interceptor that scans, for the public services:

- every failed call: its status message and every string of its rich error details;
- every answer and every streamed message: the fields that carry a readable error
  (`error_message`, `last_error`, `disabled_reason`, `message`), wherever they are nested
  (a document's error and its attempts', a generation's failures, a source run's, a webhook
  delivery's, a rerank's).

The gateway's HTTP errors are scanned as httpx reads them (`message`, `error_msg`, `detail`).
JobService is left out: it is the worker's channel to ingest-api, not a client's, and what the
worker reports there is what ingest-api must clean before a client reads it.

Text the client sent itself (any string of a request to a public service, in this process,
four characters or longer) is not the server's: an error that quotes the folder a source was
given, or the name a test typed, is not a leak. What is found fails the test that was running
(an error at its teardown), with the message and the finding; a test that means to show
internals to the scan itself (the scanner's own test) carries `@pytest.mark.shows_internals`.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterable
from typing import Any

import grpc
import grpc.aio
import pytest
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status
from sluice_common.worker_errors import internals_in

SCANNED_FIELDS = frozenset({"error_message", "last_error", "disabled_reason", "message"})
HTTP_FIELDS = frozenset({"message", "error_msg", "detail", "error"})
NOT_A_CLIENTS = ("/sluice.v1.JobService/",)
SENT_MIN_CHARS = 4

_lock = threading.Lock()
_findings: list[str] = []
_sent: set[str] = set()


# What a client reads ------------------------------------------------------------------------


def client_visible_texts(item: Any) -> list[str]:
    """The texts a client can read in a failed call (the status message and every string of
    its rich details) or in a protobuf message (its error fields, nested ones included)."""
    if isinstance(item, grpc.RpcError):
        texts = [_safely(item, "details") or ""]
        for key, value in _safely(item, "trailing_metadata") or ():
            if key == rpc_status.GRPC_DETAILS_METADATA_KEY:
                status = status_pb2.Status.FromString(value)
                texts.append(status.message)
                for detail in status.details:
                    texts.extend(strings_of(_unpacked(detail)))
        return texts
    return list(_error_fields(item))


def assert_fit_for_client(item: Any) -> None:
    found = [f"{text[:200]!r}: {', '.join(internals_in(text))}" for text in client_visible_texts(item) if internals_in(text)]
    assert not found, "a client-visible message carries server internals:\n" + "\n".join(found)


def strings_of(message: Any) -> list[str]:
    """Every string field of a protobuf message, nested ones and map values included."""
    out: list[str] = []
    for field, value in message.ListFields():
        for item in _values(field, value):
            if isinstance(item, str):
                out.append(item)
            elif hasattr(item, "ListFields"):
                out.extend(strings_of(item))
    return out


def _error_fields(message: Any) -> Iterable[str]:
    for field, value in message.ListFields():
        for item in _values(field, value):
            if isinstance(item, str):
                if field.name in SCANNED_FIELDS and item:
                    yield item
            elif hasattr(item, "ListFields"):
                yield from _error_fields(item)


def _values(field: Any, value: Any) -> list[Any]:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return list(value.values())
    if isinstance(value, (str, bytes)) or hasattr(value, "ListFields"):
        return [value]
    try:
        return list(value)  # a repeated field
    except TypeError:
        return [value]


def _unpacked(detail: Any) -> Any:
    """A google.rpc error detail (ErrorInfo, BadRequest, RetryInfo, …) out of its Any."""
    name = detail.type_url.rsplit("/", 1)[-1].rsplit(".", 1)[-1]
    message = getattr(error_details_pb2, name, None)
    assert message is not None, f"an error detail of an unknown type: {detail.type_url}"
    unpacked = message()
    assert detail.Unpack(unpacked)
    return unpacked


def _safely(error: Any, name: str) -> Any:
    try:
        return getattr(error, name)()
    except Exception:  # a call that failed before it had a status
        return None


# Recording ----------------------------------------------------------------------------------


def _record_sent(details: Any, request: Any) -> None:
    """What the client sent: the request's strings, and the method it named."""
    texts = [_method(details), *(strings_of(request) if hasattr(request, "ListFields") else ())]
    # A server quotes a name as it read it, stripped and taken apart (names.py: the ID of
    # `collections/c/sources/ID`): still the client's own text.
    texts += [form for text in texts[1:] for form in (text.strip(), text.strip().rsplit("/", 1)[-1])]
    # A server message quotes what it was sent with repr(): `'\x02\x82O'` for bytes a fuzzer sent
    # raw is the client's own text too (and long enough to be told apart), not a path of the server's.
    forms = [form for text in texts for form in {text, repr(text)[1:-1]}]
    with _lock:
        _sent.update(form for form in forms if len(form) >= SENT_MIN_CHARS)


def _without_sent(text: str) -> str:
    """`text` with what the client sent replaced by a word (a quoted folder then reads as
    `sent/b.md`, not as a path of the server's)."""
    with _lock:
        sent = sorted((s for s in _sent if s in text), key=len, reverse=True)
    for item in sent:
        text = text.replace(item, "sent")
    return text


def _scan(where: str, texts: Iterable[str]) -> None:
    for text in texts:
        if not text or not internals_in(text):
            continue
        found = internals_in(_without_sent(text))  # the client's own text taken out
        if found:
            with _lock:
                _findings.append(f"{where}: {text[:300]!r}: {', '.join(found)}")


def _scan_item(method: str, item: Any) -> None:
    try:
        texts = client_visible_texts(item)
    except Exception as error:  # an error detail the scan cannot read is a finding too
        texts = [f"unreadable error details ({type(error).__name__})"]
        with _lock:
            _findings.append(f"{method}: {texts[0]}")
        return
    _scan(method, texts)


def _method(details: Any) -> str:
    return details.method if isinstance(details.method, str) else details.method.decode()


def _public(details: Any) -> bool:
    return not _method(details).startswith(NOT_A_CLIENTS)


# Sync channels ------------------------------------------------------------------------------


class _SyncScanner(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        if not _public(details):
            return continuation(details, request)
        _record_sent(details, request)
        return self._checked_outcome(_method(details), continuation(details, request))

    def intercept_stream_unary(self, continuation: Any, details: Any, request_iterator: Any) -> Any:
        if not _public(details):
            return continuation(details, request_iterator)
        return self._checked_outcome(_method(details), continuation(details, _recording(details, request_iterator)))

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        if not _public(details):
            return continuation(details, request)
        _record_sent(details, request)
        return _CheckedStream(_method(details), continuation(details, request))

    def intercept_stream_stream(self, continuation: Any, details: Any, request_iterator: Any) -> Any:
        if not _public(details):
            return continuation(details, request_iterator)
        return _CheckedStream(_method(details), continuation(details, _recording(details, request_iterator)))

    @staticmethod
    def _checked_outcome(method: str, outcome: Any) -> Any:
        def check(future: Any) -> None:
            if future.cancelled():
                return
            error = future.exception()
            _scan_item(method, error if error is not None else future.result())

        outcome.add_done_callback(check)  # now for a finished call, when done for a future
        return outcome


def _recording(details: Any, requests: Any) -> Any:
    for request in requests:
        _record_sent(details, request)
        yield request


class _CheckedStream:
    """A streaming call whose messages and error are scanned as the caller reads them."""

    def __init__(self, method: str, call: Any) -> None:
        self._method = method
        self._call = call

    def __getattr__(self, name: str) -> Any:  # cancel(), code(), is_active(), …
        return getattr(self._call, name)

    def __iter__(self) -> _CheckedStream:
        return self

    def __next__(self) -> Any:
        try:
            item = next(self._call)
        except grpc.RpcError as error:
            _scan_item(self._method, error)
            raise
        _scan_item(self._method, item)
        return item


# Asyncio channels ---------------------------------------------------------------------------


class _AioUnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        call = await continuation(details, request)
        if _public(details):
            _record_sent(details, request)
            await _await_checked(_method(details), call)
        return call


class _AioStreamUnary(grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation: Any, details: Any, request_iterator: Any) -> Any:
        call = await continuation(details, request_iterator)
        if _public(details):
            await _await_checked(_method(details), call)
        return call


async def _await_checked(method: str, call: Any) -> None:
    try:
        response = await call
    except grpc.RpcError as error:
        _scan_item(method, error)
    else:
        _scan_item(method, response)


class _AioUnaryStream(grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        call = await continuation(details, request)
        if not _public(details):
            return call
        _record_sent(details, request)
        return _AioCheckedStream(_method(details), call)


class _AioCheckedStream(grpc.aio.UnaryStreamCall):  # type: ignore[misc]
    """An asyncio streaming call whose messages and error are scanned as they are read
    (by `async for` or by `read()`, which the gateway uses)."""

    def __init__(self, method: str, call: Any) -> None:
        self._method = method
        self._call = call

    async def read(self) -> Any:
        try:
            item = await self._call.read()
        except grpc.RpcError as error:
            _scan_item(self._method, error)
            raise
        if item is not grpc.aio.EOF:
            _scan_item(self._method, item)
        return item

    def __aiter__(self) -> Any:
        return self._iterate()

    async def _iterate(self) -> Any:
        try:
            async for item in self._call:
                _scan_item(self._method, item)
                yield item
        except grpc.RpcError as error:
            _scan_item(self._method, error)
            raise

    def cancel(self) -> bool:
        return bool(self._call.cancel())

    def cancelled(self) -> bool:
        return bool(self._call.cancelled())

    def done(self) -> bool:
        return bool(self._call.done())

    def add_done_callback(self, callback: Any) -> None:
        self._call.add_done_callback(lambda _call: callback(self))

    def time_remaining(self) -> Any:
        return self._call.time_remaining()

    async def initial_metadata(self) -> Any:
        return await self._call.initial_metadata()

    async def trailing_metadata(self) -> Any:
        return await self._call.trailing_metadata()

    async def code(self) -> Any:
        return await self._call.code()

    async def details(self) -> Any:
        return await self._call.details()

    async def wait_for_connection(self) -> None:
        await self._call.wait_for_connection()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


def _aio_interceptors() -> list[Any]:
    return [_AioUnaryUnary(), _AioStreamUnary(), _AioUnaryStream()]


# HTTP (the gateway) -------------------------------------------------------------------------


def _scan_http(request: Any, response: Any) -> None:
    if response.status_code < 400 or "json" not in response.headers.get("content-type", ""):
        return
    try:
        body = json.loads(response.content)
        sent = json.loads(request.content) if request.content else None
    except (ValueError, UnicodeDecodeError):
        return
    with _lock:
        _sent.update(s for s in [*_json_strings(sent, None), request.url.path] if len(s) >= SENT_MIN_CHARS)
        _sent.update(v for _, v in request.url.params.multi_items() if len(v) >= SENT_MIN_CHARS)
    _scan(f"HTTP {request.method} {request.url.path}", _json_strings(body, HTTP_FIELDS))


def _json_strings(value: Any, keys: frozenset[str] | None, key: str | None = None) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _json_strings(v, keys, k)]
    if isinstance(value, list):
        return [s for v in value for s in _json_strings(v, keys, key)]
    if isinstance(value, str) and (keys is None or key in keys):
        return [value]
    return []


# The CLI's output -----------------------------------------------------------------------------

_CLI_FINDINGS = ("a traceback", "an object address")


def scan_cli_output(args: Iterable[str], *outputs: str) -> None:
    """What `sluice ARGS…` printed (in-process or as its own process, tests/cli/conftest.py):
    never a traceback nor an object address. Paths and keys are the CLI's to print (the files
    it uploads, the key `keys create` made), so only those two are looked for here."""
    where = "sluice " + " ".join(str(arg) for arg in args)[:120]
    for output in outputs:
        for line in _paragraphs(output):
            found = [finding for finding in internals_in(line) if finding.startswith(_CLI_FINDINGS)]
            if found:
                with _lock:
                    _findings.append(f"{where}: {line[:300]!r}: {', '.join(found)}")


def _paragraphs(output: str) -> list[str]:
    return [part for part in output.split("\n\n") if part.strip()]


# Installing ---------------------------------------------------------------------------------


def install() -> None:
    """Every channel opened after this scans what it reads (idempotent)."""
    if getattr(grpc, "_sluice_scanned", False):
        return
    grpc._sluice_scanned = True  # type: ignore[attr-defined]
    sync_insecure, sync_secure = grpc.insecure_channel, grpc.secure_channel
    aio_insecure, aio_secure = grpc.aio.insecure_channel, grpc.aio.secure_channel

    @functools.wraps(sync_insecure)
    def insecure_channel(*args: Any, **kwargs: Any) -> Any:
        return grpc.intercept_channel(sync_insecure(*args, **kwargs), _SyncScanner())

    @functools.wraps(sync_secure)
    def secure_channel(*args: Any, **kwargs: Any) -> Any:
        return grpc.intercept_channel(sync_secure(*args, **kwargs), _SyncScanner())

    @functools.wraps(aio_insecure)
    def aio_insecure_channel(target: str, options: Any = None, compression: Any = None, interceptors: Any = None) -> Any:
        return aio_insecure(target, options, compression, [*(interceptors or ()), *_aio_interceptors()])

    @functools.wraps(aio_secure)
    def aio_secure_channel(
        target: str, credentials: Any, options: Any = None, compression: Any = None, interceptors: Any = None
    ) -> Any:
        return aio_secure(target, credentials, options, compression, [*(interceptors or ()), *_aio_interceptors()])

    grpc.insecure_channel, grpc.secure_channel = insecure_channel, secure_channel
    grpc.aio.insecure_channel, grpc.aio.secure_channel = aio_insecure_channel, aio_secure_channel

    try:
        import httpx
    except ImportError:
        return
    sync_send, async_send = httpx.Client.send, httpx.AsyncClient.send

    @functools.wraps(sync_send)
    def send(self: Any, request: Any, **kwargs: Any) -> Any:
        response = sync_send(self, request, **kwargs)
        if not kwargs.get("stream"):
            _scan_http(request, response)
        return response

    @functools.wraps(async_send)
    async def async_send_scanned(self: Any, request: Any, **kwargs: Any) -> Any:
        response = await async_send(self, request, **kwargs)
        if not kwargs.get("stream"):
            _scan_http(request, response)
        return response

    httpx.Client.send = send  # type: ignore[method-assign]
    httpx.AsyncClient.send = async_send_scanned  # type: ignore[method-assign]


_reported = 0


def unreported() -> list[str]:
    """Findings not yet reported, and from now on reported."""
    global _reported
    with _lock:
        found, _reported = _findings[_reported:], len(_findings)
    return found


# The plugin ---------------------------------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "shows_internals: the test shows server internals to the scan on purpose (tests/client_messages.py)"
    )
    install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """After a test and the fixtures torn down with it (all of them after the last test),
    what was found since the last test's teardown fails this one: its setup, its call, its
    teardown, or a module fixture set up for it."""
    result = yield
    found = unreported()
    if found and item.get_closest_marker("shows_internals") is None:
        pytest.fail(
            "a message a client can read carries server internals (tests/client_messages.py):\n" + "\n".join(found),
            pytrace=False,
        )
    return result
