"""The gateway's JSON decoding: the protobuf JSON mapping, with query vectors copied in directly
(docs/http.md#speed) and exactly what json_format would have made of them."""

from __future__ import annotations

import json
import math

import pytest
from google.protobuf import json_format
from sluice.v1 import search_service_pb2 as pb
from sluice_gateway.connect import parse_json


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
