"""Domain errors and the one table that maps them to gRPC status codes (AIP-193).

Services raise these; the `grpc_errors` decorator turns them into a `google.rpc.Status` with
an `ErrorInfo` whose reason is UPPER_SNAKE_CASE. A lost or refused database connection
(PostgreSQL restarting, an admin shutdown, a pool that cannot connect) becomes UNAVAILABLE
with reason DATABASE_UNAVAILABLE, so clients retry. Anything else becomes INTERNAL with a
reference id: clients never see a Python repr or a stack trace.
"""

from __future__ import annotations

import functools
import inspect
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar, cast, overload

import grpc
import psycopg
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from .reasons import Reason

DOMAIN = "sluice.dev"
log = logging.getLogger("sluice.errors")


class SluiceError(Exception):
    """A failure with a message fit for the caller and a stable reason."""

    default_reason = Reason.ERROR

    def __init__(self, message: str, *, reason: str | None = None, **metadata: Any) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.metadata = {k: str(v) for k, v in metadata.items()}


class InvalidArgument(SluiceError):
    default_reason = Reason.INVALID_ARGUMENT


class NotFound(SluiceError):
    default_reason = Reason.NOT_FOUND


class AlreadyExists(SluiceError):
    default_reason = Reason.ALREADY_EXISTS


class FailedPrecondition(SluiceError):
    default_reason = Reason.FAILED_PRECONDITION


class LeaseNotHeld(FailedPrecondition):
    """The caller's lease expired or was taken over: its write is refused (fencing)."""

    default_reason = Reason.LEASE_NOT_HELD


class OutOfRange(SluiceError):
    """A position past what the server can serve (e.g. a cursor older than the events' retention)."""

    default_reason = Reason.OUT_OF_RANGE


class ResourceExhausted(SluiceError):
    default_reason = Reason.RESOURCE_EXHAUSTED


class Unavailable(SluiceError):
    default_reason = Reason.UNAVAILABLE


class Aborted(SluiceError):
    default_reason = Reason.ABORTED


class Unauthenticated(SluiceError):
    """No key, or a key that is malformed, unknown or revoked."""

    default_reason = Reason.API_KEY_INVALID


class PermissionDenied(SluiceError):
    """A valid key whose role may not call the method."""

    default_reason = Reason.ROLE_NOT_ALLOWED


class RateLimited(ResourceExhausted):
    """Too many calls with one key; the status carries a RetryInfo with the wait."""

    default_reason = Reason.RATE_LIMITED

    def __init__(self, message: str, *, retry_after: float, **metadata: Any) -> None:
        super().__init__(message, **metadata)
        self.retry_after = retry_after


class DeadlineExceeded(SluiceError):
    """The server gave up waiting on the caller (e.g. an upload stream that went silent)."""

    default_reason = Reason.DEADLINE_EXCEEDED


class DatabaseUnavailable(Unavailable):
    """PostgreSQL cannot be reached right now (restart, failover, shutdown): retry later."""

    default_reason = Reason.DATABASE_UNAVAILABLE


# The one table from domain errors to status codes; the most specific class wins (MRO order).
STATUS_CODES: dict[type[SluiceError], grpc.StatusCode] = {
    InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    OutOfRange: grpc.StatusCode.OUT_OF_RANGE,
    Unavailable: grpc.StatusCode.UNAVAILABLE,  # incl. DatabaseUnavailable (see domain_error_of)
    Aborted: grpc.StatusCode.ABORTED,
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
    SluiceError: grpc.StatusCode.INTERNAL,
}


# SQLSTATEs that mean "the server went away or refuses connections for now", not "your query
# failed": class 08 (connection exception), 57P01-57P04 (admin/crash shutdown, cannot connect
# now, database dropped) and 53300 (too many connections). Client-side connection failures
# ("server closed the connection unexpectedly", a PoolTimeout) carry no SQLSTATE at all.
# QueryCanceled (57014, a statement timeout) is an OperationalError too, but not this: the server
# gave up on a query that took too long (DEADLINE_EXCEEDED, below).
_CONNECTION_SQLSTATE_PREFIXES = ("08", "57P", "53300")


def domain_error_of(exc: BaseException) -> SluiceError | None:
    """The domain error a foreign exception stands for, or None when it is a bug (INTERNAL)."""
    if isinstance(exc, SluiceError):
        return exc
    if isinstance(exc, psycopg.errors.QueryCanceled):
        # statement_timeout (search's SLUICE_SEARCH_STATEMENT_TIMEOUT_MS): not a bug, and the
        # same call may pass on a quieter server; a narrower query or filter passes sooner.
        return DeadlineExceeded(
            "the database took longer than the server allows for this call and stopped it; retry, or narrow the query",
            reason=Reason.DEADLINE_EXCEEDED,
        )
    if isinstance(exc, psycopg.OperationalError) and exc.sqlstate == "40001" and "conflict with recovery" in str(exc):
        # A hot standby cancelled the statement (or ended the session) to replay the primary's
        # changes: a lock or a row version the statement held (docs/scaling.md,
        # "Kubernetes: CloudNativePG", hot_standby_feedback). The same call passes when retried.
        return Unavailable(
            "the replica serving this call cancelled it to apply the primary's changes (a recovery conflict); retry",
            reason=Reason.RECOVERY_CONFLICT,
        )
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate or ""
        if not state or state.startswith(_CONNECTION_SQLSTATE_PREFIXES):
            return DatabaseUnavailable("the database is unavailable right now; retry shortly")
    if isinstance(exc, psycopg.DataError) and "NUL (0x00)" in str(exc):
        # A field that reaches SQL without its own check: still the caller's input, not a bug.
        return InvalidArgument(
            "a text field contains a NUL character (U+0000), which cannot be stored", reason=Reason.NUL_CHARACTER
        )
    return None


def status_code_of(error: SluiceError) -> grpc.StatusCode:
    for cls in type(error).__mro__:
        if cls in STATUS_CODES:
            return STATUS_CODES[cls]
    return grpc.StatusCode.INTERNAL


def to_grpc_status(error: SluiceError) -> grpc.Status:
    code = status_code_of(error)
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=DOMAIN, metadata=error.metadata)
    detail = any_pb2.Any()
    detail.Pack(info)
    details = [detail]
    retry_after = getattr(error, "retry_after", None)
    if retry_after is not None:
        retry = any_pb2.Any()
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(max(int(retry_after * 1e9), 1_000_000))
        retry.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
        details.append(retry)
    status = status_pb2.Status(code=code.value[0], message=error.message, details=details)
    return rpc_status.to_status(status)


def status_of_unexpected(exc: BaseException) -> grpc.Status:
    """The status of an exception that is not a SluiceError: a known outage or INTERNAL."""
    error = domain_error_of(exc)
    if error is None:
        return internal_status(exc)
    # An outage, not a bug: one line per failed call, no traceback.
    log.warning("call failed: %s", error.reason, extra={"error": f"{type(exc).__name__}: {exc}".strip()})
    return to_grpc_status(error)


def internal_status(exc: BaseException) -> grpc.Status:
    ref = uuid.uuid4().hex[:12]
    log.error("unhandled error", exc_info=exc, extra={"error_ref": ref})
    return to_grpc_status(SluiceError(f"internal error (reference {ref})", reason=Reason.INTERNAL))


# A servicer method, as grpc_errors sees it: (self, request, context), a coroutine or an
# async generator. The context is a grpc.aio.ServicerContext (grpc ships no type information).
_Servicer = TypeVar("_Servicer")
_Request = TypeVar("_Request")
_Response = TypeVar("_Response")


async def abort(context: grpc.aio.ServicerContext, status: grpc.Status) -> NoReturn:
    """`context.abort_with_status`, which always raises (AbortError), typed as never returning."""
    await context.abort_with_status(status)
    raise AssertionError("abort_with_status returned")  # grpc.aio never does; the types say so


@overload
def grpc_errors(
    method: Callable[[_Servicer, _Request, grpc.aio.ServicerContext], AsyncIterator[_Response]],
) -> Callable[[_Servicer, _Request, grpc.aio.ServicerContext], AsyncIterator[_Response]]: ...


@overload
def grpc_errors(
    method: Callable[[_Servicer, _Request, grpc.aio.ServicerContext], Awaitable[_Response]],
) -> Callable[[_Servicer, _Request, grpc.aio.ServicerContext], Awaitable[_Response]]: ...


def grpc_errors(
    method: Callable[[_Servicer, _Request, grpc.aio.ServicerContext], AsyncIterator[_Response] | Awaitable[_Response]],
) -> Callable[[_Servicer, _Request, grpc.aio.ServicerContext], AsyncIterator[_Response] | Awaitable[_Response]]:
    """Decorate a servicer method (unary or streaming) so domain errors become rich statuses."""

    if inspect.isasyncgenfunction(method):
        streaming = cast(Callable[[_Servicer, _Request, grpc.aio.ServicerContext], AsyncIterator[_Response]], method)

        @functools.wraps(method)
        async def stream_wrapper(
            self: _Servicer, request: _Request, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[_Response]:
            try:
                async for item in streaming(self, request, context):
                    yield item
            except SluiceError as err:
                await abort(context, to_grpc_status(err))
            except Exception as exc:  # the boundary: nothing leaks to clients
                if _is_abort(exc):
                    raise
                await abort(context, status_of_unexpected(exc))

        return stream_wrapper

    unary = cast(Callable[[_Servicer, _Request, grpc.aio.ServicerContext], Awaitable[_Response]], method)

    @functools.wraps(method)
    async def unary_wrapper(self: _Servicer, request: _Request, context: grpc.aio.ServicerContext) -> _Response:
        try:
            return await unary(self, request, context)
        except SluiceError as err:
            await abort(context, to_grpc_status(err))
        except Exception as exc:  # the boundary: nothing leaks to clients
            if _is_abort(exc):
                raise
            await abort(context, status_of_unexpected(exc))

    return unary_wrapper


def _is_abort(exc: BaseException) -> bool:
    # grpc.aio raises AbortError out of context.abort(); it must propagate untouched.
    return type(exc).__name__ in {"AbortError", "UsageError"}


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo detail of a failed call, for clients and tests."""
    trailers = error.trailing_metadata() or ()
    for key, value in trailers:
        if key == rpc_status.GRPC_DETAILS_METADATA_KEY:
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info
    return None


def reason_of(error: grpc.RpcError) -> str:
    info = error_info(error)
    return info.reason if info else ""


__all__ = [
    "Aborted",
    "AlreadyExists",
    "DatabaseUnavailable",
    "DeadlineExceeded",
    "FailedPrecondition",
    "InvalidArgument",
    "LeaseNotHeld",
    "NotFound",
    "PermissionDenied",
    "RateLimited",
    "ResourceExhausted",
    "SluiceError",
    "Unauthenticated",
    "Unavailable",
    "code_pb2",
    "domain_error_of",
    "error_info",
    "grpc_errors",
    "reason_of",
    "to_grpc_status",
]
