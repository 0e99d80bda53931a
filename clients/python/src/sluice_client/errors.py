"""Errors as exceptions that carry the status code, the ErrorInfo reason and its metadata.

Every failed call raises a `SluiceError` (a subclass per status code: `NotFound`,
`InvalidArgument`, `RateLimited`, …) whose `reason` is the server's ErrorInfo reason in
UPPER_SNAKE_CASE (`COLLECTION_NOT_FOUND`) and `metadata` its details; `retry_after` is the
RetryInfo delay when the server sent one. When the call never reached a server, the error says
what failed on the way: `ConnectionFailed` (nothing answers at the address) or `TLSError` (the
handshake failed: an untrusted certificate, a server that does not speak TLS, a client
certificate that was refused). Errors of the SDK's own checks (a file that cannot be read or
changed while uploading, a wait that timed out) are SluiceErrors too, with `code` None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc
from google.rpc import error_details_pb2, status_pb2

if TYPE_CHECKING:
    from .types import Document

_DETAILS_KEY = "grpc-status-details-bin"


class SluiceError(Exception):
    """A failed call: `code` (grpc.StatusCode, None for the SDK's own errors), `reason`,
    `metadata` (ErrorInfo), `message`, `retry_after` (seconds, from RetryInfo), and which
    `service` at which `address` answered."""

    code: grpc.StatusCode | None = None

    def __init__(
        self,
        message: str,
        *,
        reason: str = "",
        metadata: dict[str, str] | None = None,
        code: grpc.StatusCode | None = None,
        retry_after: float | None = None,
        service: str = "",
        address: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.reason = reason or (self.code.name if self.code is not None else "")
        self.metadata = dict(metadata or {})
        self.retry_after = retry_after
        self.service = service
        self.address = address

    def __str__(self) -> str:
        return f"{self.message} [{self.reason}]" if self.reason else self.message


class Cancelled(SluiceError):
    code = grpc.StatusCode.CANCELLED


class Unknown(SluiceError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(SluiceError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(SluiceError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(SluiceError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(SluiceError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(SluiceError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(SluiceError):
    """A quota, the upload limit, or (RateLimited) the key's rate limit."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class RateLimited(ResourceExhausted):
    """Too many calls with this key; `retry_after` says when to come back. The SDK waits and
    retries by itself within the call's deadline: this reaches you only when the deadline is shorter."""


class FailedPrecondition(SluiceError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(SluiceError):
    code = grpc.StatusCode.ABORTED


class OutOfRange(SluiceError):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(SluiceError):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(SluiceError):
    code = grpc.StatusCode.INTERNAL


class Unavailable(SluiceError):
    """The service cannot answer now (restarting, its database away): retried by the SDK with
    backoff; this reaches you when the retries ran out."""

    code = grpc.StatusCode.UNAVAILABLE


class ConnectionFailed(Unavailable):
    """Nothing answers at the address (not running, wrong address, a network in between)."""


class TLSError(Unavailable):
    """The TLS handshake failed; `problem` says how (not retried: it will not heal by itself)."""

    def __init__(self, message: str, *, problem: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.problem = problem


class DataLoss(SluiceError):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(SluiceError):
    """No key, or a key that is malformed, unknown or revoked."""

    code = grpc.StatusCode.UNAUTHENTICATED


class UploadSourceError(SluiceError):
    """The file to upload could not be read, or changed while it was sent; nothing was stored."""


class DownloadError(SluiceError):
    """The bytes a download received are not the ones its header announced: SIZE_MISMATCH (the
    stream ended early, or ran long) or CHECKSUM_MISMATCH (another SHA-256), or the stream broke
    its framing (DOWNLOAD_MALFORMED: bytes before the header, a second header). A download to a
    path leaves nothing there; one to a file object may have written part of the bytes."""


class WaitTimeout(SluiceError):
    """A wait for documents ended before they were READY or FAILED; `documents` are their last
    states (they go on processing on the server)."""

    def __init__(self, message: str, *, documents: list[Document] | None = None, **kwargs: Any) -> None:
        super().__init__(message, reason="TIMEOUT", **kwargs)
        self.documents = list(documents or [])


class MassDeleteRefused(SluiceError):
    """`sync_folder` would delete more than its share of the collection's sources; nothing was
    uploaded or deleted. `would_delete` of `sources`, against `max_delete_share`; the
    `source_uris` it would have deleted."""

    def __init__(
        self,
        message: str,
        *,
        would_delete: int,
        sources: int,
        max_delete_share: float,
        source_uris: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, reason="MASS_DELETE_REFUSED", **kwargs)
        self.would_delete = would_delete
        self.sources = sources
        self.max_delete_share = max_delete_share
        self.source_uris = list(source_uris or [])


class ConfigError(SluiceError):
    """The client's own configuration is wrong (a credentials file or certificate that cannot be read)."""


_BY_CODE: dict[grpc.StatusCode, type[SluiceError]] = {
    cls.code: cls
    for cls in (
        Cancelled,
        Unknown,
        InvalidArgument,
        DeadlineExceeded,
        NotFound,
        AlreadyExists,
        PermissionDenied,
        ResourceExhausted,
        FailedPrecondition,
        Aborted,
        OutOfRange,
        Unimplemented,
        Internal,
        Unavailable,
        DataLoss,
        Unauthenticated,
    )
    if cls.code is not None
}

# What the TLS handshake failures look like in gRPC core's error text, and what they mean.
_TLS_PROBLEMS = (
    (
        "CERTIFICATE_VERIFY_FAILED",
        "untrusted certificate",
        "its certificate is not signed by the CA given (--ca-file / SLUICE_TLS_CA_FILE), or has expired",
    ),
    (
        "WRONG_VERSION_NUMBER",
        "server does not speak TLS",
        "it answers in plaintext: leave out the CA file, or give the server a certificate",
    ),
    (
        "CERTIFICATE_REQUIRED",
        "client certificate required",
        "it requires a client certificate (--tls-cert and --tls-key, or SLUICE_TLS_CLIENT_CERT_FILE/_KEY_FILE)",
    ),
    ("HANDSHAKE_FAILURE", "handshake refused", "it refused the handshake"),
)


def status_details(error: grpc.RpcError) -> tuple[str, dict[str, str], float | None]:
    """(ErrorInfo reason, ErrorInfo metadata, RetryInfo delay in seconds) from a failed call."""
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    blob = None
    for key, value in trailers or ():
        if key == _DETAILS_KEY:
            blob = value
    if not blob:
        return "", {}, None
    status = status_pb2.Status()
    try:
        status.ParseFromString(blob)
    except Exception:  # malformed trailers must not hide the real error
        return "", {}, None
    reason, metadata, retry_after = "", {}, None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason, metadata = info.reason, dict(info.metadata)
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            retry_after = retry.retry_delay.ToTimedelta().total_seconds()
    return reason, metadata, retry_after


# What a call without a key is told (the server speaks of gRPC metadata; the SDK's user sets a key).
NO_KEY_MESSAGE = (
    "no API key was sent: set SLUICE_API_KEY, or pass api_key= to the client "
    "(or run `make run`, whose credentials file the client reads)"
)


def from_rpc_error(error: grpc.RpcError, *, service: str = "", address: str = "", tls: bool = False) -> SluiceError:
    """The SluiceError for a failed call (grpc.RpcError, sync or asyncio)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = (error.details() if hasattr(error, "details") else "") or ""
    reason, metadata, retry_after = status_details(error)
    where: dict[str, Any] = {"service": service, "address": address}
    if code is grpc.StatusCode.UNAVAILABLE and not reason:
        return _transport_error(details, tls=tls, **where)
    cls = _BY_CODE.get(code, SluiceError)
    if cls is ResourceExhausted and retry_after is not None and reason != "TOO_MANY_UPLOADS":
        cls = RateLimited  # full upload slots are the server's, not this key's: no pacing (retry.py)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED and not reason:
        details = f"{service or 'the server'} at {address} did not answer in time" if address else "the call timed out"
    if reason == "API_KEY_MISSING":  # the server's words speak of gRPC metadata; a client's user needs these
        details = NO_KEY_MESSAGE
    return cls(
        details.strip() or "no details given",
        reason=reason or (code.name if code else "UNKNOWN"),
        metadata=metadata,
        code=code,
        retry_after=retry_after,
        **where,
    )


def _transport_error(details: str, *, tls: bool, service: str, address: str) -> SluiceError:
    """A failure before any server answered: name the cause (TLS, refused, reset) plainly."""
    name = service or "the server"
    where: dict[str, Any] = {"service": service, "address": address}
    if "handshake failed" in details.lower() or "ssl_error" in details.lower():
        for marker, problem, explanation in _TLS_PROBLEMS:
            if marker in details:
                return TLSError(
                    f"TLS handshake with {name} at {address} failed ({problem}): {explanation}",
                    problem=problem,
                    reason="TLS_HANDSHAKE_FAILED",
                    **where,
                )
        return TLSError(
            f"TLS handshake with {name} at {address} failed", problem="handshake failed", reason="TLS_HANDSHAKE_FAILED", **where
        )
    if "Socket closed" in details or "Connection reset" in details:
        # The server closed the connection before answering: under TLS it refused our client
        # certificate (mutual TLS), in plaintext it most likely expects TLS.
        if tls:
            return TLSError(
                f"{name} at {address} closed the connection during the TLS handshake: it probably requires a "
                "client certificate signed by a CA it trusts (--tls-cert and --tls-key)",
                problem="client certificate refused",
                reason="TLS_HANDSHAKE_FAILED",
                **where,
            )
        return ConnectionFailed(
            f"{name} at {address} closed the connection at once: it probably requires TLS "
            "(give the CA of its certificate: --ca-file or SLUICE_TLS_CA_FILE)",
            reason="CONNECTION_CLOSED",
            **where,
        )
    cause = "connection refused" if "refused" in details.lower() else "no connection"
    if "Name resolution" in details or "DNS resolution" in details or "name resolution" in details:
        cause = "the host name does not resolve"
    return ConnectionFailed(f"cannot reach {name} at {address} ({cause})", reason="UNAVAILABLE", **where)


__all__ = [
    "Aborted",
    "AlreadyExists",
    "Cancelled",
    "ConfigError",
    "ConnectionFailed",
    "DataLoss",
    "DeadlineExceeded",
    "DownloadError",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "RateLimited",
    "ResourceExhausted",
    "SluiceError",
    "TLSError",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "Unknown",
    "UploadSourceError",
    "WaitTimeout",
    "from_rpc_error",
    "status_details",
]
