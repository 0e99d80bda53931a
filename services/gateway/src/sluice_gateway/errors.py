"""gRPC errors as Connect errors: `{"code", "message", "details"}` with the HTTP status the
Connect protocol gives each code (the same as google.rpc.Code's HTTP mapping), plus `reason`
(the ErrorInfo reason, for people reading curl output) and Retry-After from a RetryInfo."""

from __future__ import annotations

import base64
import math
from typing import Any

import grpc
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

HTTP_STATUS = {
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}

# The detail types a client can decode from `debug` without their descriptors.
KNOWN_DETAILS = (
    error_details_pb2.ErrorInfo,
    error_details_pb2.RetryInfo,
    error_details_pb2.BadRequest,
    error_details_pb2.PreconditionFailure,
    error_details_pb2.ResourceInfo,
)


class GatewayError(Exception):
    """An error the gateway itself answers (a bad body, an unknown path) in the same shape."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": connect_code(self.code), "message": self.message}
        if self.reason:
            info = error_details_pb2.ErrorInfo(reason=self.reason, domain="sluice.dev")
            body["details"] = [_detail(info)]
            body["reason"] = self.reason
        return body

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]


def connect_code(code: grpc.StatusCode) -> str:
    return str(code.name).lower()


def _detail(detail: Any) -> dict[str, Any]:
    value = base64.b64encode(detail.SerializeToString()).decode().rstrip("=")
    return {"type": detail.DESCRIPTOR.full_name, "value": value, "debug": json_format.MessageToDict(detail)}


def status_of(error: grpc.aio.AioRpcError | grpc.RpcError) -> status_pb2.Status | None:
    for key, value in error.trailing_metadata() or ():
        if key == rpc_status.GRPC_DETAILS_METADATA_KEY:
            return status_pb2.Status.FromString(value)
    return None


def describe(error: grpc.RpcError) -> tuple[int, dict[str, Any], dict[str, str]]:
    """(HTTP status, Connect error body, extra headers) of a failed backend call."""
    code = error.code()
    body: dict[str, Any] = {"code": connect_code(code), "message": error.details() or code.name}
    headers: dict[str, str] = {}
    status = status_of(error)
    if status is not None:
        details = []
        for any_detail in status.details:
            for kind in KNOWN_DETAILS:
                if any_detail.Is(kind.DESCRIPTOR):
                    detail = kind()
                    any_detail.Unpack(detail)
                    details.append(_detail(detail))
                    if isinstance(detail, error_details_pb2.ErrorInfo):
                        body["reason"] = detail.reason
                    if isinstance(detail, error_details_pb2.RetryInfo):
                        delay = detail.retry_delay.ToTimedelta().total_seconds()
                        headers["Retry-After"] = str(max(1, math.ceil(delay)))
                    break
            else:
                details.append({"type": any_detail.TypeName(), "value": base64.b64encode(any_detail.value).decode().rstrip("=")})
        if details:
            body["details"] = details
    return HTTP_STATUS.get(code, 500), body, headers
