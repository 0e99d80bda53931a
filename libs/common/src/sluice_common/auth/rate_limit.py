"""The per-key rate limit: a token bucket per key in this process, and the wait it names.

Per process by design (no shared state to slow every call down): N replicas of a service admit
up to N * rate calls a second of one key in all. A refused call is told when to come back
(RetryInfo), and the calls refused together are told different times: each refusal books the
next free slot after those already handed out, one token interval apart. Clients that honour
the hint then come back spread out at the bucket's rate instead of all at once to be refused
again; the first of them when the next token is there. A hint is never shorter than one token
interval (at most MIN_WAIT_SECONDS) and never longer than refilling the whole bucket.
What a bulk client should expect is in docs/clients.md, "Rate limits and bulk jobs".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

# The shortest wait a refusal names, unless a token comes sooner than one interval: a hint of a
# few microseconds would bring the caller straight back to be refused again.
MIN_WAIT_SECONDS = 0.05
_MAX_KEYS = 100_000


class RateLimiter:
    """A token bucket per key: `rate` calls a second, bursts of `burst`; `take` says whether a call
    may go ahead (0) or how many seconds it should wait."""

    def __init__(self, rate: float, burst: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self._clock = clock
        # key id → (tokens, when they were counted, the last slot booked for a refused call)
        self._buckets: dict[str, tuple[float, float, float]] = {}

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def take(self, key_id: str) -> float:
        """0 when the call may go ahead; otherwise the seconds it should wait before trying again."""
        if not self.enabled:
            return 0.0
        now = self._clock()
        tokens, last, booked = self._buckets.get(key_id, (self.burst, now, -math.inf))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        if tokens >= 1.0:
            self._buckets[key_id] = (tokens - 1.0, now, booked)
            return 0.0
        interval = 1.0 / self.rate
        next_token = now + (1.0 - tokens) * interval
        slot = max(next_token, booked + interval, now + min(interval, MIN_WAIT_SECONDS))
        slot = min(slot, now + max(interval, self.burst * interval))
        if len(self._buckets) > _MAX_KEYS:
            self._buckets.clear()
        self._buckets[key_id] = (tokens, now, slot)
        return slot - now


def describe_wait(seconds: float) -> str:
    """A wait as people read it: "40 ms", "1.5 s" (never "0.00 s")."""
    if seconds < 1.0:
        return f"{max(1, round(seconds * 1000))} ms"
    return f"{seconds:.1f} s"


__all__ = ["MIN_WAIT_SECONDS", "RateLimiter", "describe_wait"]
