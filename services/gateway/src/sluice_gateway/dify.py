"""Dify's External Knowledge API on the gateway: `POST /retrieval` (docs/http.md, "Dify").

knowledge_id is a collection's name, the Bearer token a Sluice API key (passed through to
search, like every call of the gateway); metadata_condition becomes a SearchFilter.where.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import grpc
from sluice.v1 import document_pb2
from sluice.v1 import search_service_pb2 as ss
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .backends import TENANT_HEADER, Backends
from .errors import describe
from .methods import METHODS

SEARCH = METHODS["/sluice.v1.SearchService/Search"]

# Dify's documented error codes.
INVALID_AUTHORIZATION_FORMAT = 1001
AUTHORIZATION_FAILED = 1002
KNOWLEDGE_NOT_FOUND = 2001

Op = ss.FilterOperator
# Dify's comparison operators that Sluice's typed filters express, and how.
OPERATORS: dict[str, ss.FilterOperator.ValueType] = {
    "is": Op.FILTER_OPERATOR_EQ,
    "=": Op.FILTER_OPERATOR_EQ,
    "is not": Op.FILTER_OPERATOR_NE,
    "≠": Op.FILTER_OPERATOR_NE,
    "!=": Op.FILTER_OPERATOR_NE,
    ">": Op.FILTER_OPERATOR_GT,
    "<": Op.FILTER_OPERATOR_LT,
    "≥": Op.FILTER_OPERATOR_GTE,
    ">=": Op.FILTER_OPERATOR_GTE,
    "≤": Op.FILTER_OPERATOR_LTE,
    "<=": Op.FILTER_OPERATOR_LTE,
    "after": Op.FILTER_OPERATOR_GT,
    "before": Op.FILTER_OPERATOR_LT,
    "in": Op.FILTER_OPERATOR_IN,
    "not in": Op.FILTER_OPERATOR_NOT_IN,
    "not empty": Op.FILTER_OPERATOR_EXISTS,
    "empty": Op.FILTER_OPERATOR_NOT_EXISTS,
}
# Substring matches have no index behind them in Sluice; refused rather than ignored.
UNSUPPORTED = ("contains", "not contains", "start with", "end with")
NUMERIC = {"=", "≠", "!=", ">", "<", "≥", ">=", "≤", "<="}


class DifyError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def response(self) -> JSONResponse:
        return JSONResponse({"error_code": self.code, "error_msg": self.message}, status_code=self.status)


def bad_request(message: str) -> DifyError:
    return DifyError(400, 400, message)


def metadata_value(raw: Any, operator: str) -> document_pb2.MetadataValue:
    if isinstance(raw, bool):
        return document_pb2.MetadataValue(bool_value=raw)
    if isinstance(raw, int | float):
        return document_pb2.MetadataValue(number_value=float(raw))
    if not isinstance(raw, str):
        raise bad_request(f"metadata_condition: {operator!r} needs a string or number value, not {json.dumps(raw)}")
    if operator in ("before", "after"):
        try:
            instant = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise bad_request(f"metadata_condition: {operator!r} needs a date (ISO 8601), not {raw!r}") from None
        value = document_pb2.MetadataValue()
        value.timestamp_value.FromDatetime(instant)
        return value
    if operator in NUMERIC:
        try:
            number = float(raw)
            if math.isfinite(number):
                return document_pb2.MetadataValue(number_value=number)
        except ValueError:
            pass
    return document_pb2.MetadataValue(string_value=raw)


def condition_filter(condition: Any) -> ss.MetadataFilter:
    if not isinstance(condition, dict):
        raise bad_request("metadata_condition.conditions holds objects")
    operator = str(condition.get("comparison_operator", "")).strip()
    names = condition.get("name")
    names = names if isinstance(names, list) else [names]
    if not names or not all(isinstance(n, str) and n for n in names):
        raise bad_request("metadata_condition: every condition names a metadata field (name)")
    if operator in UNSUPPORTED:
        raise bad_request(
            f"metadata_condition: {operator!r} is not supported by Sluice's filters (supported: {', '.join(sorted(OPERATORS))})"
        )
    if operator not in OPERATORS:
        raise bad_request(f"metadata_condition: unknown comparison_operator {operator!r}")
    op = OPERATORS[operator]
    parts = []
    for name in names:
        cond = ss.MetadataCondition(key=name, op=op)
        value = condition.get("value")
        if op in (Op.FILTER_OPERATOR_IN, Op.FILTER_OPERATOR_NOT_IN):
            values = value if isinstance(value, list) else [value]
            cond.values.extend(metadata_value(v, operator) for v in values)
        elif op not in (Op.FILTER_OPERATOR_EXISTS, Op.FILTER_OPERATOR_NOT_EXISTS):
            cond.value.CopyFrom(metadata_value(value, operator))
        parts.append(ss.MetadataFilter(condition=cond))
    # A condition over several names matches when any of them does.
    return parts[0] if len(parts) == 1 else ss.MetadataFilter(any_of=ss.MetadataFilterList(filters=parts))


def metadata_filter(metadata_condition: Any) -> ss.MetadataFilter | None:
    if not metadata_condition:
        return None
    if not isinstance(metadata_condition, dict):
        raise bad_request("metadata_condition is an object")
    conditions = metadata_condition.get("conditions") or []
    if not isinstance(conditions, list):
        raise bad_request("metadata_condition.conditions is a list")
    if not conditions:
        return None
    parts = [condition_filter(c) for c in conditions]
    group = ss.MetadataFilterList(filters=parts)
    logical = str(metadata_condition.get("logical_operator") or "and").lower()
    if logical not in ("and", "or"):
        raise bad_request(f"metadata_condition.logical_operator is and or or, not {logical!r}")
    return ss.MetadataFilter(any_of=group) if logical == "or" else ss.MetadataFilter(all_of=group)


def search_request(body: Any) -> ss.SearchRequest:
    if not isinstance(body, dict):
        raise bad_request("the body is a JSON object")
    knowledge_id, query = body.get("knowledge_id"), body.get("query")
    if not isinstance(knowledge_id, str) or not knowledge_id:
        raise bad_request("knowledge_id (the Sluice collection's name) is required")
    if not isinstance(query, str) or not query.strip():
        raise bad_request("query is required")
    setting = body.get("retrieval_setting") or {}
    if not isinstance(setting, dict):
        raise bad_request("retrieval_setting is an object")
    top_k = setting.get("top_k", 10)
    if top_k is None:
        top_k = 10
    # Refused, not clamped, as gRPC's Search refuses it: -1 used to give 1 record and 1000 all 100.
    if isinstance(top_k, bool) or not isinstance(top_k, int | float) or top_k != int(top_k) or not 1 <= top_k <= 100:
        raise bad_request(f"retrieval_setting.top_k is an integer from 1 to 100, not {json.dumps(top_k)}")
    try:
        threshold = float(setting.get("score_threshold") or 0.0)
    except (TypeError, ValueError):
        raise bad_request("retrieval_setting.score_threshold is a number") from None
    request = ss.SearchRequest(collection=knowledge_id, query=query, top_k=int(top_k))
    if threshold > 0:
        request.min_score = threshold  # HYBRID's fused score, 0 to 1 like Dify's
    where = metadata_filter(body.get("metadata_condition"))
    if where is not None:
        request.filter.where.CopyFrom(where)
    return request


def plain(value: document_pb2.MetadataValue) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "timestamp_value":
        return value.timestamp_value.ToDatetime().isoformat() + "Z"
    if kind == "string_list_value":
        return list(value.string_list_value.values)
    if kind == "number_value" and value.number_value.is_integer() and abs(value.number_value) < 2**53:
        return int(value.number_value)
    return getattr(value, kind) if kind else None


def record(hit: ss.SearchHit) -> dict[str, Any]:
    metadata: dict[str, Any] = dict(hit.metadata)
    metadata.update({key: plain(value) for key, value in hit.typed_metadata.items()})
    metadata.update(
        {"document_id": hit.document_id, "chunk_id": hit.chunk_id, "chunk_index": hit.chunk_index, "filename": hit.filename}
    )
    if hit.page_number:
        metadata["page_number"] = hit.page_number
    return {"content": hit.text, "score": hit.score, "title": hit.filename, "metadata": metadata}


async def retrieval(request: Request, backends: Backends, timeout: float) -> Response:
    """POST /retrieval."""
    authorization = request.headers.get("authorization", "")
    scheme, _, key = authorization.partition(" ")
    # A key outside printable ASCII is no key the server issued and cannot travel as gRPC
    # metadata: refused here like any other malformed header, not an internal error.
    tenant_header = request.headers.get(TENANT_HEADER, "")
    if not all(" " <= ch <= "~" for ch in authorization + tenant_header):
        return DifyError(
            403,
            AUTHORIZATION_FAILED,
            "Authorization failed: the API key or tenant header holds a character outside printable ASCII",
        ).response()
    if scheme.lower() != "bearer" or not key.strip() or " " in key.strip():
        return DifyError(
            403, INVALID_AUTHORIZATION_FORMAT, "Invalid Authorization header format. Expected 'Bearer <api-key>' format."
        ).response()
    try:
        body = json.loads(await request.body() or b"null")
        search = search_request(body)
    except ValueError:
        return bad_request("the body is not JSON").response()
    except DifyError as error:
        return error.response()
    try:
        # The key, cleaned of Dify's spacing, and the tenant an admin key acts for, as every path forwards it.
        metadata = [("authorization", f"Bearer {key.strip()}")]
        if tenant := request.headers.get(TENANT_HEADER):
            metadata.append((TENANT_HEADER, tenant))
        reply = await backends.callable(SEARCH)(search, metadata=metadata, timeout=timeout)
    except grpc.RpcError as error:
        code = error.code()
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            return DifyError(403, AUTHORIZATION_FAILED, f"Authorization failed: {error.details()}").response()
        if code == grpc.StatusCode.NOT_FOUND:
            return DifyError(404, KNOWLEDGE_NOT_FOUND, f"The knowledge does not exist: {error.details()}").response()
        status, connect_error, headers = describe(error)
        response = DifyError(status, status, connect_error["message"]).response()
        response.headers.update(headers)
        return response
    return JSONResponse({"records": [record(hit) for hit in reply.hits]})
