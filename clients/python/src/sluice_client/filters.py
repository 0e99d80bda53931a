"""Typed metadata values and `where` conditions, from Python values or from text.

Python values keep their type: str, int/float (numbers), bool, datetime (timestamps; naive
means UTC), list/tuple of str. Text (`parse_value`, as the CLI reads it) is typed by its form:
`true` / `false` a boolean, a decimal number a number, an ISO 8601 date or date-time a
timestamp, `[a,b]` a list (with lists=True), anything else a string; quotes (`"2024"`) force a
string. A condition is `KEY OP VALUE` with OP one of `= != > >= < <=`, or `KEY in A,B,C`,
`KEY not-in A,B`, `KEY exists`, `KEY not-exists`. docs/search.md, "Filters", says how each compares.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from .errors import InvalidArgument
from .protos import document_pb2, search_service_pb2

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ].+)?")
_CONDITION = re.compile(
    r"^\s*(?P<key>[^\s=!<>]+)\s*(?:(?P<symbol>>=|<=|!=|=|>|<)\s*(?P<value>.*?)"
    r"|\s+(?P<word>in|not-in)\s+(?P<values>.+?)|\s+(?P<test>exists|not-exists))\s*$"
)
_SYMBOLS = {"=": "EQ", "!=": "NE", ">": "GT", ">=": "GTE", "<": "LT", "<=": "LTE"}
_WORDS = {"in": "IN", "not-in": "NOT_IN", "exists": "EXISTS", "not-exists": "NOT_EXISTS"}


def _timestamp(moment: dt.datetime) -> Timestamp:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    stamp = Timestamp()
    stamp.FromDatetime(moment.astimezone(dt.UTC))
    return stamp


def metadata_value(value: Any) -> document_pb2.MetadataValue:
    """A MetadataValue from a Python value (see the module's docstring)."""
    if isinstance(value, document_pb2.MetadataValue):
        return value
    if isinstance(value, bool):
        return document_pb2.MetadataValue(bool_value=value)
    if isinstance(value, (int, float)):
        return document_pb2.MetadataValue(number_value=float(value))
    if isinstance(value, dt.datetime):
        return document_pb2.MetadataValue(timestamp_value=_timestamp(value))
    if isinstance(value, dt.date):
        return document_pb2.MetadataValue(timestamp_value=_timestamp(dt.datetime(value.year, value.month, value.day)))
    if isinstance(value, (list, tuple)):
        return document_pb2.MetadataValue(string_list_value=document_pb2.StringList(values=[str(v) for v in value]))
    return document_pb2.MetadataValue(string_value=str(value))


def parse_value(text: str, *, lists: bool = False) -> document_pb2.MetadataValue:
    """A MetadataValue typed by the text's form (see the module's docstring)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return document_pb2.MetadataValue(string_value=text[1:-1])
    if text in ("true", "false"):
        return document_pb2.MetadataValue(bool_value=text == "true")
    if _NUMBER.fullmatch(text):
        return document_pb2.MetadataValue(number_value=float(text))
    if _DATE.fullmatch(text):
        try:
            moment = dt.datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            return document_pb2.MetadataValue(timestamp_value=_timestamp(moment))
    if lists and text.startswith("[") and text.endswith("]"):
        items = [item.strip() for item in text[1:-1].split(",") if item.strip()]
        return document_pb2.MetadataValue(string_list_value=document_pb2.StringList(values=items))
    return document_pb2.MetadataValue(string_value=text)


class InvalidCondition(InvalidArgument, ValueError):
    """A `where` condition that cannot be read, refused before any call (INVALID_FILTER, as the
    server names a filter it refuses); a ValueError too, for callers that catch that."""


def condition(text: str) -> search_service_pb2.MetadataFilter:
    """One condition from text; InvalidCondition with a readable message when it cannot be read."""
    match = _CONDITION.match(text)
    if not match:
        raise InvalidCondition(
            f"expected KEY OP VALUE (OP: = != > >= < <=), KEY in A,B, KEY not-in A,B, KEY exists or KEY not-exists; got {text!r}",
            reason="INVALID_FILTER",
        )
    result = search_service_pb2.MetadataCondition(key=match["key"])
    value = (match["value"] or "").strip()
    if match["symbol"] and value[:1] in ("=", "!", "<", ">"):
        # "year>>2024" would compare with the string ">2024" and silently match nothing.
        raise InvalidCondition(
            f"condition {text!r}: its value {value!r} starts with an operator; write one operator"
            f" (= != > >= < <=), or quote the value to compare with that string ('{value}')",
            reason="INVALID_FILTER",
        )
    if match["symbol"]:
        result.op = search_service_pb2.FilterOperator.Value("FILTER_OPERATOR_" + _SYMBOLS[match["symbol"]])
        result.value.CopyFrom(parse_value(match["value"]))
    elif match["word"]:
        result.op = search_service_pb2.FilterOperator.Value("FILTER_OPERATOR_" + _WORDS[match["word"]])
        result.values.extend(parse_value(item) for item in match["values"].split(",") if item.strip())
    else:
        result.op = search_service_pb2.FilterOperator.Value("FILTER_OPERATOR_" + _WORDS[match["test"]])
    return search_service_pb2.MetadataFilter(condition=result)


def where(
    conditions: str | search_service_pb2.MetadataFilter | Iterable[str | search_service_pb2.MetadataFilter] | None,
) -> search_service_pb2.MetadataFilter | None:
    """Conditions that must all hold (all_of): text (see `condition`) or MetadataFilter messages."""
    if conditions is None:
        return None
    if isinstance(conditions, (str, search_service_pb2.MetadataFilter)):
        conditions = [conditions]
    parsed = [c if isinstance(c, search_service_pb2.MetadataFilter) else condition(c) for c in conditions]
    if not parsed:
        return None
    if len(parsed) == 1:
        return parsed[0]
    return search_service_pb2.MetadataFilter(all_of=search_service_pb2.MetadataFilterList(filters=parsed))


__all__ = ["condition", "metadata_value", "parse_value", "where"]
