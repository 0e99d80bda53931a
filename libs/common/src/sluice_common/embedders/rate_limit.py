"""How many requests may be in flight to one embedding provider: an AIMD limit shared by every
embedder of the process that talks to the same base URL (`provider_limit`)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque


class AimdLimit:
    """How many requests may be in flight to one provider: additive increase (one more after a
    limit's worth of successes), multiplicative decrease (halved on a 429), between 1 and
    `maximum`. Shared by every embedder of the process that talks to the same base URL, so
    the worker's job slots do not each hammer the provider on their own.

    A freed slot is handed straight to the longest waiter (first come, first served): one
    wake-up per slot, no herd re-checking, and a request that arrives while others wait
    queues behind them. `peak_in_flight` is the most requests ever in flight at once."""

    def __init__(self, maximum: int) -> None:
        self.maximum = max(1, maximum)
        self.limit = float(self.maximum)
        self.in_flight = 0
        self.peak_in_flight = 0
        self._waiters: deque[_LimitWaiter] = deque()
        self._lock = threading.Lock()  # the embedders may be used from more than one event loop

    async def acquire(self) -> None:
        with self._lock:
            if not self._waiters and self.in_flight < int(self.limit):
                self._take()
                return
            waiter = _LimitWaiter(asyncio.get_running_loop().create_future())
            self._waiters.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            with self._lock:
                granted = waiter.granted
                if not granted:
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)
            if granted:  # handed a slot, then cancelled before using it: give it on
                self._free(adjust=None)
            raise

    def release(self, *, rate_limited: bool) -> None:
        self._free(adjust=rate_limited)

    def _take(self) -> None:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _free(self, *, adjust: bool | None) -> None:
        granted: list[_LimitWaiter] = []
        with self._lock:
            self.in_flight -= 1
            if adjust is True:
                self.limit = max(1.0, self.limit / 2)
            elif adjust is False:
                self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
            while self._waiters and self.in_flight < int(self.limit):
                waiter = self._waiters.popleft()
                if waiter.future.done() or waiter.future.get_loop().is_closed():
                    continue  # cancelled while queued (it removes itself), or its loop is gone
                waiter.granted = True
                self._take()
                granted.append(waiter)
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for waiter in granted:
            loop = waiter.future.get_loop()
            if loop is running:
                waiter.wake()  # same loop: no self-pipe write
            else:
                try:
                    loop.call_soon_threadsafe(waiter.wake)
                except RuntimeError:  # that loop closed meanwhile: its slot is free again
                    self._free(adjust=None)


class _LimitWaiter:
    __slots__ = ("future", "granted")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.granted = False

    def wake(self) -> None:
        # Cancelled after being granted: acquire's except clause gives the slot back.
        if not self.future.done():
            self.future.set_result(None)


_provider_limits: dict[str, AimdLimit] = {}
_provider_limits_lock = threading.Lock()


def provider_limit(base_url: str, maximum: int) -> AimdLimit:
    """The process's limit for one provider (base URL); a new one when `maximum` changed."""
    with _provider_limits_lock:
        limit = _provider_limits.get(base_url)
        if limit is None or limit.maximum != max(1, maximum):
            limit = _provider_limits[base_url] = AimdLimit(maximum)
        return limit


__all__ = ["AimdLimit", "provider_limit"]
