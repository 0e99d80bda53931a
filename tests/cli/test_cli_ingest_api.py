"""The sluice CLI against the real ingest-api (in-process, real PostgreSQL), without workers:
documents stay PENDING, which is what these commands need."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def api(ingest_api):
    return ["--ingest-address", ingest_api.address]


def test_collections_against_ingest_api(sluice, api):
    for name, embedder in (("local-docs", "local"), ("hashed", "hashing"), ("remote", "openai")):
        result = sluice("collections", "create", name, "--embedder", embedder, *api)
        assert result.code == 0, result.err
    listed = json.loads(sluice("--json", "collections", "list", *api).out)["collections"]
    assert [c["name"] for c in listed] == ["hashed", "local-docs", "remote"]
    duplicate = sluice("collections", "create", "hashed", "--embedder", "hashing", *api)
    assert duplicate.code == 1 and "already exists [COLLECTION_EXISTS]" in duplicate.err
    invalid = sluice("collections", "create", "Not Valid!", "--embedder", "hashing", *api)
    assert invalid.code == 2, invalid.err
    assert "Traceback" not in duplicate.err + invalid.err
    assert len(invalid.err.strip().splitlines()) == 1


def test_upload_list_show_remove_against_ingest_api(sluice, api, docs_folder):
    assert sluice("collections", "create", "docs", "--embedder", "hashing", *api).code == 0
    uploaded = sluice("--json", "upload", docs_folder, "--collection", "docs", "--no-wait", *api)
    assert uploaded.code == 0, uploaded.err
    results = json.loads(uploaded.out)["results"]
    assert sorted(r["document"]["filename"] for r in results) == ["alpha.md", "beta.txt", "gamma.html"]
    assert {r["status"] for r in results} == {"PENDING"}

    again = json.loads(sluice("--json", "upload", docs_folder, "--collection", "docs", "--no-wait", *api).out)["results"]
    assert sorted(r["document"]["id"] for r in again) == sorted(r["document"]["id"] for r in results)

    table = sluice("ls", "--collection", "docs", *api)
    assert table.code == 0 and "alpha.md" in table.out and "PENDING" in table.out
    doc = results[0]["document"]
    shown = sluice("show", doc["id"], *api)
    assert shown.code == 0 and doc["content_sha256"] in shown.out and "PENDING" in shown.out

    timed_out = sluice("watch", doc["id"], "--timeout", "1", *api)
    assert timed_out.code == 1 and "timed out" in timed_out.err

    not_failed = sluice("retry", doc["id"], *api)
    assert not_failed.code == 1 and not_failed.err.startswith("error: ")

    not_empty = sluice("collections", "delete", "docs", *api)
    assert not_empty.code == 1, not_empty.err
    assert sluice("rm", doc["id"], *api).code == 0
    assert sluice("show", doc["id"], *api).code == 3
    forced = sluice("collections", "delete", "docs", "--force", *api)
    assert forced.code == 0 and "2 document(s)" in forced.out


def test_unknown_collection_is_exit_3_against_ingest_api(sluice, api, docs_folder):
    result = sluice("upload", docs_folder, "--collection", "nope", *api)
    assert result.code == 3
    assert "nope" in result.err and "Traceback" not in result.err
    assert sluice("ls", "--collection", "nope", *api).code == 3
    assert sluice("collections", "delete", "nope", *api).code == 3
