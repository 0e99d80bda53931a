"""Typed metadata filters: the request's tree checked into plain values, and its SQL.

`SearchFilter.where` is a tree of conditions (`MetadataCondition`) under `all_of` / `any_of`.
`parse_where` turns it into `Condition` / `Group` values, refusing with INVALID_ARGUMENT
(reason INVALID_FILTER) and a message that names the part at fault: an unknown or missing
operator, a value of the wrong type for the operator, mixed types in IN, too deep a tree, too
many conditions or values. Nothing reaches SQL unchecked.

The SQL of a checked tree is made by `filter_sql` (an adapter); this module is pure.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

from sluice.v1 import document_pb2, search_service_pb2
from sluice_common import metadata
from sluice_common.errors import InvalidArgument
from sluice_common.reasons import Reason

MAX_DEPTH = 4
MAX_CONDITIONS = 32
MAX_VALUES = 100

EQ, NE, IN, NOT_IN, GT, GTE, LT, LTE, EXISTS, NOT_EXISTS = (
    "EQ",
    "NE",
    "IN",
    "NOT_IN",
    "GT",
    "GTE",
    "LT",
    "LTE",
    "EXISTS",
    "NOT_EXISTS",
)
_OPERATORS = {
    search_service_pb2.FILTER_OPERATOR_EQ: EQ,
    search_service_pb2.FILTER_OPERATOR_NE: NE,
    search_service_pb2.FILTER_OPERATOR_IN: IN,
    search_service_pb2.FILTER_OPERATOR_NOT_IN: NOT_IN,
    search_service_pb2.FILTER_OPERATOR_GT: GT,
    search_service_pb2.FILTER_OPERATOR_GTE: GTE,
    search_service_pb2.FILTER_OPERATOR_LT: LT,
    search_service_pb2.FILTER_OPERATOR_LTE: LTE,
    search_service_pb2.FILTER_OPERATOR_EXISTS: EXISTS,
    search_service_pb2.FILTER_OPERATOR_NOT_EXISTS: NOT_EXISTS,
}
RANGES = (GT, GTE, LT, LTE)
_KIND_NAMES = {
    "string": "a string",
    "number": "a number",
    "bool": "a boolean",
    "timestamp": "a timestamp",
    "list": "a string list",
}


@dataclass(frozen=True)
class Value:
    """A filter value: its kind ("string", "number", "bool", "timestamp") and its stored JSON
    (sluice_common.metadata), so that containment compares it with what uploads stored."""

    kind: str
    json: object

    @property
    def text(self) -> str:
        """Strings and timestamps as the text that ranges compare."""
        return self.json[metadata.TIMESTAMP_TAG] if self.kind == "timestamp" else self.json  # type: ignore[index,return-value]


@dataclass(frozen=True)
class Condition:
    key: str
    op: str
    values: tuple[Value, ...] = ()


@dataclass(frozen=True)
class Group:
    """all_of (AND) when `all`, any_of (OR) otherwise."""

    all: bool
    children: tuple[Condition | Group, ...] = field(default=())


Node = Condition | Group


@dataclass(frozen=True)
class TimeRange:
    """[start, end); None is open."""

    start: dt.datetime | None = None
    end: dt.datetime | None = None


def _invalid(where: str, message: str) -> InvalidArgument:
    return InvalidArgument(f"{where}: {message}", reason=Reason.INVALID_FILTER)


# ------------------------------------------------------------------ parsing (the request's tree)


def parse_where(
    node: search_service_pb2.MetadataFilter,
    *,
    max_values: int = MAX_VALUES,
    max_depth: int = MAX_DEPTH,
    max_conditions: int = MAX_CONDITIONS,
) -> Node | None:
    """The checked tree of `filter.where`; None when it is unset (or an empty message)."""
    if node.WhichOneof("node") is None:
        return None
    counter = itertools.count(1)
    return _parse(node, "filter.where", 1, counter, max_values, max_depth, max_conditions)


def _parse(
    node: search_service_pb2.MetadataFilter,
    where: str,
    depth: int,
    counter: Iterator[int],
    max_values: int,
    max_depth: int,
    max_conditions: int,
) -> Node:
    kind = node.WhichOneof("node")
    if kind is None:
        raise _invalid(where, "an empty filter (set condition, all_of or any_of)")
    if depth > max_depth:
        raise _invalid(where, f"the filter is nested more than {max_depth} levels deep")
    if kind == "condition":
        if next(counter) > max_conditions:
            raise _invalid(where, f"the filter has more than {max_conditions} conditions")
        return _condition(node.condition, f"{where}.condition", max_values)
    operands = getattr(node, kind).filters
    if not operands:
        raise _invalid(f"{where}.{kind}", "needs at least one filter")
    children = tuple(
        _parse(child, f"{where}.{kind}[{i}]", depth + 1, counter, max_values, max_depth, max_conditions)
        for i, child in enumerate(operands)
    )
    return Group(all=kind == "all_of", children=children)


def _condition(condition: search_service_pb2.MetadataCondition, where: str, max_values: int) -> Condition:
    key = condition.key
    try:
        metadata.check_key(key)
    except metadata.MetadataError as err:
        raise _invalid(where, str(err)) from None
    if condition.op not in _OPERATORS:
        if condition.op == search_service_pb2.FILTER_OPERATOR_UNSPECIFIED:
            raise _invalid(where, f"op is required for key {key!r} (EQ, NE, IN, NOT_IN, GT, GTE, LT, LTE, EXISTS, NOT_EXISTS)")
        raise _invalid(where, f"unknown operator {condition.op} for key {key!r}")
    op = _OPERATORS[condition.op]
    has_value = condition.HasField("value")
    if op in (EXISTS, NOT_EXISTS):
        if has_value or condition.values:
            raise _invalid(where, f"{op} takes no value")
        return Condition(key, op)
    if op in (IN, NOT_IN):
        if has_value:
            raise _invalid(where, f"{op} takes `values`, not `value`")
        if not condition.values:
            raise _invalid(where, f"{op} needs 1 to {max_values} values")
        if len(condition.values) > max_values:
            raise _invalid(where, f"{op} has {len(condition.values)} values; at most {max_values} are allowed")
        values = tuple(_value(v, f"{where}.values[{i}]") for i, v in enumerate(condition.values))
        kinds = sorted({v.kind for v in values})
        if len(kinds) > 1:
            raise _invalid(
                where, f"type mismatch: the values of {op} must have one type; got {' and '.join(_KIND_NAMES[k] for k in kinds)}"
            )
        unique = {(v.kind, repr(v.json)): v for v in values}  # a timestamp's JSON is a dict: not hashable
        return Condition(key, op, tuple(unique.values()))
    if condition.values:
        raise _invalid(where, f"{op} takes `value`, not `values` (use IN for several)")
    if not has_value:
        raise _invalid(where, f"{op} needs a value")
    value = _value(condition.value, f"{where}.value")
    if op in RANGES and value.kind == "bool":
        raise _invalid(where, f"type mismatch: {op} needs a number, timestamp or string value, not a boolean")
    return Condition(key, op, (value,))


def _value(value: document_pb2.MetadataValue, where: str) -> Value:
    kind = value.WhichOneof("kind")
    if kind == "string_list_value":
        raise _invalid(where, "type mismatch: a string list cannot be compared; use IN with string values")
    try:
        stored = metadata.from_proto(value)
    except metadata.MetadataError as err:
        raise _invalid(where, str(err)) from None
    assert kind is not None  # from_proto refuses a value with no kind set
    return Value(
        {"string_value": "string", "number_value": "number", "bool_value": "bool", "timestamp_value": "timestamp"}[kind], stored
    )


def parse_range(message: search_service_pb2.TimeRange, where: str) -> TimeRange | None:
    start = end = None
    try:
        if message.HasField("start_time"):
            start = metadata.datetime_of(message.start_time)
        if message.HasField("end_time"):
            end = metadata.datetime_of(message.end_time)
    except metadata.MetadataError as err:
        raise _invalid(where, str(err)) from None
    if start is None and end is None:
        return None
    if start is not None and end is not None and end <= start:
        raise _invalid(where, "end_time must be after start_time")
    return TimeRange(start, end)


def equals(key: str, value: str) -> Condition:
    """The legacy `filter.metadata` entry: EQ with a string."""
    return Condition(key, EQ, (Value("string", value),))


__all__ = ["Condition", "Group", "Node", "TimeRange", "Value", "equals", "parse_range", "parse_where"]
