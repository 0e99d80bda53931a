"""Sources (docs/sources.md): kinds, the run's states and their moves, and the pure rules of a
sync (what is unchanged, when deletions are a mass deletion). No IO."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..domain import IllegalTransition


class SourceKind(enum.StrEnum):
    LOCAL_FOLDER = "LOCAL_FOLDER"
    S3 = "S3"
    HTTP = "HTTP"
    GIT = "GIT"


class RunState(enum.StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    BLOCKED_MASS_DELETE = "BLOCKED_MASS_DELETE"


class RunEvent(enum.StrEnum):
    """A run's events in its collection's events log (migration 0024): STARTED and FINISHED by
    the trigger on its state, PROGRESS by the runner's checkpoint when it asks."""

    STARTED = "STARTED"
    PROGRESS = "PROGRESS"
    FINISHED = "FINISHED"


ACTIVE_STATES = (RunState.PENDING, RunState.RUNNING)

# Every move a run may make, with why it exists. The store's statements are conditional on
# these sources (`WHERE state = ANY(...)`), so a move that lost a race changes nothing.
RUN_MOVES: dict[tuple[RunState, RunState], str] = {
    (RunState.PENDING, RunState.RUNNING): "a runner claimed the run (a new lease token, attempts + 1)",
    (RunState.RUNNING, RunState.RUNNING): "the lease expired and another runner took the run over, from its checkpoint",
    (
        RunState.RUNNING,
        RunState.PENDING,
    ): "the runner hit an unexpected error or stopped, with attempts left: it hands the run back",
    (RunState.RUNNING, RunState.SUCCEEDED): "every listed item was compared and the gone ones deleted",
    (RunState.RUNNING, RunState.FAILED): "the source could not be listed, or the attempts ran out",
    (RunState.RUNNING, RunState.BLOCKED_MASS_DELETE): "the deletions would exceed the share, and the sync did not allow it",
}


def sources_of(target: RunState) -> list[str]:
    """The states a run may move to `target` from (the WHERE of the conditional UPDATE)."""
    return [str(a) for (a, b) in RUN_MOVES if b is target]


def check_run_move(current: RunState, target: RunState) -> None:
    if (current, target) not in RUN_MOVES:
        raise IllegalTransition(f"a sync run cannot move from {current} to {target}")


# So many deletions never count as a mass deletion, whatever the share (unless they are every
# item the source synced): in a small collection one removed file is already a large share.
MASS_DELETE_FLOOR = 3


def is_mass_delete(would_delete: int, source_items: int, collection_sources: int, max_share: float) -> bool:
    """Whether deleting `would_delete` documents needs allow_mass_delete: every item the source
    synced (an empty or unmounted folder, a wrong prefix) always does; otherwise more than
    MASS_DELETE_FLOOR and more than `max_share` of the collection's live sources."""
    if would_delete <= 0:
        return False
    if would_delete >= source_items:
        return True
    return would_delete > MASS_DELETE_FLOOR and would_delete > max_share * max(collection_sources, 1)


@dataclass(frozen=True, slots=True)
class ListedItem:
    """One item a source listed: its source_uri in the collection, a file name, and the
    fingerprint the source reports without reading the content (size and mtime, an ETag, a git
    blob id; empty when the source has none, and then the content is always read and hashed)."""

    source_uri: str
    filename: str
    fingerprint: str
    # Where to read it (a path, an object key, a URL): kind-specific, never shown to clients.
    locator: str
    mime_type: str = ""


@dataclass(frozen=True, slots=True)
class KnownItem:
    """What the source put into the collection for a source_uri at an earlier run."""

    fingerprint: str
    content_sha256: str


def unchanged_without_reading(item: ListedItem, known: KnownItem | None, live_shas: set[str]) -> bool:
    """The item's content need not even be read: the source reports the same fingerprint as the
    one recorded, and what was uploaded then is still live in the collection (as the current or
    the next version of its source_uri). A document deleted by hand is uploaded again."""
    return (
        known is not None
        and bool(item.fingerprint)
        and item.fingerprint == known.fingerprint
        and known.content_sha256 in live_shas
    )


__all__ = [
    "ACTIVE_STATES",
    "MASS_DELETE_FLOOR",
    "RUN_MOVES",
    "KnownItem",
    "ListedItem",
    "RunEvent",
    "RunState",
    "SourceKind",
    "check_run_move",
    "is_mass_delete",
    "sources_of",
    "unchanged_without_reading",
]
