"""`sluice upload --typed` and `sluice search --where / --neighbors / --max-per-document /
--min-score / --no-rerank` against the real services (the `stack` of conftest.py)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sluice_cli import typed
from sluice_client.errors import InvalidArgument
from sluice_client.filters import where
from sluice_client.protos import search_service_pb2

from .test_cli import create, upload


def test_values_are_typed_by_their_form():
    assert typed.value("2024").number_value == 2024 and typed.value("-0.5").number_value == -0.5
    assert typed.value("true").WhichOneof("kind") == "bool_value" and typed.value("false").bool_value is False
    stamp = typed.value("2024-05-01").timestamp_value.ToDatetime(dt.UTC)
    assert stamp == dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    assert typed.value("2024-05-01T12:00:00+02:00").timestamp_value.ToDatetime(dt.UTC).hour == 10
    assert typed.value('"2024"').string_value == "2024" and typed.value("'true'").string_value == "true"
    assert typed.value("en").string_value == "en" and typed.value("2024-13-45").string_value == "2024-13-45"
    assert list(typed.value("[a, b]", lists=True).string_list_value.values) == ["a", "b"]
    assert typed.value("[a, b]").string_value == "[a, b]"


@pytest.mark.parametrize(
    "text, op, values",
    [
        ("year>=2024", "GTE", [2024.0]),
        ("lang = en", "EQ", ["en"]),
        ("lang!=en", "NE", ["en"]),
        ("lang in en,de", "IN", ["en", "de"]),
        ("lang not-in en", "NOT_IN", ["en"]),
        ("draft exists", "EXISTS", []),
        ("draft not-exists", "NOT_EXISTS", []),
    ],
)
def test_conditions_are_read(text, op, values):
    condition = typed.condition(text).condition
    assert condition.op == search_service_pb2.FilterOperator.Value(f"FILTER_OPERATOR_{op}")
    got = [condition.value] if condition.HasField("value") else list(condition.values)
    assert [getattr(v, v.WhichOneof("kind")) for v in got] == values


def test_an_unreadable_condition_is_refused():
    with pytest.raises(ValueError, match="expected KEY OP VALUE"):
        typed.condition("year between 1 and 2")


@pytest.mark.parametrize("text", ["year>>2024", "year=>2024", "year<<2024", "lang==en", "lang!==en", "year> =2024"])
def test_a_doubled_operator_is_refused_naming_the_condition(text):
    """It used to compare with the string ">2024": 0 hits and no error (issue 37, defect 9)."""
    with pytest.raises(InvalidArgument, match="starts with an operator") as refused:
        typed.condition(text)
    assert refused.value.reason == "INVALID_FILTER" and text in str(refused.value)
    with pytest.raises(ValueError):
        where([text])


def test_a_quoted_value_may_start_with_an_operator():
    assert typed.condition("""note = '>2024'""").condition.value.string_value == ">2024"


def test_typed_upload_and_where_search(sluice, stack, tmp_path):
    create(sluice, stack)
    for name, year, draft in (("old.txt", "2021", "false"), ("new.txt", "2024", "true"), ("mid.txt", "2023", "false")):
        (tmp_path / name).write_text(f"locks and weirs on the river, {name}")
        upload(
            sluice,
            stack,
            tmp_path / name,
            "docs",
            "--typed",
            f"year={year}",
            "--typed",
            f"draft={draft}",
            "--typed",
            "tags=[river,locks]",
            "-m",
            "team=canal",
        )
    doc = json.loads(sluice("--json", "show", "new.txt", *stack.args).out)
    assert doc["typed_metadata"]["year"] == {"number_value": 2024.0} and doc["metadata"]["draft"] == "true"

    def found(*args):
        result = sluice("--json", "search", "locks weirs", "-c", "docs", *args, *stack.args)
        assert result.code == 0, result.err
        return sorted(h["filename"] for h in json.loads(result.out)["hits"])

    assert found("--where", "year>=2023") == ["mid.txt", "new.txt"]
    assert found("--where", "year>=2023", "--where", "draft=false") == ["mid.txt"]
    assert found("--where", "tags=locks", "--filter", "team=canal") == ["mid.txt", "new.txt", "old.txt"]
    assert found("--where", "year in 2021,2024") == ["new.txt", "old.txt"]
    assert found("--max-per-document", "1", "--no-rerank", "--neighbors", "1") == ["mid.txt", "new.txt", "old.txt"]
    assert found("--min-score", "1000", "--mode", "keyword") == []
    bad = sluice("search", "locks", "-c", "docs", "--where", "year between 1 and 2", *stack.args)
    assert bad.code == 2 and "--where" in bad.err
    refused = sluice("search", "locks", "-c", "docs", "--where", "draft>true", *stack.args)
    assert refused.code == 2 and "type mismatch" in refused.err
