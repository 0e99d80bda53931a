"""Dify's External Knowledge API on the gateway (POST /retrieval), against the shapes Dify
documents: request {knowledge_id, query, retrieval_setting: {top_k, score_threshold},
metadata_condition}, answer {records: [{content, score, title, metadata}]}, errors
{error_code, error_msg} with 1001 (Authorization header format), 1002 (authorization failed)
and 2001 (knowledge does not exist)."""

from __future__ import annotations

import json

import httpx
import pytest

from gateway.conftest import key_headers
from gateway.test_gateway import create_collection, watch_until_done

DOCS = {
    "leases.txt": (b"Leases expire when a worker stops renewing them.\n", {"team": "core", "year": 2024}),
    "limits.txt": (b"Rate limits protect the servers from bursts of calls.\n", {"team": "edge", "year": 2021}),
    "retries.txt": (b"Retries wait with jittered backoff after a failure.\n", {"team": "core", "year": 2019}),
}


@pytest.fixture
def knowledge(http):
    create_collection(http, "handbook")
    for filename, (content, typed) in DOCS.items():
        typed_json = json.dumps(
            {key: {"stringValue": v} if isinstance(v, str) else {"numberValue": v} for key, v in typed.items()}
        )
        response = http.post(
            "/v1/collections/handbook/documents", params={"filename": filename, "typed_metadata": typed_json}, content=content
        )
        assert response.status_code == 200, response.text
        assert watch_until_done(http, response.json()["id"])[-1] == "DOCUMENT_STATUS_READY"
    return "handbook"


def retrieve(http: httpx.Client, body: dict, headers: dict | None = None) -> httpx.Response:
    return http.post("/retrieval", json=body, headers=headers)


def test_retrieval_answers_records_in_difys_shape(http, knowledge):
    response = retrieve(
        http,
        {"knowledge_id": knowledge, "query": "when do leases expire", "retrieval_setting": {"top_k": 2, "score_threshold": 0.0}},
    )
    assert response.status_code == 200, response.text
    records = response.json()["records"]
    assert 1 <= len(records) <= 2
    best = records[0]
    assert set(best) == {"content", "score", "title", "metadata"}
    assert best["title"] == "leases.txt"
    assert "Leases expire" in best["content"]
    assert isinstance(best["score"], float) and 0 < best["score"] <= 1
    assert best["metadata"]["team"] == "core" and best["metadata"]["year"] == 2024
    assert best["metadata"]["document_id"]
    assert [r["score"] for r in records] == sorted((r["score"] for r in records), reverse=True)

    # score_threshold drops the hits scored below it (HYBRID's fused score, 0 to 1 like Dify's).
    every = retrieve(
        http,
        {"knowledge_id": knowledge, "query": "leases limits retries", "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}},
    ).json()["records"]
    kept = retrieve(
        http,
        {"knowledge_id": knowledge, "query": "leases limits retries", "retrieval_setting": {"top_k": 5, "score_threshold": 0.6}},
    ).json()["records"]
    assert kept == [r for r in every if r["score"] >= 0.6]
    assert len(kept) < len(every), every
    # No match is an empty list, still 200.
    nothing = retrieve(
        http,
        {
            "knowledge_id": knowledge,
            "query": "leases",
            "metadata_condition": {"conditions": [{"name": "team", "comparison_operator": "is", "value": "none"}]},
        },
    )
    assert nothing.status_code == 200 and nothing.json() == {"records": []}


def test_metadata_condition_becomes_sluices_typed_filter(http, knowledge):
    def titles(condition: dict) -> set[str]:
        response = retrieve(
            http,
            {
                "knowledge_id": knowledge,
                "query": "leases limits retries",
                "metadata_condition": condition,
                "retrieval_setting": {"top_k": 10, "score_threshold": 0.0},
            },
        )
        assert response.status_code == 200, response.text
        return {r["title"] for r in response.json()["records"]}

    assert titles(
        {"logical_operator": "and", "conditions": [{"name": "team", "comparison_operator": "is", "value": "core"}]}
    ) == {"leases.txt", "retries.txt"}
    assert titles(
        {
            "conditions": [
                {"name": "team", "comparison_operator": "is", "value": "core"},
                {"name": "year", "comparison_operator": "≥", "value": "2020"},
            ]
        }
    ) == {"leases.txt"}
    assert titles(
        {
            "logical_operator": "or",
            "conditions": [
                {"name": "year", "comparison_operator": "<", "value": 2020},
                {"name": "team", "comparison_operator": "is", "value": "edge"},
            ],
        }
    ) == {"retries.txt", "limits.txt"}
    assert titles({"conditions": [{"name": "team", "comparison_operator": "in", "value": ["edge"]}]}) == {"limits.txt"}
    assert titles({"conditions": [{"name": "owner", "comparison_operator": "empty"}]}) == set(DOCS)

    unsupported = retrieve(
        http,
        {
            "knowledge_id": knowledge,
            "query": "x",
            "metadata_condition": {"conditions": [{"name": "team", "comparison_operator": "contains", "value": "co"}]},
        },
    )
    assert unsupported.status_code == 400
    assert "not supported" in unsupported.json()["error_msg"]


def test_difys_error_codes(stack, http):
    create_collection(http, "handbook")
    body = {"knowledge_id": "handbook", "query": "leases", "retrieval_setting": {"top_k": 3, "score_threshold": 0.5}}
    with httpx.Client(base_url=stack.url) as anonymous:
        for headers in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer"}, {"Authorization": "Bearer a b"}):
            response = anonymous.post("/retrieval", json=body, headers=headers)
            assert response.status_code == 403, headers
            assert response.json()["error_code"] == 1001, headers
            assert response.json()["error_msg"]
        refused = anonymous.post("/retrieval", json=body, headers={"Authorization": "Bearer sk-not-a-sluice-key"})
        assert refused.status_code == 403 and refused.json()["error_code"] == 1002
    missing = retrieve(http, {**body, "knowledge_id": "no-such-collection"})
    assert missing.status_code == 404 and missing.json()["error_code"] == 2001
    # A reader key may search (the backend's roles, unchanged): an empty collection, no records.
    reader = retrieve(http, body, headers=key_headers("reader"))
    assert reader.status_code == 200 and reader.json() == {"records": []}
    bad = http.post("/retrieval", content=b"{nope", headers={"Content-Type": "application/json"})
    assert bad.status_code == 400 and set(bad.json()) == {"error_code", "error_msg"}
    no_query = retrieve(http, {"knowledge_id": "handbook"})
    assert no_query.status_code == 400 and "query" in no_query.json()["error_msg"]


@pytest.mark.parametrize("top_k", [-1, 0, 101, 1000, 2.5, "3", True])
def test_a_top_k_outside_1_to_100_is_refused_not_clamped(stack, http, top_k):
    """As gRPC's Search refuses it (issue 37, defect 8): -1 used to return 1 record and 1000 all."""
    body = {"knowledge_id": "anything", "query": "leases", "retrieval_setting": {"top_k": top_k, "score_threshold": 0.0}}
    response = retrieve(http, body)
    assert response.status_code == 400, response.text
    assert "top_k is an integer from 1 to 100" in response.json()["error_msg"]
