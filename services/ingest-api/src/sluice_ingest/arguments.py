"""Arguments every use case checks alike (DocumentService, JobService, WebhookService): ids,
page sizes and page tokens."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from sluice_common.errors import InvalidArgument
from sluice_common.names import document_id_of
from sluice_common.reasons import Reason


def parse_id(value: str, what: str = "document") -> uuid.UUID:
    """A UUID from a bare id or (for documents) a resource name `collections/c/documents/id`."""
    if what == "document":
        value = document_id_of(value)
    if not value:
        raise InvalidArgument(f"{what} id is required", reason=Reason.MISSING_ID)
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidArgument(f"{what} id {value[:80]!r} is not a valid UUID", reason=Reason.INVALID_ID) from None


def page_size_of(value: int) -> int:
    if value < 0 or value > 1000:
        raise InvalidArgument("page_size must be between 0 and 1000", reason=Reason.INVALID_PAGE_SIZE)
    return value or 100


def encode_token(payload: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()


def decode_token(token: str, filters: str) -> dict[str, Any] | None:
    if not token:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(token.encode()))
        assert isinstance(payload, dict)
    except Exception:  # any garbage is the same invalid token
        raise InvalidArgument("page_token is not valid", reason=Reason.INVALID_PAGE_TOKEN) from None
    if payload.get("f") != filters:
        raise InvalidArgument("page_token was issued for other filters", reason=Reason.INVALID_PAGE_TOKEN)
    return payload


__all__ = ["decode_token", "encode_token", "page_size_of", "parse_id"]
