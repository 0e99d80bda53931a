"""What every store shares: the base class (the pool), the tenant-scoped document and collection
look-ups and the quota check as functions of a connection (every store calls them inside its own
transaction), the row selects and small helpers."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

import psycopg
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from sluice_common.errors import (
    NotFound,
    ResourceExhausted,
)
from sluice_common.reasons import Reason

from .literals import compose
from .rows import CollectionRow, DocumentRow

# Columns a document's move resets or clears.
FRESH_PROGRESS = {"progress_stage": None, "progress_done": 0, "progress_total": 0, "progress_unit": ""}

NO_ERROR = {"error_code": None, "error_message": None}

# A document with its INGEST job, as DocumentRow reads it; `document_select` completes it.
DOCUMENT_SELECT = """
    SELECT d.id, d.collection_id, c.name AS collection, d.filename, d.mime_type, d.status::text AS status,
           d.error_code, d.error_message, d.progress_stage::text AS progress_stage, d.progress_done,
           d.progress_total, d.progress_unit, d.content_sha256, d.size_bytes, d.metadata, d.request_id,
           d.chunk_count, d.created_at, d.updated_at,
           j.id AS job_id, j.status::text AS job_status, j.attempts, j.max_attempts, j.available_at,
           now() AS db_now, d.source_uri, d.version, d.version_role,
           pg_current_wal_insert_lsn()::text AS wal_lsn, j.priority
    FROM documents d
    JOIN collections c ON c.id = d.collection_id
    JOIN ingestion_jobs j ON j.document_id = d.id AND j.kind = {kind_ingest}
"""


@cache
def document_select(where: str) -> bytes:
    """DOCUMENT_SELECT narrowed by a module's named condition (`where`, with its ORDER BY or
    LIMIT if any), composed once per condition."""
    return compose(DOCUMENT_SELECT + " WHERE " + where)


DOCUMENT_BY_ID = "d.id = %s"
DOCUMENT_OF_TENANT = "d.id = %s AND d.tenant_id = %s"

COLLECTION_COLUMNS = """
    c.id, c.tenant_id, c.name, c.description, c.embedder_provider, c.embedder_model, c.dimensions,
    c.chunk_max_characters, c.chunk_new_after_n_chars, c.chunk_overlap, c.max_attempts, c.created_at, c.reranker,
    c.vector_precision
"""

# A collection with its document counts, as CollectionRow reads it (completed by a WHERE).
COLLECTION_SELECT = (
    "SELECT"
    + COLLECTION_COLUMNS
    + """,
           (SELECT count(*) FROM documents d WHERE d.collection_id = c.id) AS document_count,
           (SELECT count(*) FROM documents d WHERE d.collection_id = c.id AND d.status = {doc_ready}) AS ready_document_count
    FROM collections c
"""
)

COLLECTION_BY_NAME_SQL = compose(COLLECTION_SELECT + " WHERE c.tenant_id = %s AND c.name = %s")
COLLECTION_SETTINGS_BY_NAME_SQL = compose(
    "SELECT" + COLLECTION_COLUMNS + "FROM collections c WHERE c.tenant_id = %s AND c.name = %s"
)

# The quota check (check_quota).
TENANT_QUOTA_SQL = "SELECT max_documents, max_stored_bytes, max_collections FROM tenants WHERE id = %s"
LOCK_TENANT_SQL = "SELECT 1 FROM tenants WHERE id = %s FOR UPDATE"
TENANT_COLLECTIONS_SQL = "SELECT count(*) FROM collections WHERE tenant_id = %s"
TENANT_USAGE_SQL = (
    "SELECT count(*) AS documents, coalesce(sum(size_bytes), 0) AS stored_bytes FROM documents WHERE tenant_id = %s"
)


@dataclass(frozen=True, slots=True)
class _Quota:
    max_documents: int | None
    max_stored_bytes: int | None
    max_collections: int | None


@dataclass(frozen=True, slots=True)
class _Usage:
    documents: int
    stored_bytes: int


# Binary COPY framing (PostgreSQL docs, "COPY: Binary Format"): signature, flags, header extension.
COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)

COPY_TRAILER = struct.pack("!h", -1)


async def one_row(conn: psycopg.AsyncConnection, query: Any, params: Any = None) -> Any:
    """The one row of a statement that always returns one (an aggregate, a locked row)."""
    row = await (await conn.execute(query, params)).fetchone()
    if row is None:  # pragma: no cover - a broken invariant, not a user error
        raise RuntimeError("a statement that returns one row returned none")
    return row


Row = TypeVar("Row")


async def named_row(conn: psycopg.AsyncConnection[Any], row_type: type[Row], query: Any, params: Any = None) -> Row | None:
    """The first row of a statement, as `row_type` built from its columns by name (None: no row)."""
    cur = conn.cursor(row_factory=class_row(row_type))
    await cur.execute(query, params)
    return await cur.fetchone()


async def named_rows(conn: psycopg.AsyncConnection[Any], row_type: type[Row], query: Any, params: Any = None) -> list[Row]:
    """Every row of a statement, each as `row_type` built from its columns by name."""
    cur = conn.cursor(row_factory=class_row(row_type))
    await cur.execute(query, params)
    return await cur.fetchall()


class StoreBase:
    """A store of one area over the shared pool (main.py composes them; no store inherits another)."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.pool = pool


async def lookup_document(conn: psycopg.AsyncConnection, document_id: uuid.UUID, tenant_id: int | None = None) -> DocumentRow:
    """The document by id; with `tenant_id`, only if it is that tenant's (else NOT_FOUND).
    Without it only for JobService paths, whose job ids were fenced by their lease."""
    if tenant_id is None:
        row = await lookup_document_where(conn, DOCUMENT_BY_ID, (document_id,))
    else:
        row = await lookup_document_where(conn, DOCUMENT_OF_TENANT, (document_id, tenant_id))
    if row is None:
        raise NotFound(f"document {document_id} does not exist", reason=Reason.DOCUMENT_NOT_FOUND)
    return row


async def send_document_lookup(conn: psycopg.AsyncConnection, document_id: uuid.UUID) -> psycopg.AsyncCursor[DocumentRow]:
    """The document's select, sent (in pipeline mode: fetched at the next sync); see fetch_document_lookup."""
    cur = conn.cursor(row_factory=class_row(DocumentRow))
    await cur.execute(document_select(DOCUMENT_BY_ID), (document_id,))
    return cur


async def fetch_document_lookup(cur: psycopg.AsyncCursor[DocumentRow]) -> DocumentRow:
    row = await cur.fetchone()
    if row is None:  # pragma: no cover - the caller holds the document's lock
        raise NotFound("the document does not exist", reason=Reason.DOCUMENT_NOT_FOUND)
    return row


async def lookup_document_where(conn: psycopg.AsyncConnection, where: str, params: Sequence[Any]) -> DocumentRow | None:
    """The first document (with its job) that a named condition of a module's (`where`) selects."""
    return await named_row(conn, DocumentRow, document_select(where), params)


async def check_quota(
    conn: psycopg.AsyncConnection,
    tenant_id: int,
    *,
    documents: int = 0,
    stored_bytes: int = 0,
    collections: int = 0,
) -> None:
    """Refuse (RESOURCE_EXHAUSTED, nothing written) what would take the tenant over a quota.

    Only a tenant with quotas pays for this: its row is locked for the rest of the
    transaction, so two concurrent uploads cannot both take the last place.
    """
    quota = await named_row(conn, _Quota, TENANT_QUOTA_SQL, (tenant_id,))
    if quota is None:
        raise NotFound("the tenant of this key no longer exists", reason=Reason.TENANT_NOT_FOUND)
    max_documents, max_bytes, max_collections = quota.max_documents, quota.max_stored_bytes, quota.max_collections
    if max_documents is None and max_bytes is None and max_collections is None:
        return
    await conn.execute(LOCK_TENANT_SQL, (tenant_id,))
    if collections and max_collections is not None:
        (count,) = await one_row(conn, TENANT_COLLECTIONS_SQL, (tenant_id,))
        if count + collections > max_collections:
            raise ResourceExhausted(
                f"the tenant's quota of {max_collections} collections is used up",
                reason=Reason.QUOTA_EXCEEDED,
                quota="collections",
                limit=max_collections,
            )
    if (documents and max_documents is not None) or (stored_bytes and max_bytes is not None):
        usage = await named_row(conn, _Usage, TENANT_USAGE_SQL, (tenant_id,))
        assert usage is not None  # an aggregate: always one row
        if max_documents is not None and usage.documents + documents > max_documents:
            raise ResourceExhausted(
                f"the tenant's quota of {max_documents} documents is used up",
                reason=Reason.QUOTA_EXCEEDED,
                quota="documents",
                limit=max_documents,
            )
        if max_bytes is not None and usage.stored_bytes + stored_bytes > max_bytes:
            raise ResourceExhausted(
                f"this upload would take the tenant over its quota of {max_bytes} stored bytes",
                reason=Reason.QUOTA_EXCEEDED,
                quota="stored_bytes",
                limit=max_bytes,
            )


async def lookup_collection(conn: psycopg.AsyncConnection, tenant_id: int, name: str) -> CollectionRow:
    """The tenant's collection `name` with its document counts (NOT_FOUND otherwise)."""
    row = await named_row(conn, CollectionRow, COLLECTION_BY_NAME_SQL, (tenant_id, name))
    if row is None:
        raise NotFound(f"collection {name!r} does not exist", reason=Reason.COLLECTION_NOT_FOUND, collection=name)
    return row


async def lookup_collection_settings(conn: psycopg.AsyncConnection, tenant_id: int, name: str) -> CollectionRow:
    """The collection's own columns, without the document counts (cheap: for hot paths)."""
    row = await named_row(conn, CollectionRow, COLLECTION_SETTINGS_BY_NAME_SQL, (tenant_id, name))
    if row is None:
        raise NotFound(f"collection {name!r} does not exist", reason=Reason.COLLECTION_NOT_FOUND, collection=name)
    return row
