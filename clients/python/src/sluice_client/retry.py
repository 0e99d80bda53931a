"""Retries and pacing: every call honours RetryInfo and retries what can heal, within its deadline.

- RATE_LIMITED (RESOURCE_EXHAUSTED with a RetryInfo): wait the delay the server named (plus a
  little jitter) and try again, as long as the call's deadline allows. The whole client holds
  back for that long, and from then on starts its calls no faster than 90 % of the limit the
  server reported (ErrorInfo `limit_per_second`), so a bulk job settles at the limit instead of
  being refused over and over.
- TOO_MANY_UPLOADS (the server's upload slots are full; nothing was stored): wait the delay
  its RetryInfo names (when a slot should be free), spread by up to 50 % so that the refused
  uploads of a folder do not all come back at once, as long as the deadline allows; the rest
  of the client is not held back. From a server that names no delay: as UNAVAILABLE.
- UNAVAILABLE (the server restarts, its database is away, nothing listens yet): back off
  exponentially with jitter, up to `attempts` tries, within the deadline.
- A TLS handshake failure is not retried: it does not heal by waiting.
Everything else is raised at once. Retrying is safe: a refused or unanswered upload stored
nothing, and its request_id makes a repeat return the same document (docs/clients.md).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .errors import RateLimited, SluiceError, TLSError, Unavailable

# What part of the server's reported rate a client allows itself once it has been refused.
PACE_FRACTION = 0.9


@dataclass(frozen=True)
class RetryPolicy:
    """How long a call may take in all (`timeout`, seconds, retries included) and how it retries."""

    timeout: float = 30.0
    attempts: int = 6  # tries of a call that met UNAVAILABLE or TOO_MANY_UPLOADS (rate limits: as the deadline allows)
    initial_backoff: float = 0.2
    max_backoff: float = 5.0

    def backoff(self, attempt: int) -> float:
        """The wait after the `attempt`-th failure (0-based): exponential, with jitter in its upper half."""
        ceiling = min(self.max_backoff, self.initial_backoff * 2**attempt)
        return random.uniform(ceiling / 2, ceiling)

    def next_wait(self, error: SluiceError, attempt: int, remaining: float) -> float | None:
        """Seconds to wait before trying again after `error`, or None to give up and raise it.
        `attempt` counts the earlier failures that were not rate limits."""
        if isinstance(error, RateLimited) and error.retry_after is not None:
            wait = error.retry_after * random.uniform(1.0, 1.1)
        elif error.reason == "TOO_MANY_UPLOADS" and error.retry_after is not None:
            wait = error.retry_after * random.uniform(1.0, 1.5)
        elif isinstance(error, TLSError):
            return None
        elif isinstance(error, Unavailable) or error.reason == "TOO_MANY_UPLOADS":
            if attempt + 1 >= self.attempts:
                return None
            wait = self.backoff(attempt)
        else:
            return None
        return wait if wait < remaining else None


class Pacer:
    """The pace of one client's calls: all wait while the server has said to (RetryInfo), and once
    it has reported its limit, calls start no faster than PACE_FRACTION of it. `rate` (calls a
    second) sets a pace from the start; None waits to be told."""

    def __init__(self, rate: float | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._interval = 1.0 / rate if rate else 0.0
        self._hold_until = 0.0
        self._next_start = 0.0

    @property
    def rate(self) -> float | None:
        return 1.0 / self._interval if self._interval else None

    def reserve(self) -> float:
        """The seconds to wait before starting a call (its start is booked)."""
        if not self._interval and self._hold_until <= self._clock():
            return 0.0  # the fast path: nobody has been refused
        with self._lock:
            now = self._clock()
            start = max(now, self._hold_until, self._next_start)
            if self._interval:
                self._next_start = start + self._interval
            return start - now

    def refused(self, error: RateLimited) -> None:
        """The server refused a call: hold every call back for its delay, and pace at the reported limit."""
        with self._lock:
            if error.retry_after:
                self._hold_until = max(self._hold_until, self._clock() + error.retry_after)
            try:
                limit = float(error.metadata.get("limit_per_second", "0"))
            except ValueError:
                limit = 0.0
            if limit > 0:
                interval = 1.0 / (limit * PACE_FRACTION)
                self._interval = max(self._interval, interval)


__all__ = ["PACE_FRACTION", "Pacer", "RetryPolicy"]
