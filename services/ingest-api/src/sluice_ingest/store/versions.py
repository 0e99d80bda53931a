"""Document versions (docs/architecture.md#document-versions): what the upload, the READY commit
and the deletions do with the versions of one source, as functions of a connection (each caller
runs them inside its own transaction).

Every version is a `documents` row with its own INGEST job; `version_role` says which one serves
(CURRENT) and which one is newer (NEXT); partial unique indexes hold at most one of each per
(collection, source_uri) (migration 0021). Locks keep the store's order, job rows before document
rows, and among the versions of a source the NEXT one before the CURRENT one: the READY commit
of a NEXT version holds its own job and document when it deletes the CURRENT version, so whoever
takes both versions' locks takes them in that order too and never deadlocks with it.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from psycopg.rows import class_row

from ..domain import DocumentStatus, VersionOutcome, VersionRole
from .common import document_select, named_rows
from .literals import compose
from .rows import DocumentRow, as_members

# pg_advisory_xact_lock(class, key): uploads of one source, one at a time (a class of its own
# beside the index builds' 90091 and the eval gate's 90092).
SOURCE_LOCK_CLASS = 90093

HISTORY_LENGTH = 10

LOCK_SOURCE_SQL = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"

# The jobs of a source's live versions, locked NEXT's before CURRENT's, then the versions read
# afresh, NEXT first; each with or without the tenant's condition (lock_live_versions).
_LIVE = "d.collection_id = %s AND d.source_uri = %s"
_OF_TENANT = " AND d.tenant_id = %s"
_LOCK_JOBS = "SELECT j.id FROM ingestion_jobs j JOIN documents d ON d.id = j.document_id WHERE "
_CURRENT_LAST = " ORDER BY d.version_role = {role_current}"
LOCK_LIVE_JOBS_SQL = {
    tenant: compose(_LOCK_JOBS + _LIVE + (_OF_TENANT if tenant else "") + _CURRENT_LAST + ", j.id FOR UPDATE OF j")
    for tenant in (False, True)
}
LIVE_VERSIONS_SQL = {tenant: document_select(_LIVE + (_OF_TENANT if tenant else "") + _CURRENT_LAST) for tenant in (False, True)}

# The source's version in one role, its jobs locked first (lock_role).
LOCK_ROLE_JOBS_SQL = _LOCK_JOBS + _LIVE + " AND d.version_role = %s FOR UPDATE OF j"
ROLE_SQL = document_select(_LIVE + " AND d.version_role = %s")

# How versions ended (a FAILED one keeps its message), before their rows are deleted.
END_VERSIONS_SQL = compose(
    "UPDATE document_versions v SET outcome = %s, ended_at = now(),"
    " error_message = CASE d.status WHEN {doc_failed} THEN d.error_message END"
    " FROM documents d WHERE d.id = v.document_id AND v.document_id = ANY(%s) AND v.outcome IS NULL"
)
DELETE_VERSIONS_SQL = "DELETE FROM documents WHERE id = ANY(%s)"
NEXT_VERSION_SQL = "SELECT coalesce(max(version), 0) + 1 FROM document_versions WHERE collection_id = %s AND source_uri = %s"
RECORD_VERSION_SQL = (
    "INSERT INTO document_versions (collection_id, tenant_id, source_uri, version, document_id, content_sha256)"
    " SELECT collection_id, tenant_id, source_uri, version, id, content_sha256 FROM documents WHERE id = %s"
)
# The swap: a NEXT version takes the CURRENT role (the role is no status: not a move).
BECOME_CURRENT_SQL = compose("UPDATE documents SET version_role = {role_current} WHERE id = %s")
SERVING_SQL = "UPDATE document_versions SET serving_at = coalesce(serving_at, now()) WHERE document_id = %s"


@dataclass(frozen=True, slots=True)
class VersionRow:
    """One version of a source: its history row, with its document's state while it exists
    (`status` and `version_role` None once it ended)."""

    version: int
    document_id: uuid.UUID
    content_sha256: str
    created_at: dt.datetime
    serving_at: dt.datetime | None
    ended_at: dt.datetime | None
    outcome: VersionOutcome | None
    error_message: str | None
    status: DocumentStatus | None
    version_role: VersionRole | None

    def __post_init__(self) -> None:
        as_members(self, outcome=VersionOutcome, status=DocumentStatus, version_role=VersionRole)


@dataclass(frozen=True, slots=True)
class VersionsView:
    current: VersionRow | None
    next: VersionRow | None
    history: list[VersionRow]


async def lock_source(conn: psycopg.AsyncConnection[Any], collection_id: int, source_uri: str) -> None:
    """Uploads of one source run one at a time (until the transaction ends): each decides
    between "the same content", "supersede the pending version" and "a new version" on what
    the previous one committed. The unique indexes hold the invariants regardless."""
    await conn.execute(LOCK_SOURCE_SQL, (SOURCE_LOCK_CLASS, f"{collection_id}/{source_uri}"))


async def lock_live_versions(
    conn: psycopg.AsyncConnection[Any],
    collection_id: int,
    source_uri: str,
    tenant_id: int | None = None,
) -> list[DocumentRow]:
    """Lock every job of the source's live versions (NEXT's before CURRENT's), then read the
    versions afresh (a new statement: what a commit we waited for changed is seen), NEXT first."""
    tenant = tenant_id is not None
    params: tuple[Any, ...] = (collection_id, source_uri) + ((tenant_id,) if tenant else ())
    await conn.execute(LOCK_LIVE_JOBS_SQL[tenant], params)
    return await named_rows(conn, DocumentRow, LIVE_VERSIONS_SQL[tenant], params)


async def end_versions(
    conn: psycopg.AsyncConnection[Any],
    document_ids: list[uuid.UUID],
    outcome: VersionOutcome,
) -> None:
    """Record in the history how these versions ended (before their rows are deleted: a FAILED
    version keeps its message)."""
    if not document_ids:
        return
    await conn.execute(END_VERSIONS_SQL, (str(outcome), document_ids))


async def delete_versions(
    conn: psycopg.AsyncConnection[Any],
    documents: list[DocumentRow],
    outcome: VersionOutcome,
) -> None:
    """Delete these versions (their jobs locked by the caller): row, content, chunks in every
    generation and jobs go (deleting is not a move); the history says how they ended."""
    ids = [d.id for d in documents]
    if not ids:
        return
    await end_versions(conn, ids, outcome)
    await conn.execute(DELETE_VERSIONS_SQL, (ids,))


async def add_version(
    conn: psycopg.AsyncConnection[Any],
    tenant_id: int,
    collection_id: int,
    source_uri: str,
) -> int:
    """The next version number of a source: one more than any it ever had (the history keeps
    them after their rows are gone)."""
    row = await (await conn.execute(NEXT_VERSION_SQL, (collection_id, source_uri))).fetchone()
    assert row is not None
    return int(row[0])


async def record_version(conn: psycopg.AsyncConnection[Any], document_id: uuid.UUID) -> None:
    """The history row of a version just inserted."""
    await conn.execute(RECORD_VERSION_SQL, (document_id,))


async def swap_in(conn: psycopg.AsyncConnection[Any], document: DocumentRow) -> DocumentRow:
    """Called by the READY commit of a version (rule 1's transaction, the version's job and
    document locked): a NEXT version deletes the CURRENT one (its jobs locked first) and takes
    its role, so the old chunks leave search at the very commit the new ones enter. The history
    records the swap (the events log records both documents' changes: READY and deleted)."""
    if document.source_uri is None:
        return document
    if document.version_role is VersionRole.NEXT:
        replaced = await lock_role(conn, document.collection_id, document.source_uri, VersionRole.CURRENT)
        await delete_versions(conn, replaced, VersionOutcome.REPLACED)
        await conn.execute(BECOME_CURRENT_SQL, (document.id,))
        document = replace(document, version_role=VersionRole.CURRENT)
    await conn.execute(SERVING_SQL, (document.id,))
    return document


async def lock_role(
    conn: psycopg.AsyncConnection[Any],
    collection_id: int,
    source_uri: str,
    role: VersionRole,
) -> list[DocumentRow]:
    """The source's version in `role` (none or one), its jobs locked, then its document read."""
    await conn.execute(LOCK_ROLE_JOBS_SQL, (collection_id, source_uri, str(role)))
    return await named_rows(conn, DocumentRow, ROLE_SQL, (collection_id, source_uri, str(role)))


VERSIONS_SQL = compose("""
    SELECT v.version, v.document_id, v.content_sha256, v.created_at, v.serving_at, v.ended_at, v.outcome,
           coalesce(v.error_message, CASE WHEN d.status = {doc_failed} THEN d.error_message END) AS error_message,
           d.status::text AS status, d.version_role
      FROM document_versions v LEFT JOIN documents d ON d.id = v.document_id
     WHERE v.collection_id = %(collection)s AND v.source_uri = %(source)s AND (NOT %(live)s OR d.id IS NOT NULL)
     ORDER BY v.version DESC LIMIT %(limit)s
""")


async def versions_view(conn: psycopg.AsyncConnection[Any], collection_id: int, source_uri: str) -> VersionsView:
    """The current version, the next one and the latest versions of a source, newest first (the
    live ones are read on their own: a current version may be older than the latest ten, when
    newer ones kept failing or being superseded)."""
    cur = conn.cursor(row_factory=class_row(VersionRow))
    params = {"collection": collection_id, "source": source_uri}
    await cur.execute(VERSIONS_SQL, {**params, "live": False, "limit": HISTORY_LENGTH})
    history = await cur.fetchall()
    await cur.execute(VERSIONS_SQL, {**params, "live": True, "limit": 2})
    live = await cur.fetchall()
    current = next((v for v in live if v.version_role is VersionRole.CURRENT), None)
    upcoming = next((v for v in live if v.version_role is VersionRole.NEXT), None)
    return VersionsView(current, upcoming, history)


__all__ = [
    "SOURCE_LOCK_CLASS",
    "VersionRow",
    "VersionsView",
    "add_version",
    "delete_versions",
    "end_versions",
    "lock_live_versions",
    "lock_role",
    "lock_source",
    "record_version",
    "swap_in",
    "versions_view",
]
