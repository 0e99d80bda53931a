"""The one server interceptor in front of every method of ingest-api and search.

It admits each call through the Guard (key, role, tenant, rate limit) and makes the caller's
Principal available to the servicer through `current_principal()`. Health checks (for probes)
and reflection (unless turned off) need no key. It also answers a message that cannot be
decoded (invalid UTF-8 in a string field) with INVALID_ARGUMENT instead of gRPC's INTERNAL and a
traceback.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TypeAlias

import grpc

from ..errors import InvalidArgument, SluiceError, abort, status_of_unexpected, to_grpc_status
from ..reasons import Reason
from .access import METHOD_ROLES, OPEN_SERVICES, REFLECTION_SERVICES, Role
from .directory import KeyDirectory
from .guard import Guard
from .principal import Principal, _current
from .rate_limit import RateLimiter

log = logging.getLogger("sluice.auth")


class _Malformed:
    """Stands in for a request message that could not be decoded."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


# grpc ships no type information; these say what passes through a handler here.
Deserializer = Callable[[bytes], object]
Context: TypeAlias = grpc.aio.ServicerContext


def _safe_deserializer(deserialize: Deserializer | None) -> Deserializer | None:
    if deserialize is None:
        return None

    def wrapped(data: bytes) -> object:
        try:
            return deserialize(data)
        except Exception as exc:  # DecodeError, invalid UTF-8 in a string field, …
            return _Malformed(exc)

    return wrapped


def _malformed_error() -> InvalidArgument:
    return InvalidArgument(
        "the request message could not be decoded (a string field holds invalid UTF-8, or the message is corrupt)",
        reason=Reason.MALFORMED_REQUEST,
    )


async def _checked_stream(requests: AsyncIterator[object]) -> AsyncIterator[object]:
    async for request in requests:
        if isinstance(request, _Malformed):
            raise _malformed_error()
        yield request


async def _reject_malformed(method: str, request: object, context: Context) -> None:
    if isinstance(request, _Malformed):
        log.info("malformed request refused", extra={"method": method, "error": type(request.error).__name__})
        await abort(context, to_grpc_status(_malformed_error()))


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc ships no type information
    """Authenticates and authorizes every call; see the module docstring."""

    def __init__(
        self,
        directory: KeyDirectory,
        limiter: RateLimiter,
        *,
        method_roles: Mapping[str, frozenset[Role]] = METHOD_ROLES,
        reflection: bool = True,
    ) -> None:
        self.guard = Guard(directory, limiter, method_roles)
        self.directory = directory
        self.limiter = limiter
        self.method_roles = method_roles
        self.open_services = OPEN_SERVICES if reflection else OPEN_SERVICES - REFLECTION_SERVICES
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method: str = handler_call_details.method
        service = method.split("/")[1] if method.count("/") == 2 else ""
        if service in REFLECTION_SERVICES and service not in self.open_services:
            return None  # reflection turned off: UNIMPLEMENTED, as if it were never registered
        handler = await continuation(handler_call_details)
        if handler is None or service in self.open_services:
            return handler
        cached = self._wrapped.get(method)
        if cached is None or cached[0] is not handler:
            cached = (handler, self._wrap(handler, method))
            self._wrapped[method] = cached
        return cached[1]

    async def admit(self, method: str, context: Context) -> Principal:
        return await self.guard.admit(method, context.invocation_metadata())

    async def _enter(self, method: str, context: Context) -> contextvars.Token[Principal]:
        """Admits the call and makes its Principal current; aborts the call when refused."""
        try:
            return _current.set(await self.admit(method, context))
        except SluiceError as err:
            await abort(context, to_grpc_status(err))
        except Exception as exc:  # e.g. the database is down: no traceback to the client
            if type(exc).__name__ in {"AbortError", "UsageError"}:
                raise
            await abort(context, status_of_unexpected(exc))

    def _wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        deserializer = _safe_deserializer(handler.request_deserializer)
        serializer = handler.response_serializer
        enter = self._enter

        if handler.unary_unary:
            inner = handler.unary_unary

            async def unary_unary(request: object, context: Context) -> object:
                token = await enter(method, context)
                try:
                    await _reject_malformed(method, request, context)
                    return await inner(request, context)
                finally:
                    _current.reset(token)

            return grpc.unary_unary_rpc_method_handler(unary_unary, deserializer, serializer)
        if handler.unary_stream:
            inner_us = handler.unary_stream

            async def unary_stream(request: object, context: Context) -> AsyncIterator[object]:
                token = await enter(method, context)
                try:
                    await _reject_malformed(method, request, context)
                    async for response in inner_us(request, context):
                        yield response
                finally:
                    _reset(token)

            return grpc.unary_stream_rpc_method_handler(unary_stream, deserializer, serializer)
        if handler.stream_unary:
            inner_su = handler.stream_unary

            async def stream_unary(requests: AsyncIterator[object], context: Context) -> object:
                token = await enter(method, context)
                try:
                    return await inner_su(_checked_stream(requests), context)
                finally:
                    _reset(token)  # closed at server shutdown from another Context, like a stream

            return grpc.stream_unary_rpc_method_handler(stream_unary, deserializer, serializer)
        inner_ss = handler.stream_stream

        async def stream_stream(requests: AsyncIterator[object], context: Context) -> AsyncIterator[object]:
            token = await enter(method, context)
            try:
                async for response in inner_ss(_checked_stream(requests), context):
                    yield response
            finally:
                _reset(token)

        return grpc.stream_stream_rpc_method_handler(stream_stream, deserializer, serializer)


def _reset(token: contextvars.Token[Principal]) -> None:
    """Undo `_enter` at the end of a streaming call. gRPC may close a stream's generator, or a
    client-streaming coroutine at server shutdown, from another task than the one that started it,
    where the token is of a different Context and reset() raises; that task's Context is discarded
    anyway."""
    with contextlib.suppress(ValueError):
        _current.reset(token)


__all__ = ["AuthInterceptor"]
