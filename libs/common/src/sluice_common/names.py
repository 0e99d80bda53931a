"""Resource names (AIP-122): built in one place, parsed in one place.

A document is `collections/{collection}/documents/{id}`; APIs that take a document id accept
either the bare id or its full name.
"""

from __future__ import annotations

import re

_DOCUMENT = re.compile(r"^collections/([^/]+)/documents/([^/]+)$")
_SOURCE = re.compile(r"^collections/([^/]+)/sources/([^/]+)$")


def document_name(collection: str, document_id: str) -> str:
    return f"collections/{collection}/documents/{document_id}"


def parse_document_name(name: str) -> tuple[str, str] | None:
    """(collection, id) of a document's resource name, or None if `name` is not one."""
    match = _DOCUMENT.match(name.strip())
    return (match.group(1), match.group(2)) if match else None


def document_id_of(value: str) -> str:
    """The id in a document's resource name, or `value` itself when it is a bare id."""
    parsed = parse_document_name(value)
    return parsed[1] if parsed else value.strip()


def source_name(collection: str, source_id: str) -> str:
    """A source of a collection (docs/sources.md): `collections/{collection}/sources/{id}`."""
    return f"collections/{collection}/sources/{source_id}"


def source_run_name(collection: str, source_id: str, run_id: str) -> str:
    return f"{source_name(collection, source_id)}/runs/{run_id}"


def source_id_of(value: str) -> str:
    """The id in a source's resource name, or `value` itself when it is a bare id."""
    match = _SOURCE.match(value.strip())
    return match.group(2) if match else value.strip()


__all__ = ["document_id_of", "document_name", "parse_document_name", "source_id_of", "source_name", "source_run_name"]
