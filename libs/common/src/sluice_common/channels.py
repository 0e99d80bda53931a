"""Client channels that carry an API key (and TLS when configured), sync and asyncio.

The key goes as `authorization: Bearer <key>` metadata on every call, added by a client
interceptor so it works over TLS and over plaintext on localhost alike (gRPC's call
credentials refuse plaintext channels). `key` may be a string, or a function of the full
method name for a client that holds several keys (tests; the dev runner).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence

import grpc

from . import tracing
from .tls import ClientTLS, secure_or_insecure_channel

KeySource = str | Callable[[str], str | None] | None
Metadata = list[tuple[str, str | bytes]]
# A gRPC channel option, e.g. ("grpc.lb_policy_name", "round_robin").
ChannelOption = tuple[str, object]
# grpc ships no type information: a client interceptor's continuation, as typed here.
Continuation = Callable[[grpc.ClientCallDetails, object], object]
AioContinuation = Callable[[grpc.aio.ClientCallDetails, object], Awaitable[object]]

# Per-call balancing over every address a name resolves to, for targets that name their
# resolver (`dns:///ingest-api:50051` behind a Kubernetes headless Service, `ipv4:a:p,b:p`):
# each pod gets its share of calls. A plain `host:port` keeps gRPC's default pick_first,
# which reconnects on the next call after a restart instead of failing fast during
# round_robin's reconnect backoff (what a single local server wants). A caller's own lb
# policy wins.
ROUND_ROBIN = ("grpc.lb_policy_name", "round_robin")
BALANCED_SCHEMES = ("dns:", "ipv4:", "ipv6:")


def _balanced(address: str, options: Iterable[ChannelOption] | None) -> list[ChannelOption]:
    options = list(options or ())
    chosen = any(name in ("grpc.lb_policy_name", "grpc.service_config") for name, _ in options)
    if address.startswith(BALANCED_SCHEMES) and not chosen:
        options.append(ROUND_ROBIN)
    return options


def _metadata(
    key: KeySource, method: str, metadata: Iterable[tuple[str, str | bytes]] | None, extra: Sequence[tuple[str, str]]
) -> Metadata:
    value = key(method) if callable(key) else key
    items: Metadata = list(metadata or ())
    if value:
        items.append(("authorization", f"Bearer {value}"))
    items.extend(extra)
    return items


def _method_name(method: str | bytes) -> str:
    return method.decode() if isinstance(method, bytes) else method


# grpc ships no type information: its interceptor bases are Any (hence the ignores).
class _SyncKey(
    grpc.UnaryUnaryClientInterceptor,  # type: ignore[misc]
    grpc.UnaryStreamClientInterceptor,  # type: ignore[misc]
    grpc.StreamUnaryClientInterceptor,  # type: ignore[misc]
    grpc.StreamStreamClientInterceptor,  # type: ignore[misc]
):
    def __init__(self, key: KeySource, extra: Sequence[tuple[str, str]]) -> None:
        self.key = key
        self.extra = tuple(extra)

    def _details(self, details: grpc.ClientCallDetails) -> _CallDetails:
        metadata = _metadata(self.key, _method_name(details.method), details.metadata, self.extra)
        return _CallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(self, continuation: Continuation, details: grpc.ClientCallDetails, request: object) -> object:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Continuation, details: grpc.ClientCallDetails, request: object) -> object:
        return continuation(self._details(details), request)

    def intercept_stream_unary(
        self, continuation: Continuation, details: grpc.ClientCallDetails, request_iterator: Iterator[object]
    ) -> object:
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(
        self, continuation: Continuation, details: grpc.ClientCallDetails, request_iterator: Iterator[object]
    ) -> object:
        return continuation(self._details(details), request_iterator)


class _CallDetails(grpc.ClientCallDetails):  # type: ignore[misc]  # grpc ships no type information
    def __init__(
        self,
        method: str | bytes,
        timeout: float | None,
        metadata: Metadata,
        credentials: grpc.CallCredentials | None,
        wait_for_ready: bool | None,
        compression: grpc.Compression | None,
    ) -> None:
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


def _aio_details(
    key: KeySource, extra: Sequence[tuple[str, str]], details: grpc.aio.ClientCallDetails
) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(*_metadata(key, _method_name(details.method), details.metadata, extra))
    return grpc.aio.ClientCallDetails(details.method, details.timeout, metadata, details.credentials, details.wait_for_ready)


class _AioUnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]  # grpc ships no type information
    def __init__(self, key: KeySource, extra: Sequence[tuple[str, str]]) -> None:
        self.key, self.extra = key, tuple(extra)

    async def intercept_unary_unary(
        self, continuation: AioContinuation, details: grpc.aio.ClientCallDetails, request: object
    ) -> object:
        return await continuation(_aio_details(self.key, self.extra, details), request)


class _AioUnaryStream(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]  # grpc ships no type information
    def __init__(self, key: KeySource, extra: Sequence[tuple[str, str]]) -> None:
        self.key, self.extra = key, tuple(extra)

    async def intercept_unary_stream(
        self, continuation: AioContinuation, details: grpc.aio.ClientCallDetails, request: object
    ) -> object:
        return await continuation(_aio_details(self.key, self.extra, details), request)


class _AioStreamUnary(grpc.aio.StreamUnaryClientInterceptor):  # type: ignore[misc]  # grpc ships no type information
    def __init__(self, key: KeySource, extra: Sequence[tuple[str, str]]) -> None:
        self.key, self.extra = key, tuple(extra)

    async def intercept_stream_unary(
        self,
        continuation: AioContinuation,
        details: grpc.aio.ClientCallDetails,
        request_iterator: AsyncIterator[object] | Iterator[object],
    ) -> object:
        return await continuation(_aio_details(self.key, self.extra, details), request_iterator)


class _AioStreamStream(grpc.aio.StreamStreamClientInterceptor):  # type: ignore[misc]  # grpc ships no type information
    def __init__(self, key: KeySource, extra: Sequence[tuple[str, str]]) -> None:
        self.key, self.extra = key, tuple(extra)

    async def intercept_stream_stream(
        self,
        continuation: AioContinuation,
        details: grpc.aio.ClientCallDetails,
        request_iterator: AsyncIterator[object] | Iterator[object],
    ) -> object:
        return await continuation(_aio_details(self.key, self.extra, details), request_iterator)


def keyed_channel(
    address: str,
    key: KeySource,
    *,
    tls: ClientTLS | None = None,
    options: Iterable[ChannelOption] | None = None,
    extra_metadata: Sequence[tuple[str, str]] = (),
) -> grpc.Channel:
    """A sync channel whose every call carries `key` (and `extra_metadata`)."""
    channel = secure_or_insecure_channel(address, tls or ClientTLS(), _balanced(address, options))
    return tracing.traced_channel(grpc.intercept_channel(channel, _SyncKey(key, extra_metadata)))


def keyed_aio_channel(
    address: str,
    key: KeySource,
    *,
    tls: ClientTLS | None = None,
    options: Iterable[ChannelOption] | None = None,
    extra_metadata: Sequence[tuple[str, str]] = (),
) -> grpc.aio.Channel:
    """An asyncio channel whose every call carries `key` (and `extra_metadata`)."""
    extra = tuple(extra_metadata)
    interceptors = [
        _AioUnaryUnary(key, extra),
        _AioUnaryStream(key, extra),
        _AioStreamUnary(key, extra),
        _AioStreamStream(key, extra),
        *tracing.aio_client_interceptors(),
    ]
    tls = tls or ClientTLS()
    options = _balanced(address, options)
    if tls.enabled:
        return grpc.aio.secure_channel(address, tls.credentials(), options=options, interceptors=interceptors)
    return grpc.aio.insecure_channel(address, options=options, interceptors=interceptors)


def key_for_role(keys: dict[str, str]) -> Callable[[str], str | None]:
    """A key source for a holder of several keys: the worker key for JobService, the admin
    key for AdminService, the client key for everything else."""

    def choose(method: str) -> str | None:
        if method.startswith("/sluice.v1.JobService/"):
            return keys.get("worker")
        if method.startswith("/sluice.v1.AdminService/"):
            return keys.get("admin")
        return keys.get("client")

    return choose


__all__ = ["key_for_role", "keyed_aio_channel", "keyed_channel"]
