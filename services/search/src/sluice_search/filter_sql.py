"""The SQL of a checked filter (filters.py): a predicate on `documents d`, every key and value a
bound parameter (named `f_<n>`, so they never collide with a query's own). How each operator
becomes SQL, and which of them PostgreSQL's indexes serve (docs/search.md, "Filters"):

* EQ / IN are containment (`d.metadata @> ANY(<jsonb[]>)`), served by the GIN index on
  `documents.metadata` (migration 0017); a string also matches a list holding it.
* NE / NOT_IN are their negation; EXISTS / NOT_EXISTS are `?` (the GIN index serves EXISTS).
* Ranges compare like with like only: numbers as jsonb numbers, strings and timestamps as text
  in code point order (COLLATE "C"; stored timestamps have one fixed width, so text order is
  time order). A document whose value has another type does not match.
"""

from __future__ import annotations

import itertools
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb
from sluice_common import metadata

from .domain import DocumentFilter
from .filters import EQ, EXISTS, GT, GTE, IN, LT, LTE, NE, NOT_EXISTS, NOT_IN, Condition, Node, TimeRange, Value, equals

_RANGE_SQL = {GT: ">", GTE: ">=", LT: "<", LTE: "<="}


class Params:
    """Bound parameters named f_1, f_2, … (a query's own names never start with f_)."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self._next = itertools.count(1)

    def add(self, value: object) -> sql.Composable:
        name = f"f_{next(self._next)}"
        self.params[name] = value
        return sql.Placeholder(name)


def _containments(key: str, values: tuple[Value, ...]) -> list[Jsonb]:
    out = []
    for value in values:
        out.append(Jsonb({key: value.json}))
        if value.kind == "string":
            out.append(Jsonb({key: [value.json]}))  # a list holding the string
    return out


def condition_sql(condition: Condition, params: Params) -> sql.Composable:
    op, key = condition.op, condition.key
    if op in (EXISTS, NOT_EXISTS):
        test = sql.SQL("d.metadata ? {}").format(params.add(key))
        return test if op == EXISTS else sql.SQL("NOT ({})").format(test)
    if op in (EQ, NE, IN, NOT_IN):
        test = sql.SQL("d.metadata @> ANY({}::jsonb[])").format(params.add(_containments(key, condition.values)))
        return test if op in (EQ, IN) else sql.SQL("NOT ({})").format(test)
    (value,) = condition.values
    entry = sql.SQL("(d.metadata -> {})").format(params.add(key))
    compare = sql.SQL(_RANGE_SQL[op])
    if value.kind == "number":
        return sql.SQL("coalesce(CASE WHEN jsonb_typeof({e}) = 'number' THEN {e} {cmp} {v}::jsonb END, false)").format(
            e=entry, cmp=compare, v=params.add(Jsonb(value.json))
        )
    if value.kind == "string":
        return sql.SQL(
            "coalesce(CASE WHEN jsonb_typeof({e}) = 'string' THEN ({e} #>> '{{}}') COLLATE \"C\" {cmp} {v}::text END, false)"
        ).format(e=entry, cmp=compare, v=params.add(value.text))
    return sql.SQL(
        "coalesce(CASE WHEN jsonb_typeof({e}) = 'object' THEN ({e} ->> {tag}) COLLATE \"C\" {cmp} {v}::text END, false)"
    ).format(e=entry, cmp=compare, tag=sql.Literal(metadata.TIMESTAMP_TAG), v=params.add(value.text))


def where_sql(node: Node, params: Params) -> sql.Composable:
    if isinstance(node, Condition):
        return condition_sql(node, params)
    joiner = sql.SQL(" AND " if node.all else " OR ")
    return sql.SQL("({})").format(joiner.join(where_sql(child, params) for child in node.children))


def range_sql(column: str, time_range: TimeRange, params: Params) -> list[sql.Composable]:
    parts: list[sql.Composable] = []
    if time_range.start is not None:
        parts.append(sql.SQL("{} >= {}").format(sql.SQL(column), params.add(time_range.start)))
    if time_range.end is not None:
        parts.append(sql.SQL("{} < {}").format(sql.SQL(column), params.add(time_range.end)))
    return parts


def filter_sql(filter: DocumentFilter) -> tuple[sql.Composable, dict[str, Any]]:
    """The whole filter as predicates on `documents d`, each preceded by " AND " (empty when
    there is none), and their parameters."""
    params = Params({})
    parts: list[sql.Composable] = [condition_sql(equals(key, value), params) for key, value in filter.metadata.items()]
    if filter.filenames:
        parts.append(sql.SQL("d.filename = ANY({}::text[])").format(params.add(list(filter.filenames))))
    if filter.mime_types:
        parts.append(sql.SQL("d.mime_type = ANY({}::text[])").format(params.add(list(filter.mime_types))))
    if filter.document_ids:
        parts.append(sql.SQL("d.id = ANY({}::uuid[])").format(params.add(list(filter.document_ids))))
    if filter.where is not None:
        parts.append(where_sql(filter.where, params))
    if filter.created is not None:
        parts += range_sql("d.created_at", filter.created, params)
    if filter.updated is not None:
        parts += range_sql("d.updated_at", filter.updated, params)
    if not parts:
        return sql.SQL(""), params.params
    return sql.SQL(" AND ") + sql.SQL(" AND ").join(parts), params.params


__all__ = ["filter_sql"]
