"""What every kind of source is to the sync runner: a `Reader` that lists a source's items
sorted by source_uri (the order a run's checkpoint follows) and reads one item's bytes, and the
two errors it may raise (docs/sources.md, "Kinds"). Each kind lives in a module of its own
(folder, git, s3, http); `kinds.reader_for` picks one.
"""

from __future__ import annotations

from typing import Protocol

from .domain import ListedItem


class SourceUnavailable(Exception):
    """The source could not be listed (unreachable, refused, missing): the run ends FAILED with
    this message, which is fit for the caller."""


class ItemVanished(Exception):
    """An item listed a moment ago is gone (the source changed during the sync)."""


class Reader(Protocol):
    async def list_items(self) -> list[ListedItem]: ...

    async def read(self, item: ListedItem) -> bytes: ...

    async def close(self) -> None: ...
