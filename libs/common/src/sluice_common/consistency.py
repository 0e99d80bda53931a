"""Consistency tokens: read-your-writes for a search served by a replica
(docs/scaling.md#read-replicas-and-the-consistency-token).

A token names a position in the primary's write-ahead log (an LSN) at or after the commit of
everything the answer that carries it showed. ingest-api reads `pg_current_wal_insert_lsn()` in
the very statement that reads the committed rows (or, after a write, once its transaction has
committed). Why that position is late enough: a transaction's commit record is inserted into
the WAL before the transaction becomes visible to other snapshots, so a statement whose snapshot
sees the commit runs after that record was inserted, and the insert position it reads is at or
past the record's end. A standby makes a transaction visible when it replays its commit record,
so once `pg_last_wal_replay_lsn()` (the end of the last replayed record) reaches the token, the
standby shows at least what the answer showed.

One detail of PostgreSQL's arithmetic: an insert position at the very start of a WAL page is
reported after the page's header (24 bytes, 40 on a segment's first page), while a replayed
record that ended at that page boundary reports the boundary itself. Nothing was inserted
between the two, so `replayed` counts that gap as reached; otherwise a token read on an idle
primary could wait for the next WAL record.

Tokens are opaque to clients ("lsn:0/16B3748"); the prefix leaves room for another kind.
"""

from __future__ import annotations

import re

from .errors import InvalidArgument
from .reasons import Reason

PREFIX = "lsn:"
MAX_LENGTH = 64
_LSN = re.compile(r"([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})")

# XLogPageHeaderData and XLogLongPageHeaderData, MAXALIGNed (PostgreSQL's access/xlog_internal.h).
SHORT_PAGE_HEADER = 24
LONG_PAGE_HEADER = 40


def lsn_value(text: str) -> int:
    """The LSN PostgreSQL prints as "16/B374D848" as one integer; ValueError if it is not one."""
    match = _LSN.fullmatch(text)
    if match is None:
        raise ValueError(f"not an LSN: {text[:40]!r}")
    return (int(match.group(1), 16) << 32) | int(match.group(2), 16)


def lsn_text(value: int) -> str:
    """An LSN as PostgreSQL prints it."""
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def token_of(lsn: str | None) -> str:
    """The token of an LSN read from PostgreSQL (as text); empty when there is none."""
    if not lsn:
        return ""
    return PREFIX + lsn_text(lsn_value(lsn))


def parse_token(token: str, field: str = "consistency_token") -> int:
    """The LSN a client's token names; INVALID_ARGUMENT for anything that is not a token."""
    if len(token) <= MAX_LENGTH and token.startswith(PREFIX):
        try:
            return lsn_value(token[len(PREFIX) :])
        except ValueError:
            pass
    raise InvalidArgument(
        f"{field} is not a consistency token; pass Document.consistency_token exactly as it was received",
        reason=Reason.INVALID_CONSISTENCY_TOKEN,
    )


def replayed(replay_lsn: int, token_lsn: int, *, block_size: int = 8192, segment_size: int = 16 * 1024 * 1024) -> bool:
    """Whether a standby that replayed up to `replay_lsn` shows everything `token_lsn` covers."""
    if replay_lsn >= token_lsn:
        return True
    if replay_lsn % block_size != 0:
        return False
    header = LONG_PAGE_HEADER if replay_lsn % segment_size == 0 else SHORT_PAGE_HEADER
    return token_lsn - replay_lsn == header
