"""Typed document metadata: the one place that knows how a value is stored and shown.

A document's metadata is one jsonb object (`documents.metadata`). Clients give entries as
strings (`UploadDocumentMetadata.metadata`) or typed (`typed_metadata`, a `MetadataValue`);
both end in the same object, one JSON value per key:

    string            "report"                       a JSON string
    number            2024, 0.5                      a JSON number (integral values as integers)
    boolean           true                           a JSON boolean
    list of strings   ["a", "b"]                     a JSON array of strings
    timestamp         {"$timestamp": "2024-05-01T12:00:00.000000Z"}

A timestamp is an object with one key, because JSON has no timestamp type and a string would
be indistinguishable from text; its text has one fixed width (UTC, microseconds), so text
order is time order and search compares it with COLLATE "C" (docs/search.md, "Filters").
Nothing else in the object is ever an object: clients cannot write one.

`Document.metadata` (map<string, string>) keeps showing every entry, as text
(`text_form`); `typed_metadata` shows them with their types (`to_proto`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from sluice.v1 import document_pb2

TIMESTAMP_TAG = "$timestamp"
MAX_ENTRIES = 64
MAX_KEY_CHARACTERS = 64
MAX_VALUE_CHARACTERS = 1024
MAX_LIST_ITEMS = 100
_MIN = dt.datetime(1, 1, 1, tzinfo=dt.UTC)
_MAX = dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)

Json = Any  # str | float | int | bool | list[str] | dict[str, str]


class MetadataError(ValueError):
    """A value that cannot be metadata; the message says why (without the key)."""


# ------------------------------------------------------------------ timestamps


def timestamp_text(moment: dt.datetime) -> str:
    """The stored, fixed-width form: text order is time order (years 0001-9999)."""
    utc = moment.astimezone(dt.UTC)
    return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}.{utc.microsecond:06d}Z"


def datetime_of(value: Timestamp) -> dt.datetime:
    """A protobuf Timestamp as an aware datetime, truncated to the microsecond."""
    if not -62135596800 <= value.seconds <= 253402300799 or not 0 <= value.nanos < 1_000_000_000:
        raise MetadataError("a timestamp must lie between 0001-01-01 and 9999-12-31 UTC")
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)


def _rfc3339(stored: str) -> str:
    """The readable form of a stored timestamp: RFC 3339 UTC, fractions only when non-zero."""
    head, _, fraction = stored.rstrip("Z").partition(".")
    fraction = fraction.rstrip("0")
    return f"{head}.{fraction}Z" if fraction else f"{head}Z"


def is_timestamp(value: Json) -> bool:
    return isinstance(value, dict) and set(value) == {TIMESTAMP_TAG} and isinstance(value[TIMESTAMP_TAG], str)


# ------------------------------------------------------------------ proto <-> stored JSON


def number(value: float) -> int | float:
    """A finite number as stored: integral values as integers (exact up to 2^53)."""
    if not math.isfinite(value):
        raise MetadataError("a number must be finite (not NaN or infinity)")
    if value == int(value) and abs(value) < 2**53:
        return int(value)
    return float(value)


def check_text(value: str, what: str = "a string") -> str:
    if len(value) > MAX_VALUE_CHARACTERS:
        raise MetadataError(f"{what} is {len(value)} characters long; at most {MAX_VALUE_CHARACTERS} are allowed")
    if "\x00" in value:
        raise MetadataError(f"{what} contains a NUL character (U+0000), which cannot be stored")
    return value


def from_proto(value: document_pb2.MetadataValue) -> Json:
    """The stored JSON of a MetadataValue; MetadataError when it is unset or invalid."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return check_text(value.string_value)
    if kind == "number_value":
        return number(value.number_value)
    if kind == "bool_value":
        return bool(value.bool_value)
    if kind == "timestamp_value":
        return {TIMESTAMP_TAG: timestamp_text(datetime_of(value.timestamp_value))}
    if kind == "string_list_value":
        items = list(value.string_list_value.values)
        if len(items) > MAX_LIST_ITEMS:
            raise MetadataError(f"a string list has {len(items)} items; at most {MAX_LIST_ITEMS} are allowed")
        return [check_text(item, "a list item") for item in items]
    raise MetadataError("no value is set (set one of string_value, number_value, bool_value, timestamp_value, string_list_value)")


def to_proto(value: Json) -> document_pb2.MetadataValue:
    """A stored JSON value as a MetadataValue (anything unexpected shows as its JSON text)."""
    if isinstance(value, bool):
        return document_pb2.MetadataValue(bool_value=value)
    if isinstance(value, int | float):
        return document_pb2.MetadataValue(number_value=float(value))
    if isinstance(value, str):
        return document_pb2.MetadataValue(string_value=value)
    if is_timestamp(value):
        moment = dt.datetime.strptime(value[TIMESTAMP_TAG], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)
        stamp = Timestamp()
        stamp.FromDatetime(moment)
        return document_pb2.MetadataValue(timestamp_value=stamp)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return document_pb2.MetadataValue(string_list_value=document_pb2.StringList(values=value))
    return document_pb2.MetadataValue(string_value=json.dumps(value, ensure_ascii=False))


def text_form(value: Json) -> str:
    """How an entry shows in the string map (Document.metadata, SearchHit.metadata)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if is_timestamp(value):
        return _rfc3339(value[TIMESTAMP_TAG])
    return json.dumps(value, ensure_ascii=False)


def text_map(metadata: Mapping[str, Json] | None) -> dict[str, str]:
    return {str(key): text_form(value) for key, value in (metadata or {}).items()}


def typed_map(metadata: Mapping[str, Json] | None) -> dict[str, document_pb2.MetadataValue]:
    return {str(key): to_proto(value) for key, value in (metadata or {}).items()}


# ------------------------------------------------------------------ an upload's entries


def check_key(key: str) -> None:
    if not 1 <= len(key) <= MAX_KEY_CHARACTERS:
        raise MetadataError(f"metadata keys must be 1 to {MAX_KEY_CHARACTERS} characters; {key[:80]!r} is {len(key)}")
    if "\x00" in key:
        raise MetadataError("a metadata key contains a NUL character (U+0000)")


def merge_upload(strings: Mapping[str, str], typed: Mapping[str, Json]) -> dict[str, Json]:
    """The document's metadata object from an upload's two maps (typed values already converted
    by from_proto). MetadataError names the problem: too many entries, a bad key, a key in both."""
    if len(strings) + len(typed) > MAX_ENTRIES:
        raise MetadataError(
            f"at most {MAX_ENTRIES} metadata entries are allowed (metadata and typed_metadata together); "
            f"got {len(strings) + len(typed)}"
        )
    both = sorted(set(strings) & set(typed))
    if both:
        raise MetadataError(f"metadata key {both[0][:64]!r} is given both in metadata and in typed_metadata")
    merged: dict[str, Json] = {}
    for key, value in strings.items():
        check_key(key)
        merged[key] = check_text(value, f"the value of {key[:64]!r}")
    for key, value in typed.items():
        check_key(key)
        merged[key] = value
    return merged


__all__ = [
    "TIMESTAMP_TAG",
    "MetadataError",
    "check_key",
    "check_text",
    "datetime_of",
    "from_proto",
    "is_timestamp",
    "merge_upload",
    "number",
    "text_form",
    "text_map",
    "timestamp_text",
    "to_proto",
    "typed_map",
]
