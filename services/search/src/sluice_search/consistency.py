"""Read-your-writes on a replica: every statement of a search with a consistency token runs on a
database that has replayed that token (sluice_common.consistency;
docs/scaling.md#read-replicas-and-the-consistency-token).

The check is made on each connection the search takes from its pool, right before the search uses
it (GatedPool): behind a Service that balances connections over several replicas
(CloudNativePG's `-ro`), the pool's connections reach different servers, each at its own replay
position, so a check on one connection says nothing of another. Per connection, what is known
is kept: a primary (`pg_is_in_recovery()` false) satisfies every token at once and stays a
primary for the connection's life; a standby's replay position only moves forward, so a token at
or below the last position seen on that connection needs no statement. Otherwise the check polls
`pg_last_wal_replay_lsn()` on that connection with a short backoff (a standby offers no
notification of replay) and gives up before the call's deadline, or after
SLUICE_SEARCH_CONSISTENCY_MAX_WAIT_SECONDS, with UNAVAILABLE (reason REPLICA_BEHIND, a RetryInfo)
saying how far behind the replica is. A connection waiting stays checked out of the pool.

Before waiting, a connection found behind is handed back to the pool and another taken, until one
has replayed the token or every idle connection was tried: with one replica lagging among
several, a search is answered by a current one rather than waiting on the one it happened to be
handed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
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
DEADLINE_RESERVE_SECONDS = 0.1
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


@dataclass
class Requirement:
    """What the current request needs of every connection it uses."""

    lsn: int
    started: float
    deadline: float
    outcomes: set[str] = field(default_factory=set)  # how each connection met it (metrics, once per request)


_REQUIRED: ContextVar[Requirement | None] = ContextVar("sluice_search_required_lsn", default=None)


@dataclass
class _Known:
    """What one connection has shown: a primary, or a standby's last replay position."""

    primary: bool = False
    replayed: int = 0


class ReplayWaiter:
    """Holds a request's token and checks it on each connection the request uses."""

    def __init__(self, *, max_wait_seconds: float) -> None:
        self._max_wait = max_wait_seconds
        self._layout: tuple[int, int] | None = None  # (wal_block_size, wal_segment_size)

    def require(self, token_lsn: int, time_remaining: float | None) -> Requirement:
        """From now on in this request (its task and the tasks it starts), every connection
        taken from a GatedPool must have replayed `token_lsn`."""
        started = time.perf_counter()
        budget = self._max_wait
        if time_remaining is not None:
            budget = min(budget, time_remaining - min(DEADLINE_RESERVE_SECONDS, time_remaining / 5))
        requirement = Requirement(token_lsn, started, started + max(budget, 0.0))
        _REQUIRED.set(requirement)
        return requirement

    @staticmethod
    def release(requirement: Requirement) -> None:
        """The request is answered: no more checks, and one observation of its wait (behind if a
        connection was, else replayed if a standby's was checked, else primary)."""
        _REQUIRED.set(None)
        for outcome in ("behind", "replayed", "primary"):
            if outcome in requirement.outcomes:
                metrics.CONSISTENCY_WAIT.labels(outcome).observe(time.perf_counter() - requirement.started)
                return

    async def ready(self, conn: Any) -> bool:
        """Whether `conn`'s server shows the current request's token now, without waiting: what
        the connection showed before, else one statement (True at once without a token)."""
        requirement = _REQUIRED.get()
        return requirement is None or await self._check(conn, requirement) is None

    async def gate(self, conn: Any) -> None:
        """Return once `conn`'s server shows the current request's token (at once without one)."""
        requirement = _REQUIRED.get()
        if requirement is None:
            return
        pause = FIRST_POLL_SECONDS
        while (state := await self._check(conn, requirement)) is not None:
            now = time.perf_counter()
            if now >= requirement.deadline:
                requirement.outcomes.add("behind")
                raise self._behind(state, requirement.lsn, now - requirement.started)
            await asyncio.sleep(min(pause, requirement.deadline - now))
            pause = min(pause * 2, MAX_POLL_SECONDS)

    async def _check(self, conn: Any, requirement: Requirement) -> ReplayState | None:
        """None if `conn` meets `requirement` (noted in its outcomes), else the standby's state:
        no statement when what the connection showed before covers the token, else one."""
        known: _Known = getattr(conn, "sluice_replay", None) or _Known()
        conn.sluice_replay = known
        if known.primary:
            requirement.outcomes.add("primary")
            return None
        if await self._replayed(conn, known.replayed, requirement.lsn):
            requirement.outcomes.add("replayed")
            return None
        state = await self._state(conn)
        if not state.standby:
            known.primary = True
            requirement.outcomes.add("primary")
            return None
        known.replayed = max(known.replayed, state.replay_lsn)
        if await self._replayed(conn, state.replay_lsn, requirement.lsn):
            requirement.outcomes.add("replayed")
            return None
        return state

    @staticmethod
    async def _state(conn: Any) -> ReplayState:
        row = await (await conn.execute(_STATE_SQL)).fetchone()
        standby, replay, pause_state = row
        return ReplayState(bool(standby), consistency.lsn_value(replay) if replay else 0, pause_state)

    async def _replayed(self, conn: Any, replay_lsn: int, token_lsn: int) -> bool:
        if replay_lsn == 0:
            return False  # nothing seen on this connection yet
        if self._layout is None:
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


class GatedPool:
    """search's pool as the repository sees it: each connection it hands out has passed the
    current request's consistency check (ReplayWaiter). Everything else is the pool's.

    With a token, a connection whose server has not replayed it yet goes back to the pool and
    another is taken (ReplayWaiter.ready: no wait, at most one statement each), so that one
    lagging replica behind a balancing Service does not hold up searches its peers can answer.
    Once a round has tried every connection the pool hands out (it hands back one this round
    already tried, or as many as the pool has), the search sleeps a poll interval (2 ms, doubling
    to 50 ms) and tries again from the pool: a current connection that a concurrent request held
    meanwhile, or a replica that caught up, answers it. A tried connection is never kept checked
    out, neither while others are tried nor while the search sleeps: concurrent requests may
    need it. Once the request's wait is used up, the connection in hand is checked once more
    and REPLICA_BEHIND answered if it is still behind (ReplayWaiter.gate). Each try goes through
    the pool's own connection() (its commit or rollback, its return to the pool, its statistics)."""

    def __init__(self, pool: Any, waiter: ReplayWaiter) -> None:
        self._pool = pool
        self._waiter = waiter

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[Any]:
        requirement = _REQUIRED.get()
        if requirement is None:
            async with self._pool.connection(timeout) as conn:
                yield conn
            return
        tried: list[Any] = []  # this round's: kept alive, so their identity stays theirs
        pause = FIRST_POLL_SECONDS
        while True:
            async with self._pool.connection(timeout) as conn:
                if time.perf_counter() >= requirement.deadline:
                    await self._waiter.gate(conn)  # one more check, then REPLICA_BEHIND
                    yield conn
                    return
                if await self._waiter.ready(conn):
                    yield conn
                    return
                metrics.CONSISTENCY_SKIPPED.inc()
                round_over = any(conn is seen for seen in tried) or len(tried) + 1 >= self._pool.max_size
                tried = [] if round_over else [*tried, conn]
            # Out of the block: the connection is back in the pool before any sleep.
            if round_over:
                await asyncio.sleep(max(min(pause, requirement.deadline - time.perf_counter()), 0.0))
                pause = min(pause * 2, MAX_POLL_SECONDS)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)
