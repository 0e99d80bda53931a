"""The event types a subscription may ask for, and how one log row becomes events and a payload.

One place names them: the wire names (`document.ready`…) and the proto enum values map here.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass
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
    # A sync run of one of the collection's sources (docs/sources.md): only when named.
    SOURCE_RUN_STARTED = "source_run.started"
    SOURCE_RUN_PROGRESS = "source_run.progress"
    SOURCE_RUN_FINISHED = "source_run.finished"


ALL_EVENT_TYPES: tuple[EventType, ...] = tuple(EventType)
# What a subscription that names no type gets: the document events, as before run events existed
# (a receiver written for them is not sent payloads of another shape).
DOCUMENT_EVENT_TYPES: tuple[EventType, ...] = tuple(t for t in EventType if t.startswith("document."))
# The event type of each kind of run event (migration 0024's run_event).
RUN_EVENT_TYPES = {
    "STARTED": EventType.SOURCE_RUN_STARTED,
    "PROGRESS": EventType.SOURCE_RUN_PROGRESS,
    "FINISHED": EventType.SOURCE_RUN_FINISHED,
}


def event_types_of(values: Iterable[str]) -> list[EventType]:
    """The requested types, deduplicated in declaration order; none means the document events."""
    wanted = set()
    for value in values:
        try:
            wanted.add(EventType(value))
        except ValueError:
            raise InvalidArgument(
                f"unknown webhook event type {value!r}; known: {', '.join(ALL_EVENT_TYPES)}",
                reason=Reason.INVALID_EVENT_TYPE,
            ) from None
    return [t for t in ALL_EVENT_TYPES if t in wanted] if wanted else list(DOCUMENT_EVENT_TYPES)


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


@dataclass(frozen=True, slots=True)
class Description:
    """What does not change over a document's life, as a payload shows it (docs/webhooks.md)."""

    filename: str = ""
    source_uri: str = ""
    version: int = 0
    content_sha256: str = ""


def payload(
    event_type: EventType,
    *,
    event_id: int,
    cursor: EventCursor,
    timestamp: dt.datetime,
    document_id: str,
    collection: str,
    description: Description | None,
    status: str,
    error_code: str | None,
    error_message: str | None,
    chunk_count: int,
) -> dict[str, Any]:
    """The Standard Webhooks body: {"type", "timestamp", "data"}."""
    described = description or Description()
    return {
        "type": str(event_type),
        "timestamp": timestamp.astimezone(dt.UTC).isoformat().replace("+00:00", "Z"),
        "data": {
            "event_id": event_id,
            "cursor": cursor.encode(),
            "document_id": document_id,
            "name": document_name(collection, document_id),
            "collection": collection,
            "filename": described.filename,
            "status": status,
            "error": {"code": error_code or "", "message": error_message or ""},
            "chunk_count": chunk_count,
            "source_uri": described.source_uri,
            "version": described.version,
            "content_sha256": described.content_sha256,
        },
    }


def run_payload(
    event_type: EventType,
    *,
    event_id: int,
    cursor: EventCursor,
    timestamp: dt.datetime,
    collection: str,
    source_run: dict[str, Any],
) -> dict[str, Any]:
    """The body of a run event: `data` has the event's id, cursor and collection, and the fields
    of the stream's SourceRunEvent (`source`, `source_display_name`, `run`) in the JSON form the
    CLI's `watch --collection --json` prints (proto field names, enum names, int64 as strings)."""
    return {
        "type": str(event_type),
        "timestamp": timestamp.astimezone(dt.UTC).isoformat().replace("+00:00", "Z"),
        "data": {"event_id": event_id, "cursor": cursor.encode(), "collection": collection, **source_run},
    }


def body_of(payload_value: dict[str, Any]) -> bytes:
    """The exact bytes POSTed (and signed): compact JSON, keys in a fixed order."""
    return json.dumps(payload_value, separators=(",", ":"), ensure_ascii=False).encode()
