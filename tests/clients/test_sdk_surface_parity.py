"""The sync and asyncio SDK clients cannot drift (issue 37, the house; qdrant-client checks its
generated async client the same way): every public method of a sync class has its asyncio twin
with the same parameters (names, kinds, defaults), and neither has a method the other lacks. Pure introspection; no server."""

from __future__ import annotations

import inspect

import pytest
from sluice_client import aio, client, sources

PAIRS = [
    (client.Client, aio.AsyncClient),
    (client.Collections, aio.AsyncCollections),
    (client.Documents, aio.AsyncDocuments),
    (client.DocumentTracker, aio.AsyncDocumentTracker),
    (client.Webhooks, aio.AsyncWebhooks),
    (client.Admin, aio.AsyncAdmin),
    (sources.Sources, sources.AsyncSources),
]
# What exists on one side only, and why (each entry is a decision, not drift).
ONE_SIDED = {
    "Client": {"close"},  # the asyncio client closes with `aclose` / `async with`
    "AsyncClient": {"aclose"},
}


def public_methods(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property))
    }


def signature(member: object) -> list[tuple[str, str, object]]:
    if isinstance(member, property):
        return [("<property>", "", None)]
    return [(p.name, str(p.kind), p.default) for p in inspect.signature(member).parameters.values()]  # type: ignore[arg-type]


@pytest.mark.parametrize("sync_class, async_class", PAIRS, ids=[s.__name__ for s, _ in PAIRS])
def test_each_sync_method_has_its_asyncio_twin(sync_class, async_class):
    sync, asynchronous = public_methods(sync_class), public_methods(async_class)
    only_sync = set(sync) - set(asynchronous) - ONE_SIDED.get(sync_class.__name__, set())
    only_async = set(asynchronous) - set(sync) - ONE_SIDED.get(async_class.__name__, set())
    assert not only_sync, f"{async_class.__name__} lacks {sorted(only_sync)}"
    assert not only_async, f"{sync_class.__name__} lacks {sorted(only_async)}"
    for name in sorted(set(sync) & set(asynchronous)):
        assert signature(sync[name]) == signature(asynchronous[name]), f"{name}: the two signatures differ"


def test_the_check_sees_drift():
    class Sync:
        def get(self, name: str, *, timeout: float | None = None) -> str: ...

        def extra(self) -> None: ...

    class Async:
        async def get(self, name: str, *, timeout: float | None = 5) -> str: ...

    with pytest.raises(AssertionError, match="Async lacks"):
        test_each_sync_method_has_its_asyncio_twin(Sync, Async)
    Sync.extra = None  # type: ignore[attr-defined]
    del Sync.extra
    with pytest.raises(AssertionError, match="signatures differ"):
        test_each_sync_method_has_its_asyncio_twin(Sync, Async)
