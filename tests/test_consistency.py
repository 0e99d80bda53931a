"""Consistency tokens (sluice_common.consistency): format, validation and the replay comparison."""

from __future__ import annotations

import pytest
from sluice_common import consistency
from sluice_common.errors import InvalidArgument
from sluice_common.reasons import Reason


def test_a_token_round_trips_the_lsn_postgresql_prints():
    token = consistency.token_of("16/B374D848")
    assert token == "lsn:16/B374D848"
    assert consistency.parse_token(token) == (0x16 << 32) | 0xB374D848
    assert consistency.lsn_text(consistency.parse_token(token)) == "16/B374D848"
    assert consistency.parse_token("lsn:0/16b3748") == 0x16B3748  # hex in either case
    assert consistency.token_of(None) == consistency.token_of("") == ""


@pytest.mark.parametrize(
    "token",
    [
        "garbage",
        "lsn:",
        "lsn:0/",
        "lsn:/1",
        "lsn:G/1",
        "lsn:0/123456789",
        "0/16B3748",
        "LSN:0/1",
        "lsn:0/1 ",
        " lsn:0/1",
        "lsn:0/1/2",
        "lsn:" + "1" * 80,
    ],
)
def test_anything_else_is_invalid_argument(token):
    with pytest.raises(InvalidArgument) as raised:
        consistency.parse_token(token)
    assert raised.value.reason == Reason.INVALID_CONSISTENCY_TOKEN


def test_replayed_at_or_past_the_token():
    assert consistency.replayed(100, 100)
    assert consistency.replayed(101, 100)
    assert not consistency.replayed(99, 100)


def test_an_insert_position_just_after_a_page_header_counts_as_the_page_boundary():
    page = 8192 * 5  # a page inside a segment: a short header
    assert consistency.replayed(page, page + consistency.SHORT_PAGE_HEADER)
    assert not consistency.replayed(page, page + consistency.SHORT_PAGE_HEADER + 8)
    assert not consistency.replayed(page - 8, page + consistency.SHORT_PAGE_HEADER)  # not at the boundary
    segment = 16 * 1024 * 1024 * 3  # a segment's first page: a long header
    assert consistency.replayed(segment, segment + consistency.LONG_PAGE_HEADER)
    assert not consistency.replayed(segment, segment + consistency.SHORT_PAGE_HEADER)  # inside its long header
    assert not consistency.replayed(page, page + consistency.LONG_PAGE_HEADER)  # 16 bytes of a record past a short header
