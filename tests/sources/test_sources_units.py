"""The sources' pure parts, no IO: the run's moves walked pair by pair, the mass-delete rule,
what is unchanged without reading, globs, names, and SigV4 against AWS's documented example
(docs/sources.md)."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from sluice_common.names import source_id_of, source_name, source_run_name
from sluice_ingest.domain import IllegalTransition
from sluice_ingest.sources.domain import (
    RUN_MOVES,
    KnownItem,
    ListedItem,
    RunState,
    check_run_move,
    is_mass_delete,
    sources_of,
    unchanged_without_reading,
)
from sluice_ingest.sources.folder import glob_pattern
from sluice_ingest.sources.s3 import sign


def test_every_pair_of_run_states_is_a_move_of_the_table_or_refused():
    for current, target in itertools.product(RunState, RunState):
        if (current, target) in RUN_MOVES:
            check_run_move(current, target)
            assert str(current) in sources_of(target)
        else:
            with pytest.raises(IllegalTransition):
                check_run_move(current, target)
    ended = (RunState.SUCCEEDED, RunState.FAILED, RunState.BLOCKED_MASS_DELETE)
    assert not any(current in ended for current, _ in RUN_MOVES), "an ended run never moves again"
    assert all(len(why) > 20 for why in RUN_MOVES.values())


@pytest.mark.parametrize(
    ("would_delete", "source_items", "collection_sources", "share", "blocked"),
    [
        (0, 10, 10, 0.2, False),
        (3, 100, 100, 0.01, False),  # the floor: up to 3 never count, whatever the share
        (4, 100, 100, 0.01, True),
        (20, 100, 100, 0.2, False),  # exactly the share is allowed
        (21, 100, 100, 0.2, True),
        (1, 1, 50, 0.2, True),  # every item the source synced: an emptied folder always asks
        (5, 5, 1000, 0.9, True),
        (10, 40, 200, 0.2, False),  # the share is of the collection's sources, not the source's items
    ],
)
def test_the_mass_delete_rule(would_delete, source_items, collection_sources, share, blocked):
    assert is_mass_delete(would_delete, source_items, collection_sources, share) is blocked


def test_an_item_is_unchanged_without_reading_only_with_the_same_fingerprint_and_its_content_live():
    item = ListedItem("a.md", "a.md", "12:345", "/x/a.md")
    known = KnownItem("12:345", "f" * 64)
    assert unchanged_without_reading(item, known, {"f" * 64, "e" * 64})
    assert not unchanged_without_reading(item, known, {"e" * 64})  # deleted by hand, or replaced
    assert not unchanged_without_reading(item, KnownItem("12:999", "f" * 64), {"f" * 64})
    assert not unchanged_without_reading(item, None, {"f" * 64})  # never synced by this source
    no_fingerprint = ListedItem("b.html", "b.html", "", "http://h/b.html")
    assert not unchanged_without_reading(no_fingerprint, KnownItem("", "f" * 64), {"f" * 64})


@pytest.mark.parametrize(
    ("glob", "matches", "misses"),
    [
        ("**/*.md", ["a.md", "x/a.md", "x/y/a.md"], ["a.txt", "a.md/b.txt"]),
        ("*.md", ["a.md"], ["x/a.md"]),
        ("docs/?.txt", ["docs/a.txt"], ["docs/ab.txt", "a/docs/a.txt"]),
        ("x/**", ["x/a", "x/y/z.md"], ["y/x/a"]),
    ],
)
def test_globs(glob, matches, misses):
    pattern = glob_pattern(glob)
    assert pattern is not None
    assert all(pattern.match(m) for m in matches) and not any(pattern.match(m) for m in misses)
    assert glob_pattern("") is None


def test_source_names():
    assert source_name("docs", "1f") == "collections/docs/sources/1f"
    assert source_run_name("docs", "1f", "9a") == "collections/docs/sources/1f/runs/9a"
    assert source_id_of("collections/docs/sources/1f") == "1f" and source_id_of(" 1f ") == "1f"


def test_sigv4_signs_awss_documented_list_objects_example():
    # "GET Bucket (List Objects)" of AWS's Signature Version 4 examples for S3.
    headers = sign(
        "GET",
        "https://examplebucket.s3.amazonaws.com/",
        {"max-keys": "2", "prefix": "J"},
        "us-east-1",
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        dt.datetime(2013, 5, 24, tzinfo=dt.UTC),
    )
    assert headers["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
        "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
    )
    assert headers["x-amz-date"] == "20130524T000000Z"
