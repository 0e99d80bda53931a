"""Background loops that survive failures but not their own cancellation.

A loop that logs and retries on `Exception` can swallow its own cancellation: psycopg answers
a task cancelled in the middle of a query or a pool check-out with a driver error in some paths
(QueryCanceled, OperationalError), not CancelledError. The loop then logs, sleeps and goes on,
and whoever awaits the cancelled task waits forever: a shutdown that hangs. Every such
`except Exception` calls `end_if_cancelled(exc)` first.
"""

from __future__ import annotations

import asyncio


def end_if_cancelled(exc: BaseException) -> None:
    """Re-raise as CancelledError when the current task is being cancelled."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError() from exc


async def pause(seconds: float) -> None:
    """A background loop's sleep between passes. A cancellation that a library swallowed whole
    during the pass (the task is still marked as cancelling, but nothing was raised) ends the
    loop here instead of being lost."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError()
    await asyncio.sleep(seconds)


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """A background loop's wait for `event`, at most `timeout` seconds; True when it was set.
    Python 3.11's `asyncio.wait_for` loses a cancellation that arrives just as the awaited event
    is set (it returns normally; the task stays marked as cancelling): it is raised here."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
        woken = True
    except TimeoutError:
        woken = False
    await pause(0)
    return woken
