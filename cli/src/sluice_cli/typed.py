"""Typed metadata and `where` conditions from the command line.

A value is typed by its form: `true` / `false` a boolean, a decimal number a number, a date or
date-time in ISO 8601 (`2024-05-01`, `2024-05-01T12:00:00+02:00`; without a zone, UTC) a
timestamp, `[a,b]` a list of strings (upload only), and anything else a string; quotes
(`"2024"`, `'true'`) force a string. A condition is `KEY OP VALUE` with OP one of
`= != > >= < <=`, or `KEY in A,B,C`, `KEY not-in A,B`, `KEY exists`, `KEY not-exists`.
"""

from __future__ import annotations

import datetime as dt
import re

from google.protobuf.timestamp_pb2 import Timestamp
from sluice.v1 import document_pb2, search_service_pb2

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ].+)?")
_CONDITION = re.compile(
    r"^\s*(?P<key>[^\s=!<>]+)\s*(?:(?P<symbol>>=|<=|!=|=|>|<)\s*(?P<value>.*?)"
    r"|\s+(?P<word>in|not-in)\s+(?P<values>.+?)|\s+(?P<test>exists|not-exists))\s*$"
)
_SYMBOLS = {"=": "EQ", "!=": "NE", ">": "GT", ">=": "GTE", "<": "LT", "<=": "LTE"}
_WORDS = {"in": "IN", "not-in": "NOT_IN", "exists": "EXISTS", "not-exists": "NOT_EXISTS"}


def value(text: str, *, lists: bool = False) -> document_pb2.MetadataValue:
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
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.UTC)
            stamp = Timestamp()
            stamp.FromDatetime(moment.astimezone(dt.UTC))
            return document_pb2.MetadataValue(timestamp_value=stamp)
    if lists and text.startswith("[") and text.endswith("]"):
        items = [item.strip() for item in text[1:-1].split(",") if item.strip()]
        return document_pb2.MetadataValue(string_list_value=document_pb2.StringList(values=items))
    return document_pb2.MetadataValue(string_value=text)


def condition(text: str) -> search_service_pb2.MetadataFilter:
    """One `where` condition; ValueError with a readable message when it cannot be read."""
    match = _CONDITION.match(text)
    if not match:
        raise ValueError(f"expected KEY OP VALUE (OP: = != > >= < <=), KEY in A,B, KEY not-in A,B, KEY exists or "
                         f"KEY not-exists; got {text!r}")
    result = search_service_pb2.MetadataCondition(key=match["key"])
    if match["symbol"]:
        result.op = search_service_pb2.FilterOperator.Value("FILTER_OPERATOR_" + _SYMBOLS[match["symbol"]])
        result.value.CopyFrom(value(match["value"]))
    elif match["word"]:
        result.op = search_service_pb2.FilterOperator.Value("FILTER_OPERATOR_" + _WORDS[match["word"]])
        result.values.extend(value(item) for item in match["values"].split(",") if item.strip())
    else:
        result.op = search_service_pb2.FilterOperator.Value("FILTER_OPERATOR_" + _WORDS[match["test"]])
    return search_service_pb2.MetadataFilter(condition=result)


def where(texts: list[str]) -> search_service_pb2.MetadataFilter | None:
    """Every condition must hold (all_of); None for none."""
    conditions = [condition(text) for text in texts]
    if not conditions:
        return None
    if len(conditions) == 1:
        return conditions[0]
    return search_service_pb2.MetadataFilter(all_of=search_service_pb2.MetadataFilterList(filters=conditions))


__all__ = ["condition", "value", "where"]
