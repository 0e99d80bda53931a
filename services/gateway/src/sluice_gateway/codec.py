"""JSON in and out of protobuf messages, the protobuf JSON mapping, faster than json_format.

`to_json` gives exactly what `json_format.MessageToDict` gives (lowerCamelCase names, int64 as
strings, enums by name, bytes in base64, floats at their shortest, NaN and Infinity as strings,
fields at their default left out), but from a table of converters made once per message type
instead of re-deciding every field's kind on every value: a SearchResponse of ten hits was a
tenth of the gateway's time in json_format (docs/http.md, "Speed"). Well-known types
(google.protobuf.*: Timestamp, Struct, Value, wrappers, …) still go through json_format, whose
special forms they need. tests/gateway/test_codec.py compares the two on every message the
services answer with. `dumps`/`loads` are orjson's (bytes, no intermediate str).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from google.protobuf import descriptor, json_format, message
from google.protobuf.internal import type_checkers

if TYPE_CHECKING:
    # What Message.DESCRIPTOR is under protobuf's upb backend (types-protobuf types it so).
    from google._upb._message import Descriptor as UpbDescriptor

FD = descriptor.FieldDescriptor
Converter = Callable[[Any], Any]

_INT64 = (FD.CPPTYPE_INT64, FD.CPPTYPE_UINT64)
_CONVERTERS: dict[str, dict[str, tuple[str, Converter]]] = {}


def dumps(document: Any) -> bytes:
    return orjson.dumps(document)


def loads(body: bytes) -> Any:
    return orjson.loads(body)


def to_json(msg: message.Message) -> dict[str, Any]:
    """json_format.MessageToDict(msg), faster (see the module's docstring)."""
    descriptor_ = msg.DESCRIPTOR
    if descriptor_.full_name.startswith("google.protobuf."):
        converted: dict[str, Any] = json_format.MessageToDict(msg)
        return converted
    table = _CONVERTERS.get(descriptor_.full_name)
    if table is None:
        table = _table(descriptor_)
    return {table[field.name][0]: table[field.name][1](value) for field, value in msg.ListFields()}


def _table(descriptor_: descriptor.Descriptor | UpbDescriptor) -> dict[str, tuple[str, Converter]]:
    table = {field.name: (field.json_name, _field_converter(field)) for field in descriptor_.fields}
    _CONVERTERS[descriptor_.full_name] = table
    return table


def _field_converter(field: Any) -> Converter:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key_field, value_field = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        convert_value = _single(value_field)
        if key_field.cpp_type == FD.CPPTYPE_BOOL:
            return lambda entries: {("true" if key else "false"): convert_value(entries[key]) for key in entries}
        return lambda entries: {str(key): convert_value(entries[key]) for key in entries}
    single = _single(field)
    if field.is_repeated:
        return lambda values: [single(value) for value in values]
    return single


def _identity(value: Any) -> Any:
    return value


def _single(field: Any) -> Converter:
    cpp = field.cpp_type
    if cpp == FD.CPPTYPE_MESSAGE:
        return to_json
    if cpp == FD.CPPTYPE_ENUM:
        if field.enum_type.full_name == "google.protobuf.NullValue":
            return lambda value: None
        names = {number: value.name for number, value in field.enum_type.values_by_number.items()}
        return lambda value: names.get(value, value)  # an unknown number of an open enum stays a number
    if field.type == FD.TYPE_BYTES:
        return lambda value: base64.b64encode(value).decode()
    if cpp in _INT64:
        return str
    if cpp == FD.CPPTYPE_FLOAT:
        return lambda value: _special(value) or type_checkers.ToShortestFloat(value)
    if cpp == FD.CPPTYPE_DOUBLE:
        return lambda value: _special(value) or value
    return _identity


def _special(value: float) -> str | None:
    if math.isinf(value):
        return "-Infinity" if value < 0 else "Infinity"
    if math.isnan(value):
        return "NaN"
    return None
