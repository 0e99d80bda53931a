"""LlamaIndex's MetadataFilters as a Sluice `where` filter (docs/search.md, "Conditions").

Each LlamaIndex operator becomes the Sluice condition that matches the same documents:

| LlamaIndex | Sluice |
|---|---|
| `==`, `!=`, `>`, `>=`, `<`, `<=` | EQ, NE, GT, GTE, LT, LTE |
| `in`, `nin` | IN, NOT_IN |
| `contains` (a list holds the value) | EQ (a string list matches EQ when it holds the string) |
| `any` (a list holds one of the values) | IN |
| `all` (a list holds every value) | all_of EQ per value |
| `is_empty` | NOT_EXISTS (Sluice stores no null; a key holding an empty list is not matched) |
| AND, OR | all_of, any_of |

`text_match`, `text_match_insensitive` and NOT have no Sluice counterpart: a ValueError says so
before any call. Comparisons never convert types, as everywhere in Sluice: 2024 (a number) is not
"2024" (a string).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
from sluice_client.filters import metadata_value
from sluice_client.protos import search_service_pb2 as pb

_SINGLE = {
    FilterOperator.EQ: pb.FILTER_OPERATOR_EQ,
    FilterOperator.NE: pb.FILTER_OPERATOR_NE,
    FilterOperator.GT: pb.FILTER_OPERATOR_GT,
    FilterOperator.GTE: pb.FILTER_OPERATOR_GTE,
    FilterOperator.LT: pb.FILTER_OPERATOR_LT,
    FilterOperator.LTE: pb.FILTER_OPERATOR_LTE,
    FilterOperator.CONTAINS: pb.FILTER_OPERATOR_EQ,
}
_MANY = {
    FilterOperator.IN: pb.FILTER_OPERATOR_IN,
    FilterOperator.NIN: pb.FILTER_OPERATOR_NOT_IN,
    FilterOperator.ANY: pb.FILTER_OPERATOR_IN,
}


def where_of(filters: MetadataFilters) -> pb.MetadataFilter:
    """The Sluice filter matching what `filters` matches (see the module's docstring)."""
    if filters.condition not in (FilterCondition.AND, FilterCondition.OR, None):
        raise ValueError(f"Sluice filters have no {filters.condition.value!r} group: use AND or OR")
    parts = [where_of(f) if isinstance(f, MetadataFilters) else _condition(f) for f in filters.filters]
    if not parts:
        raise ValueError("MetadataFilters holds no filter")
    if len(parts) == 1:
        return parts[0]
    group = pb.MetadataFilterList(filters=parts)
    return pb.MetadataFilter(any_of=group) if filters.condition == FilterCondition.OR else pb.MetadataFilter(all_of=group)


def _condition(f: MetadataFilter) -> pb.MetadataFilter:
    if f.operator == FilterOperator.IS_EMPTY:
        return _leaf(pb.MetadataCondition(key=f.key, op=pb.FILTER_OPERATOR_NOT_EXISTS))
    if f.operator == FilterOperator.ALL:
        values = _values(f)
        conditions = [_leaf(pb.MetadataCondition(key=f.key, op=pb.FILTER_OPERATOR_EQ, value=metadata_value(v))) for v in values]
        return conditions[0] if len(conditions) == 1 else pb.MetadataFilter(all_of=pb.MetadataFilterList(filters=conditions))
    if f.operator in _MANY:
        values = [metadata_value(v) for v in _values(f)]
        return _leaf(pb.MetadataCondition(key=f.key, op=_MANY[f.operator], values=values))
    if f.operator in _SINGLE:
        if f.value is None or isinstance(f.value, list):
            raise ValueError(f"the filter on {f.key!r} ({f.operator.value}) needs one value, not {f.value!r}")
        return _leaf(pb.MetadataCondition(key=f.key, op=_SINGLE[f.operator], value=metadata_value(f.value)))
    raise ValueError(f"Sluice has no {f.operator.value!r} filter (on {f.key!r}); docs/search.md lists its conditions")


def _values(f: MetadataFilter) -> list[Any]:
    values = f.value if isinstance(f.value, list) else [f.value] if f.value is not None else []
    if not values:
        raise ValueError(f"the filter on {f.key!r} ({f.operator.value}) needs at least one value")
    return list(values)


def _leaf(condition: pb.MetadataCondition) -> pb.MetadataFilter:
    return pb.MetadataFilter(condition=condition)
