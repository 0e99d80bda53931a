"""The one server interceptor in front of every method of ingest-api and search.

It admits each call through the Guard (key, role, tenant, rate limit) and makes the caller's
Principal available to the servicer through `current_principal()`. Health checks (for probes)
and reflection (unless turned off) need no key. It also answers a message that cannot be
decoded (invalid UTF-8 in a string field) with INVALID_ARGUMENT instead of gRPC's INTERNAL and a
traceback.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Mapping

import grpc

from ..errors import InvalidArgument, SluiceError, status_of_unexpected, to_grpc_status
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


def _safe_deserializer(deserialize):
    if deserialize is None:
        return None

    def wrapped(data: bytes):
        try:
            return deserialize(data)
        except Exception as exc:  # noqa: BLE001 - DecodeError, invalid UTF-8 in a string field, …
            return _Malformed(exc)

    return wrapped


def _malformed_error() -> InvalidArgument:
    return InvalidArgument(
        "the request message could not be decoded (a string field holds invalid UTF-8, or the message is corrupt)",
        reason=Reason.MALFORMED_REQUEST,
    )


async def _checked_stream(requests):
    async for request in requests:
        if isinstance(request, _Malformed):
            raise _malformed_error()
        yield request


class AuthInterceptor(grpc.aio.ServerInterceptor):
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

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
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

    async def admit(self, method: str, context) -> Principal:
        return await self.guard.admit(method, context.invocation_metadata())

    def _wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        deserializer = _safe_deserializer(handler.request_deserializer)
        serializer = handler.response_serializer

        async def enter(context) -> contextvars.Token | None:
            try:
                return _current.set(await self.admit(method, context))
            except SluiceError as err:
                await context.abort_with_status(to_grpc_status(err))
            except Exception as exc:  # noqa: BLE001 - e.g. the database is down: no traceback to the client
                if type(exc).__name__ in {"AbortError", "UsageError"}:
                    raise
                await context.abort_with_status(status_of_unexpected(exc))
            return None

        async def reject_malformed(request, context) -> None:
            if isinstance(request, _Malformed):
                log.info("malformed request refused", extra={"method": method, "error": type(request.error).__name__})
                await context.abort_with_status(to_grpc_status(_malformed_error()))

        if handler.unary_unary:
            inner = handler.unary_unary

            async def unary_unary(request, context):
                token = await enter(context)
                try:
                    await reject_malformed(request, context)
                    return await inner(request, context)
                finally:
                    _current.reset(token)

            return grpc.unary_unary_rpc_method_handler(unary_unary, deserializer, serializer)
        if handler.unary_stream:
            inner_us = handler.unary_stream

            async def unary_stream(request, context):
                token = await enter(context)
                try:
                    await reject_malformed(request, context)
                    async for response in inner_us(request, context):
                        yield response
                finally:
                    _current.reset(token)

            return grpc.unary_stream_rpc_method_handler(unary_stream, deserializer, serializer)
        if handler.stream_unary:
            inner_su = handler.stream_unary

            async def stream_unary(requests, context):
                token = await enter(context)
                try:
                    return await inner_su(_checked_stream(requests), context)
                finally:
                    _current.reset(token)

            return grpc.stream_unary_rpc_method_handler(stream_unary, deserializer, serializer)
        inner_ss = handler.stream_stream

        async def stream_stream(requests, context):
            token = await enter(context)
            try:
                async for response in inner_ss(_checked_stream(requests), context):
                    yield response
            finally:
                _current.reset(token)

        return grpc.stream_stream_rpc_method_handler(stream_stream, deserializer, serializer)


__all__ = ["AuthInterceptor"]
