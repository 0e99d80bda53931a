"""The gateway's JSON decoding: the protobuf JSON mapping, with query vectors copied in directly
(docs/http.md#speed) and exactly what json_format would have made of them."""

from __future__ import annotations

import json
import math

import pytest
from google.protobuf import json_format
from sluice.v1 import search_service_pb2 as pb
from sluice_gateway import connect
from sluice_gateway.connect import parse_json
from sluice_gateway.methods import METHODS


def parsed(document: object) -> pb.SearchRequest:
    request = pb.SearchRequest()
    parse_json(json.dumps(document).encode(), request)
    return request


@pytest.mark.parametrize(
    "document",
    [
        {"collection": "docs", "queryVector": [0.25, -1, 3.5e-3], "topK": 3, "mode": "SEARCH_MODE_VECTOR"},
        {"collection": "docs", "query_vector": [1, 2], "top_k": 2},
        {
            "collection": "docs",
            "queryVector": [],
            "filter": {"where": {"condition": {"key": "year", "op": "FILTER_OPERATOR_GT", "value": {"numberValue": 2020}}}},
        },
    ],
)
def test_same_message_as_json_format(document):
    assert parsed(document) == json_format.Parse(json.dumps(document), pb.SearchRequest())


def test_unusual_vectors_take_json_formats_path():
    assert math.isnan(parsed({"queryVector": ["NaN", 1]}).query_vector[0])
    with pytest.raises(json_format.ParseError):
        parsed({"queryVector": ["abc"]})
    with pytest.raises(json_format.ParseError):
        parsed({"queryVector": [1], "nonsense": True})
    with pytest.raises(ValueError):
        parsed([1, 2])
    empty = pb.SearchRequest()
    parse_json(b"  ", empty)
    assert empty == pb.SearchRequest()


def _sample(field_name: str, json_type: type, numbers: dict[str, int] | None) -> object:
    if numbers is not None:
        return max(numbers, key=numbers.__getitem__)  # a name other than the zero value
    return {str: f"{field_name}-value", int: 7, bool: True}[json_type]


@pytest.mark.parametrize("method", sorted(METHODS), ids=lambda path: path.rsplit("/", 1)[-1])
def test_plain_fields_set_directly_are_what_json_format_sets(method):
    """Every request type: all its plain top-level fields at once, each on its own, through the
    direct path, give json_format's message."""
    cls = METHODS[method].request_class
    shape = connect._shape(cls.DESCRIPTOR)
    everything = {key: _sample(name, kind, numbers) for key, (name, kind, numbers) in shape.scalars.items()}
    for document in [everything, *({key: value} for key, value in everything.items())]:
        got = cls()
        parse_json(json.dumps(document).encode(), got)
        assert got == json_format.Parse(json.dumps(document), cls()), document
        assert connect._set_scalars(dict(document), cls(), shape)  # it took the direct path


@pytest.mark.parametrize(
    "document",
    [
        {"topK": 2**40},  # out of int32's range
        {"topK": -1.5},
        {"collection": 5},
        {"mode": "SEARCH_MODE_NONSENSE"},
        {"collection": "docs", "topK": [1]},
    ],
)
def test_unusual_plain_fields_fail_as_json_format_fails(document):
    with pytest.raises(json_format.ParseError) as expected:
        json_format.Parse(json.dumps(document), pb.SearchRequest())
    with pytest.raises(json_format.ParseError) as got:
        parsed(document)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize(
    "document",
    [
        {"collection": "docs", "topK": "5"},  # a number as a string, as the mapping allows
        {"collection": "docs", "topK": 5.0},
        {"collection": "docs", "top_k": 5},  # the proto name
        {"collection": "docs", "mode": 2},  # an enum by number
        {"collection": "docs", "queryVector": [1, 2], "query": "both"},
        {"collection": None},  # null: the field left at its default
    ],
)
def test_unusual_but_valid_plain_fields_parse_as_json_format_parses(document):
    assert parsed(document) == json_format.Parse(json.dumps(document), pb.SearchRequest())
