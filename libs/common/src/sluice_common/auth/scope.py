"""A key's collection scope (docs/tenancy.md, "Scoped keys"): outside it, a collection or
anything in it answers exactly as a missing one would, so a scoped key learns nothing of it."""

from __future__ import annotations

import uuid

from ..errors import NotFound, PermissionDenied
from ..reasons import Reason
from .principal import current_principal


def collection_not_found(name: str) -> NotFound:
    """What a missing collection answers, everywhere it is looked up by name."""
    return NotFound(f"collection {name!r} does not exist", reason=Reason.COLLECTION_NOT_FOUND, collection=name)


def document_not_found(document_id: uuid.UUID) -> NotFound:
    """What a missing document answers when it is looked up by id."""
    return NotFound(f"document {document_id} does not exist", reason=Reason.DOCUMENT_NOT_FOUND)


def scope() -> list[str] | None:
    """The calling key's collections, to pass into a query that lists; None: every collection."""
    return current_principal().scope


def require_visible(collection: str) -> None:
    """NOT_FOUND, as a missing collection, when `collection` is outside the key's scope. An empty
    name passes, for the use case to refuse as it always has."""
    if collection and not current_principal().may_see(collection):
        raise collection_not_found(collection)


def require_creatable(collection: str) -> None:
    """A key may create only a collection it may see: PERMISSION_DENIED otherwise, which reveals
    nothing (whether the collection exists is not looked at). An empty name passes."""
    if collection and not current_principal().may_see(collection):
        raise PermissionDenied(
            f"this key is limited to some collections; {collection[:64]!r} is not one of them",
            reason=Reason.COLLECTION_OUT_OF_SCOPE,
        )


__all__ = [
    "collection_not_found",
    "document_not_found",
    "require_creatable",
    "require_visible",
    "scope",
]
