"""Background loops end when cancelled even when the cancellation surfaces as a driver error.

Found by a clean-clone CI run: ingest-api's generation sweeper was cancelled in the middle of a
database call, psycopg answered with an ordinary exception, the loop logged it and slept on, and
`IngestApp.stop` waited on the task forever."""

from __future__ import annotations

import asyncio

import pytest
from sluice_common.tasks import end_if_cancelled


async def driver_call() -> None:
    """Like psycopg in some paths: a cancelled wait comes back as the driver's own error."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError as cancelled:
        raise RuntimeError("query canceled") from cancelled


async def retrying_loop(guarded: bool, passes: list[int], stop: list[int]) -> None:
    while not stop:
        passes.append(1)
        try:
            await driver_call()
        except Exception as exc:  # the shape of every background loop
            if guarded:
                end_if_cancelled(exc)
        await asyncio.sleep(0.01)


def test_a_cancellation_swallowed_whole_ends_the_loop_at_its_pause():
    from sluice_common.tasks import pause

    async def swallowing_call() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return  # a library that ate the cancellation and returned normally

    async def loop() -> None:
        while True:
            await swallowing_call()
            await pause(0.01)

    async def scenario() -> bool:
        task = asyncio.create_task(loop())
        await asyncio.sleep(0.05)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=1.0)
        return task in done and task.cancelled()

    assert asyncio.run(scenario())


@pytest.mark.parametrize("guarded", [True, False])
def test_a_cancelled_loop_ends_only_when_guarded(guarded):
    async def scenario() -> bool:
        passes: list[int] = []
        stop: list[int] = []
        task = asyncio.create_task(retrying_loop(guarded, passes, stop))
        await asyncio.sleep(0.05)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=1.0)
        ended = task in done and task.cancelled()
        if not ended:  # the unguarded loop swallowed its cancellation: it is still running
            assert len(passes) >= 2
            stop.append(1)  # end it the only way it still listens to
            await asyncio.wait([task], timeout=1.0)
        return ended

    assert asyncio.run(scenario()) is guarded


@pytest.mark.parametrize("guarded", [True, False])
def test_a_cancellation_that_arrives_as_the_event_is_set_ends_the_loop_only_when_guarded(guarded):
    """Python 3.11's wait_for returns normally when the cancellation and the event come together
    (the Listeners task hung IngestApp.stop this way in a full test run)."""
    from sluice_common.tasks import wait_event

    async def scenario() -> bool:
        event = asyncio.Event()
        passes: list[int] = []

        async def loop() -> None:
            while len(passes) < 100:
                passes.append(1)
                if guarded:
                    await wait_event(event, 3600)
                else:
                    await asyncio.wait_for(event.wait(), 3600)
                event.clear()

        task = asyncio.create_task(loop())
        await asyncio.sleep(0.01)  # the loop waits on the event
        event.set()
        task.cancel()  # in the same turn of the event loop
        await asyncio.wait([task], timeout=1.0)
        if not task.done():  # still waiting, cancellation lost: end it the only way left
            passes.extend([1] * 100)
            event.set()
            await asyncio.wait([task], timeout=1.0)
            return False
        return task.cancelled()

    assert asyncio.run(scenario()) is guarded


def test_the_background_loops_use_the_guard():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for path in (
        "services/ingest-api/src/sluice_ingest/main.py",
        "services/ingest-api/src/sluice_ingest/retention.py",
        "services/ingest-api/src/sluice_ingest/notify.py",
        "services/ingest-api/src/sluice_ingest/webhooks/dispatcher.py",
        "services/search/src/sluice_search/collection_cache.py",
        "services/search/src/sluice_search/main.py",
    ):
        text = (root / path).read_text()
        assert "end_if_cancelled(exc)" in text and "await pause(" in text, path
