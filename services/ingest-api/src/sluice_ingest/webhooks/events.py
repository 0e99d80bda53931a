"""The event types a subscription may ask for, and how one log row becomes events and a payload.

One place names them: the wire names (`document.ready`…) and the proto enum values map here.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
from collections.abc import Iterable
from typing import Any

from sluice_common.errors import InvalidArgument
from sluice_common.names import document_name
from sluice_common.reasons import Reason

from ..domain import EventCursor


class EventType(enum.StrEnum):
    # Values are the `type` of the payload; the proto enum is WEBHOOK_EVENT_TYPE_<NAME>.
    DOCUMENT_READY = "document.ready"
    DOCUMENT_FAILED = "document.failed"
    DOCUMENT_DELETED = "document.deleted"
    DOCUMENT_STATUS_CHANGED = "document.status_changed"


ALL_EVENT_TYPES: tuple[EventType, ...] = tuple(EventType)


def event_types_of(values: Iterable[str]) -> list[EventType]:
    """The requested types, deduplicated in declaration order; none means all."""
    wanted = set()
    for value in values:
        try:
            wanted.add(EventType(value))
        except ValueError:
            raise InvalidArgument(
                f"unknown webhook event type {value!r}; known: {', '.join(ALL_EVENT_TYPES)}",
                reason=Reason.INVALID_EVENT_TYPE,
            ) from None
    return [t for t in ALL_EVENT_TYPES if t in wanted] if wanted else list(ALL_EVENT_TYPES)


def types_of_change(status: str, previous_status: str | None, deleted: bool) -> list[EventType]:
    """The event types one log row stands for. `previous_status` is the document's status in
    its previous event (None for its first event, or when that event was pruned)."""
    if deleted:
        return [EventType.DOCUMENT_DELETED]
    if status == previous_status:
        return []  # progress, attempts, chunk counts: not a status change
    types = [EventType.DOCUMENT_STATUS_CHANGED]
    if status == "READY":
        types.append(EventType.DOCUMENT_READY)
    elif status == "FAILED":
        types.append(EventType.DOCUMENT_FAILED)
    return types


def payload(
    event_type: EventType, *, event_id: int, cursor: EventCursor, timestamp: dt.datetime, document_id: str,
    collection: str, filename: str | None, status: str, error_code: str | None, error_message: str | None,
    chunk_count: int,
) -> dict[str, Any]:
    """The Standard Webhooks body: {"type", "timestamp", "data"}."""
    return {
        "type": str(event_type),
        "timestamp": timestamp.astimezone(dt.UTC).isoformat().replace("+00:00", "Z"),
        "data": {
            "event_id": event_id,
            "cursor": cursor.encode(),
            "document_id": document_id,
            "name": document_name(collection, document_id),
            "collection": collection,
            "filename": filename or "",
            "status": status,
            "error": {"code": error_code or "", "message": error_message or ""},
            "chunk_count": chunk_count,
        },
    }


def body_of(payload_value: dict[str, Any]) -> bytes:
    """The exact bytes POSTed (and signed): compact JSON, keys in a fixed order."""
    return json.dumps(payload_value, separators=(",", ":"), ensure_ascii=False).encode()
