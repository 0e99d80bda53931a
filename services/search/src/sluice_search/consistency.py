"""Read-your-writes on a replica: wait until search's database has replayed a consistency token
(sluice_common.consistency; docs/scaling.md#read-replicas-and-the-consistency-token).

On a primary (`pg_is_in_recovery()` false) every token is satisfied at once: the token was read
there after the commit it covers. On a standby the wait polls `pg_last_wal_replay_lsn()` with a
short backoff (a standby offers no notification of replay); it gives up before the call's
deadline, or after SLUICE_SEARCH_CONSISTENCY_MAX_WAIT_SECONDS, with UNAVAILABLE (reason
REPLICA_BEHIND, a RetryInfo) that says how far behind the replica is.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from sluice_common import consistency
from sluice_common.errors import Unavailable
from sluice_common.reasons import Reason

from . import metrics

# Polls start this far apart and double up to the cap: a replica that streams is usually a few
# milliseconds behind, and a poll is one small statement.
FIRST_POLL_SECONDS = 0.002
MAX_POLL_SECONDS = 0.05
# Time kept back from the call's deadline to answer REPLICA_BEHIND (otherwise the client would
# see DEADLINE_EXCEEDED, which says nothing of the replica), and then to search.
DEADLINE_RESERVE_SECONDS = 0.05
# What RetryInfo suggests: a moment, since replay is usually catching up.
RETRY_AFTER_SECONDS = 0.2

_STATE_SQL = (
    "SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text,"
    " CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() ELSE 'not paused' END"
)
_LAYOUT_SQL = "SELECT name, setting::bigint FROM pg_settings WHERE name IN ('wal_block_size', 'wal_segment_size')"


class ReplicaBehind(Unavailable):
    """The replica has not replayed as far as the token within the time the call allowed."""

    default_reason = Reason.REPLICA_BEHIND

    def __init__(self, message: str, *, retry_after: float, **metadata: Any) -> None:
        super().__init__(message, **metadata)
        self.retry_after = retry_after


@dataclass(frozen=True)
class ReplayState:
    standby: bool
    replay_lsn: int
    pause_state: str


class ReplayWaiter:
    """Waits for the database behind `pool` to show everything a token covers."""

    def __init__(self, pool: Any, *, max_wait_seconds: float) -> None:
        self._pool = pool
        self._max_wait = max_wait_seconds
        self._layout: tuple[int, int] | None = None  # (wal_block_size, wal_segment_size)

    async def wait(self, token_lsn: int, time_remaining: float | None) -> bool:
        """Return once the database has replayed `token_lsn`: at once on a primary. True when the
        database is a standby (the caller then reads the collection afresh, not from a cache
        filled before the replay). Raises ReplicaBehind when the budget runs out first."""
        started = time.perf_counter()
        budget = self._max_wait
        if time_remaining is not None:
            budget = min(budget, time_remaining - min(DEADLINE_RESERVE_SECONDS, time_remaining / 5))
        deadline = started + max(budget, 0.0)
        pause = FIRST_POLL_SECONDS
        while True:
            state = await self._state()
            if not state.standby:
                metrics.CONSISTENCY_WAIT.labels("primary").observe(time.perf_counter() - started)
                return False
            if await self._replayed(state.replay_lsn, token_lsn):
                metrics.CONSISTENCY_WAIT.labels("replayed").observe(time.perf_counter() - started)
                return True
            now = time.perf_counter()
            if now >= deadline:
                metrics.CONSISTENCY_WAIT.labels("behind").observe(now - started)
                raise self._behind(state, token_lsn, now - started)
            await asyncio.sleep(min(pause, deadline - now))
            pause = min(pause * 2, MAX_POLL_SECONDS)

    async def _state(self) -> ReplayState:
        async with self._pool.connection() as conn:
            row = await (await conn.execute(_STATE_SQL)).fetchone()
        standby, replay, pause_state = row
        return ReplayState(bool(standby), consistency.lsn_value(replay) if replay else 0, pause_state)

    async def _replayed(self, replay_lsn: int, token_lsn: int) -> bool:
        if self._layout is None:
            async with self._pool.connection() as conn:
                settings = dict(await (await conn.execute(_LAYOUT_SQL)).fetchall())
            self._layout = (int(settings["wal_block_size"]), int(settings["wal_segment_size"]))
        block, segment = self._layout
        return consistency.replayed(replay_lsn, token_lsn, block_size=block, segment_size=segment)

    @staticmethod
    def _behind(state: ReplayState, token_lsn: int, waited: float) -> ReplicaBehind:
        behind = token_lsn - state.replay_lsn
        paused = "; its replay is paused" if state.pause_state != "not paused" else ""
        return ReplicaBehind(
            f"the replica serving search has not caught up with consistency_token after {waited:.2f} s: it is"
            f" {behind:,} bytes of write-ahead log behind{paused}; retry, or search without the token to read"
            " what the replica has now",
            retry_after=RETRY_AFTER_SECONDS,
            bytes_behind=behind,
            replay_paused=bool(paused),
        )
