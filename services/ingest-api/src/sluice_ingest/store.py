"""PostgreSQL adapter: every use case is one transaction made of conditional statements.

Lock order is always job row, then document row, so claims, failures, completions and
deletions never deadlock each other. A state change is an `UPDATE … WHERE status = ANY(…)`
built from the domain tables; zero rows means the move was illegal or lost a race.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from sluice_common import vector_index
from sluice_common.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    LeaseNotHeld,
    NotFound,
    ResourceExhausted,
)

from . import metrics
from .domain import (
    LEASE_EXPIRED_EXHAUSTED,
    LEASE_EXPIRED_RETRYING,
    AttemptOutcome,
    DocumentStatus as D,
    JobStatus as J,
    check_document_transition,
    document_sources,
    job_sources,
    retry_delay_seconds,
    retry_message,
    should_retry,
)

DOCUMENT_SELECT = """
    SELECT d.id, d.collection_id, c.name AS collection, d.filename, d.mime_type, d.status::text AS status,
           d.error_code, d.error_message, d.progress_stage::text AS progress_stage, d.progress_done,
           d.progress_total, d.progress_unit, d.content_sha256, d.size_bytes, d.metadata, d.request_id,
           d.chunk_count, d.created_at, d.updated_at,
           j.id AS job_id, j.status::text AS job_status, j.attempts, j.max_attempts, j.available_at,
           now() AS db_now
    FROM documents d
    JOIN collections c ON c.id = d.collection_id
    JOIN ingestion_jobs j ON j.document_id = d.id
"""

COLLECTION_SELECT = """
    SELECT c.*,
           (SELECT count(*) FROM documents d WHERE d.collection_id = c.id) AS document_count,
           (SELECT count(*) FROM documents d WHERE d.collection_id = c.id AND d.status = 'READY') AS ready_document_count
    FROM collections c
"""

# Binary COPY framing (PostgreSQL docs, "COPY: Binary Format"): signature, flags, header extension.
COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
COPY_TRAILER = struct.pack("!h", -1)


@dataclass(frozen=True)
class NewCollection:
    tenant_id: int
    name: str
    description: str
    embedder_provider: str
    embedder_model: str
    dimensions: int
    chunk_max_characters: int
    chunk_new_after_n_chars: int
    chunk_overlap: int
    max_attempts: int


class UploadedContent(Protocol):
    """An upload's bytes, read back in pieces (uploads.SpooledContent): never one bytes object."""

    size: int

    def pieces(self) -> AsyncIterator[bytes]: ...


@dataclass(frozen=True)
class NewDocument:
    tenant_id: int
    collection: str
    filename: str
    mime_type: str
    metadata: dict[str, str]
    request_id: str | None
    content: UploadedContent
    content_sha256: str


@dataclass(frozen=True)
class ChunkRow:
    index: int
    text: str
    page_number: int
    element_type: str
    section_title: str
    text_as_html: str
    embedding: np.ndarray | None
    search_terms: str = ""
    text_source: str = ""
    ocr_confidence: float | None = None


@dataclass(frozen=True)
class JobPolicy:
    lease_seconds: float
    retry_delay_seconds: float
    max_retry_delay_seconds: float


class PostgresStore:
    def __init__(self, pool: AsyncConnectionPool, policy: JobPolicy) -> None:
        self.pool = pool
        self.policy = policy

    # ---------------------------------------------------------------- collections

    async def create_collection(self, new: NewCollection) -> dict[str, Any]:
        async with self.pool.connection() as conn, conn.transaction():
            await self._check_quota(conn, new.tenant_id, collections=1)
            try:
                row = await (
                    await conn.cursor(row_factory=dict_row).execute(
                        """
                        INSERT INTO collections (tenant_id, name, description, embedder_provider, embedder_model, dimensions,
                            chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts)
                        VALUES (%(tenant_id)s, %(name)s, %(description)s, %(embedder_provider)s, %(embedder_model)s, %(dimensions)s,
                            %(chunk_max_characters)s, %(chunk_new_after_n_chars)s, %(chunk_overlap)s, %(max_attempts)s)
                        ON CONFLICT (tenant_id, name) DO NOTHING
                        RETURNING id
                        """,
                        new.__dict__,
                    )
                ).fetchone()
            except psycopg.errors.CheckViolation as exc:
                raise InvalidArgument(f"invalid collection settings: {exc.diag.constraint_name}") from exc
            if row is None:
                raise AlreadyExists(f"collection {new.name!r} already exists", reason="COLLECTION_EXISTS", collection=new.name)
            await conn.execute(vector_index.create_index_sql(row["id"], new.dimensions))
            return await self._collection(conn, new.tenant_id, new.name)

    async def get_collection(self, tenant_id: int, name: str) -> dict[str, Any]:
        async with self.pool.connection() as conn:
            return await self._collection(conn, tenant_id, name)

    async def collection_settings(self, tenant_id: int, name: str) -> dict[str, Any]:
        """The collection's own columns, without the document counts (cheap: for hot paths)."""
        async with self.pool.connection() as conn:
            return await self._collection_settings(conn, tenant_id, name)

    async def _collection_settings(self, conn: psycopg.AsyncConnection, tenant_id: int, name: str) -> dict[str, Any]:
        row = await (
            await conn.cursor(row_factory=dict_row).execute(
                "SELECT * FROM collections WHERE tenant_id = %s AND name = %s", (tenant_id, name)
            )
        ).fetchone()
        if row is None:
            raise NotFound(f"collection {name!r} does not exist", reason="COLLECTION_NOT_FOUND", collection=name)
        return row

    async def _collection(self, conn: psycopg.AsyncConnection, tenant_id: int, name: str) -> dict[str, Any]:
        row = await (
            await conn.cursor(row_factory=dict_row).execute(
                COLLECTION_SELECT + " WHERE c.tenant_id = %s AND c.name = %s", (tenant_id, name)
            )
        ).fetchone()
        if row is None:
            raise NotFound(f"collection {name!r} does not exist", reason="COLLECTION_NOT_FOUND", collection=name)
        return row

    async def list_collections(self, tenant_id: int, after: str | None, limit: int) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                COLLECTION_SELECT + " WHERE c.tenant_id = %(tenant)s AND (%(after)s::text IS NULL OR c.name > %(after)s)"
                " ORDER BY c.name LIMIT %(limit)s",
                {"tenant": tenant_id, "after": after, "limit": limit},
            )
            return await cur.fetchall()

    async def delete_collection(self, tenant_id: int, name: str, force: bool) -> int:
        async with self.pool.connection() as conn, conn.transaction():
            row = await (
                await conn.execute(
                    "SELECT id FROM collections WHERE tenant_id = %s AND name = %s FOR UPDATE", (tenant_id, name)
                )
            ).fetchone()
            if row is None:
                raise NotFound(f"collection {name!r} does not exist", reason="COLLECTION_NOT_FOUND", collection=name)
            collection_id = row[0]
            (count,) = await (
                await conn.execute("SELECT count(*) FROM documents WHERE collection_id = %s", (collection_id,))
            ).fetchone()
            if count and not force:
                raise FailedPrecondition(
                    f"collection {name!r} still has {count} documents; delete them first or pass force",
                    reason="COLLECTION_NOT_EMPTY",
                    documents=count,
                )
            # Lock order: jobs before documents, as everywhere else.
            await conn.execute(
                "SELECT 1 FROM ingestion_jobs j JOIN documents d ON d.id = j.document_id"
                " WHERE d.collection_id = %s FOR UPDATE OF j",
                (collection_id,),
            )
            await conn.execute("DELETE FROM collections WHERE id = %s", (collection_id,))
            await conn.execute(vector_index.drop_index_sql(collection_id))
            return int(count)

    # ---------------------------------------------------------------- documents

    async def create_document(self, new: NewDocument) -> tuple[dict[str, Any], bool]:
        """Rule 5: the document, its content and its job are created in one transaction.

        Returns (document, created). An existing document is returned for a repeated
        request_id or for the same content in the same collection.
        """
        async with self.pool.connection() as conn, conn.transaction():
            collection = await self._collection_settings(conn, new.tenant_id, new.collection)
            if new.request_id:
                existing = await self._document_where(
                    conn, "d.tenant_id = %s AND d.request_id = %s", (new.tenant_id, new.request_id)
                )
                if existing is not None:
                    if existing["collection_id"] != collection["id"] or existing["content_sha256"] != new.content_sha256:
                        raise AlreadyExists(
                            "request_id was already used for a different upload",
                            reason="REQUEST_ID_REUSED",
                            request_id=new.request_id,
                        )
                    return existing, False
            await self._check_quota(conn, new.tenant_id, documents=1, stored_bytes=new.content.size)
            row = await (
                await conn.execute(
                    """
                    INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256, size_bytes,
                        metadata, request_id)
                    VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
                    ON CONFLICT DO NOTHING
                    RETURNING id
                    """,
                    (
                        new.tenant_id,
                        collection["id"],
                        new.filename,
                        new.mime_type,
                        new.content_sha256,
                        new.content.size,
                        json.dumps(new.metadata),
                        new.request_id,
                    ),
                )
            ).fetchone()
            if row is None:
                # Same content already in this collection (or a concurrent twin with our request_id).
                existing = await self._document_where(
                    conn, "d.collection_id = %s AND d.content_sha256 = %s", (collection["id"], new.content_sha256)
                )
                if existing is None and new.request_id:
                    existing = await self._document_where(
                        conn, "d.tenant_id = %s AND d.request_id = %s", (new.tenant_id, new.request_id)
                    )
                if existing is None:  # pragma: no cover - the conflicting row was deleted meanwhile
                    raise FailedPrecondition("the upload raced with a deletion; try again", reason="UPLOAD_RACE")
                return existing, False
            document_id = row[0]
            await self._copy_content(conn, document_id, new.content)
            await conn.execute(
                "INSERT INTO ingestion_jobs (document_id, max_attempts) VALUES (%s, %s)",
                (document_id, collection["max_attempts"]),
            )
            return await self._document(conn, document_id), True

    @staticmethod
    async def _copy_content(conn: psycopg.AsyncConnection, document_id: uuid.UUID, content: UploadedContent) -> None:
        """One document_contents row, its bytea streamed piece by piece: the file is never whole in memory here.

        Binary COPY written by hand: the signature, one tuple (uuid, bytea of content.size bytes,
        whose length goes first), the trailer. Readers are unchanged (content_slice).
        """
        async with conn.cursor().copy("COPY document_contents (document_id, content) FROM STDIN (FORMAT BINARY)") as copy:
            await copy.write(COPY_SIGNATURE + struct.pack("!hi", 2, 16) + document_id.bytes + struct.pack("!i", content.size))
            async for piece in content.pieces():
                await copy.write(piece)
            await copy.write(COPY_TRAILER)

    async def get_document(self, tenant_id: int, document_id: uuid.UUID) -> dict[str, Any]:
        async with self.pool.connection() as conn:
            return await self._document(conn, document_id, tenant_id)

    async def get_document_with_history(
        self, tenant_id: int, document_id: uuid.UUID
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with self.pool.connection() as conn, conn.transaction():
            document = await self._document(conn, document_id, tenant_id)
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "SELECT number, worker_id, stage::text AS stage, outcome::text AS outcome, error_code, error_message,"
                " retryable, started_at, ended_at FROM job_attempts WHERE job_id = %s ORDER BY id",
                (document["job_id"],),
            )
            return document, await cur.fetchall()

    async def latest_event_id(self, document_id: uuid.UUID) -> int:
        """The newest event of a document (callers have checked its tenant with get_document)."""
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute("SELECT coalesce(max(id), 0) FROM document_events WHERE document_id = %s", (document_id,))
            ).fetchone()
            return int(row[0])

    async def document_events_after(self, document_id: uuid.UUID, after_id: int) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                "SELECT id, status::text AS status, error_code, error_message, progress_stage::text AS progress_stage,"
                " progress_done, progress_total, progress_unit, chunk_count, job_status::text AS job_status, attempts,"
                " max_attempts, available_at, updated_at, now() AS db_now"
                " FROM document_events WHERE document_id = %s AND id > %s ORDER BY id",
                (document_id, after_id),
            )
            return await cur.fetchall()

    async def list_documents(
        self,
        tenant_id: int,
        collection: str | None,
        status: str | None,
        after: tuple[dt.datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn:
            conditions, params = ["d.tenant_id = %s"], [tenant_id]
            if collection:
                collection_row = await self._collection_settings(conn, tenant_id, collection)
                conditions.append("d.collection_id = %s")
                params.append(collection_row["id"])
            if status:
                conditions.append("d.status = %s")
                params.append(status)
            if after:
                conditions.append("(d.created_at, d.id) < (%s, %s)")
                params.extend(after)
            where = " WHERE " + " AND ".join(conditions)
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(DOCUMENT_SELECT + where + " ORDER BY d.created_at DESC, d.id DESC LIMIT %s", (*params, limit))
            return await cur.fetchall()

    async def delete_document(self, tenant_id: int, document_id: uuid.UUID) -> bool:
        """Deletes the document with its content, job, attempts and chunks; True if a job was running."""
        async with self.pool.connection() as conn, conn.transaction():
            job = await (
                await conn.execute(
                    "SELECT j.status::text FROM ingestion_jobs j JOIN documents d ON d.id = j.document_id"
                    " WHERE j.document_id = %s AND d.tenant_id = %s FOR UPDATE OF j",
                    (document_id, tenant_id),
                )
            ).fetchone()
            if job is None:
                raise NotFound(f"document {document_id} does not exist", reason="DOCUMENT_NOT_FOUND")
            await conn.execute("DELETE FROM documents WHERE id = %s AND tenant_id = %s", (document_id, tenant_id))
            return job[0] == J.RUNNING

    async def restart_document(self, tenant_id: int, document_id: uuid.UUID, expected: D) -> dict[str, Any]:
        """RetryDocument (FAILED) and ReprocessDocument (READY): back to PENDING with fresh attempts."""
        job_from = J.FAILED if expected == D.FAILED else J.SUCCEEDED
        check_document_transition(expected, D.PENDING)
        async with self.pool.connection() as conn, conn.transaction():
            job = await (
                await conn.execute(
                    "SELECT j.id, j.status::text FROM ingestion_jobs j JOIN documents d ON d.id = j.document_id"
                    " WHERE j.document_id = %s AND d.tenant_id = %s FOR UPDATE OF j",
                    (document_id, tenant_id),
                )
            ).fetchone()
            if job is None:
                raise NotFound(f"document {document_id} does not exist", reason="DOCUMENT_NOT_FOUND")
            updated = await (
                await conn.execute(
                    """
                    UPDATE documents SET status = 'PENDING', error_code = NULL, error_message = NULL,
                        progress_stage = NULL, progress_done = 0, progress_total = 0, progress_unit = '',
                        updated_at = now()
                    WHERE id = %s AND status = %s
                    RETURNING id
                    """,
                    (document_id, str(expected)),
                )
            ).fetchone()
            if updated is None or job[1] != job_from:
                current = await self._document(conn, document_id, tenant_id)
                verb = "retried" if expected == D.FAILED else "reprocessed"
                raise FailedPrecondition(
                    f"only a {expected} document can be {verb}; this one is {current['status']}",
                    reason="DOCUMENT_NOT_" + str(expected),
                    status=current["status"],
                )
            await conn.execute(
                """
                UPDATE ingestion_jobs SET status = 'PENDING', attempts = 0, available_at = now(),
                    locked_at = NULL, locked_by = NULL, lease_token = NULL, updated_at = now()
                WHERE id = %s AND status = %s
                """,
                (job[0], str(job_from)),
            )
            return await self._document(conn, document_id, tenant_id)

    async def _check_quota(
        self, conn: psycopg.AsyncConnection, tenant_id: int, *, documents: int = 0, stored_bytes: int = 0,
        collections: int = 0,
    ) -> None:
        """Refuse (RESOURCE_EXHAUSTED, nothing written) what would take the tenant over a quota.

        Only a tenant with quotas pays for this: its row is locked for the rest of the
        transaction, so two concurrent uploads cannot both take the last place.
        """
        quota = await (
            await conn.execute(
                "SELECT max_documents, max_stored_bytes, max_collections FROM tenants WHERE id = %s", (tenant_id,)
            )
        ).fetchone()
        if quota is None:
            raise NotFound("the tenant of this key no longer exists", reason="TENANT_NOT_FOUND")
        max_documents, max_bytes, max_collections = quota
        if max_documents is None and max_bytes is None and max_collections is None:
            return
        await conn.execute("SELECT 1 FROM tenants WHERE id = %s FOR UPDATE", (tenant_id,))
        if collections and max_collections is not None:
            (count,) = await (
                await conn.execute("SELECT count(*) FROM collections WHERE tenant_id = %s", (tenant_id,))
            ).fetchone()
            if count + collections > max_collections:
                raise ResourceExhausted(
                    f"the tenant's quota of {max_collections} collections is used up", reason="QUOTA_EXCEEDED",
                    quota="collections", limit=max_collections,
                )
        if (documents and max_documents is not None) or (stored_bytes and max_bytes is not None):
            count, total = await (
                await conn.execute(
                    "SELECT count(*), coalesce(sum(size_bytes), 0) FROM documents WHERE tenant_id = %s", (tenant_id,)
                )
            ).fetchone()
            if max_documents is not None and count + documents > max_documents:
                raise ResourceExhausted(
                    f"the tenant's quota of {max_documents} documents is used up", reason="QUOTA_EXCEEDED",
                    quota="documents", limit=max_documents,
                )
            if max_bytes is not None and total + stored_bytes > max_bytes:
                raise ResourceExhausted(
                    f"this upload would take the tenant over its quota of {max_bytes} stored bytes",
                    reason="QUOTA_EXCEEDED", quota="stored_bytes", limit=max_bytes,
                )

    async def _document(
        self, conn: psycopg.AsyncConnection, document_id: uuid.UUID, tenant_id: int | None = None
    ) -> dict[str, Any]:
        """The document by id; with `tenant_id`, only if it is that tenant's (else NOT_FOUND).
        Without it only for JobService paths, whose job ids were fenced by their lease."""
        if tenant_id is None:
            row = await self._document_where(conn, "d.id = %s", (document_id,))
        else:
            row = await self._document_where(conn, "d.id = %s AND d.tenant_id = %s", (document_id, tenant_id))
        if row is None:
            raise NotFound(f"document {document_id} does not exist", reason="DOCUMENT_NOT_FOUND")
        return row

    async def _document_where(self, conn: psycopg.AsyncConnection, where: str, params: Sequence[Any]) -> dict[str, Any] | None:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(DOCUMENT_SELECT + " WHERE " + where, params)
        return await cur.fetchone()

    # ---------------------------------------------------------------- jobs

    async def claim_job(self, worker_id: str) -> dict[str, Any] | None:
        """Rules 6 and 8 in one transaction.

        First converge one exhausted job whose lease expired (rule 8); if there was one, this
        call claims nothing. Otherwise claim one job under the claim condition with
        FOR UPDATE SKIP LOCKED: an expired lease first, then the oldest due PENDING job.
        """
        lease = self.policy.lease_seconds
        async with self.pool.connection() as conn, conn.transaction():
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                """
                SELECT id, document_id, attempts, max_attempts, lease_token FROM ingestion_jobs
                WHERE status = 'RUNNING' AND attempts >= max_attempts
                  AND locked_at <= now() - make_interval(secs => %s)
                ORDER BY locked_at LIMIT 1 FOR UPDATE SKIP LOCKED
                """,
                (lease,),
            )
            exhausted = await cur.fetchone()
            if exhausted is not None:
                outcome = await self._converge_exhausted(conn, exhausted)
                metrics.LEASE_EXPIRIES.labels(outcome=outcome).inc()
                return None

            await cur.execute(
                """
                UPDATE ingestion_jobs j
                SET status = 'RUNNING', attempts = j.attempts + 1, locked_at = now(), locked_by = %(worker)s,
                    lease_token = gen_random_uuid(), updated_at = now()
                FROM (
                    SELECT id, lease_token AS expired_token FROM ingestion_jobs
                    WHERE status = 'RUNNING' AND attempts < max_attempts
                      AND locked_at <= now() - make_interval(secs => %(lease)s)
                    ORDER BY locked_at LIMIT 1 FOR UPDATE SKIP LOCKED
                ) AS candidate
                WHERE j.id = candidate.id
                RETURNING j.id, j.document_id, j.attempts, j.max_attempts, j.lease_token, candidate.expired_token
                """,
                {"worker": worker_id, "lease": lease},
            )
            claimed = await cur.fetchone()
            if claimed is None:
                await cur.execute(
                    """
                    UPDATE ingestion_jobs j
                    SET status = 'RUNNING', attempts = j.attempts + 1, locked_at = now(), locked_by = %(worker)s,
                        lease_token = gen_random_uuid(), updated_at = now()
                    FROM (
                        SELECT id FROM ingestion_jobs
                        WHERE status = 'PENDING' AND attempts < max_attempts AND available_at <= now()
                        ORDER BY available_at LIMIT 1 FOR UPDATE SKIP LOCKED
                    ) AS candidate
                    WHERE j.id = candidate.id
                    RETURNING j.id, j.document_id, j.attempts, j.max_attempts, j.lease_token, NULL::uuid AS expired_token
                    """,
                    {"worker": worker_id},
                )
                claimed = await cur.fetchone()
            if claimed is None:
                return None
            if claimed["expired_token"] is not None:
                metrics.LEASE_EXPIRIES.labels(outcome="reclaimed").inc()
                # Taking over an expired lease: close the lost attempt; the document goes back to
                # PENDING (rule 7's message) until the new worker reports its first stage.
                await self._end_attempt(conn, claimed["expired_token"], AttemptOutcome.LEASE_EXPIRED,
                                        "LEASE_EXPIRED", LEASE_EXPIRED_RETRYING, True)
                await conn.execute(
                    """
                    UPDATE documents SET status = 'PENDING', error_code = 'LEASE_EXPIRED', error_message = %s,
                        progress_stage = NULL, progress_done = 0, progress_total = 0, progress_unit = '', updated_at = now()
                    WHERE id = %s AND status = ANY(%s)
                    """,
                    (
                        retry_message(claimed["attempts"] - 1, claimed["max_attempts"], LEASE_EXPIRED_RETRYING),
                        claimed["document_id"],
                        [*document_sources(D.PENDING), str(D.PENDING)],
                    ),
                )
            await conn.execute(
                "INSERT INTO job_attempts (job_id, number, worker_id, lease_token) VALUES (%s, %s, %s, %s)",
                (claimed["id"], claimed["attempts"], worker_id, claimed["lease_token"]),
            )
            await cur.execute(
                """
                SELECT j.id AS job_id, j.lease_token, j.attempts, j.max_attempts, d.id AS document_id, d.filename,
                       d.mime_type, d.content_sha256, d.size_bytes, d.metadata, c.name AS collection,
                       c.embedder_provider, c.embedder_model, c.dimensions, c.chunk_max_characters,
                       c.chunk_new_after_n_chars, c.chunk_overlap
                FROM ingestion_jobs j JOIN documents d ON d.id = j.document_id JOIN collections c ON c.id = d.collection_id
                WHERE j.id = %s
                """,
                (claimed["id"],),
            )
            return await cur.fetchone()

    async def _converge_exhausted(self, conn: psycopg.AsyncConnection, job: dict[str, Any]) -> str:
        """Rule 8: an expired lease with no attempts left ends the job for good; returns the outcome."""
        doc = await (
            await conn.execute("SELECT status::text FROM documents WHERE id = %s FOR UPDATE", (job["document_id"],))
        ).fetchone()
        if doc[0] == D.READY:
            # The crash hit the window after the commit: the work is done.
            await conn.execute(
                "UPDATE ingestion_jobs SET status = 'SUCCEEDED', locked_at = NULL, lease_token = NULL, updated_at = now()"
                " WHERE id = %s AND status = 'RUNNING'",
                (job["id"],),
            )
            await self._end_attempt(conn, job["lease_token"], AttemptOutcome.SUCCEEDED, None, None, None)
            return "succeeded"
        await conn.execute(
            """
            UPDATE documents SET status = 'FAILED', error_code = 'LEASE_EXPIRED', error_message = %s, updated_at = now()
            WHERE id = %s AND status = ANY(%s)
            """,
            (LEASE_EXPIRED_EXHAUSTED, job["document_id"], document_sources(D.FAILED)),
        )
        await conn.execute(
            "UPDATE ingestion_jobs SET status = 'FAILED', locked_at = NULL, lease_token = NULL, updated_at = now()"
            " WHERE id = %s AND status = 'RUNNING'",
            (job["id"],),
        )
        await self._end_attempt(conn, job["lease_token"], AttemptOutcome.LEASE_EXPIRED, "LEASE_EXPIRED",
                                LEASE_EXPIRED_EXHAUSTED, False)
        return "failed"

    async def next_wakeup(self) -> dt.datetime | None:
        """When the next job becomes claimable without a notification: a delayed retry or a lease expiry."""
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute(
                    """
                    SELECT least(
                        (SELECT min(available_at) FROM ingestion_jobs WHERE status = 'PENDING'),
                        (SELECT min(locked_at) FROM ingestion_jobs WHERE status = 'RUNNING') + make_interval(secs => %s)
                    ) - now()
                    """,
                    (self.policy.lease_seconds,),
                )
            ).fetchone()
            return row[0]

    async def _locked_lease(self, conn: psycopg.AsyncConnection, job_id: uuid.UUID, lease_token: uuid.UUID) -> dict[str, Any]:
        """Fencing: lock the job only if this lease still holds it (and renew the lease)."""
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(
            """
            UPDATE ingestion_jobs SET locked_at = now()
            WHERE id = %s AND lease_token = %s AND status = 'RUNNING'
            RETURNING id, document_id, attempts, max_attempts, lease_token, locked_at
            """,
            (job_id, lease_token),
        )
        job = await cur.fetchone()
        if job is None:
            exists = await (await conn.execute("SELECT 1 FROM ingestion_jobs WHERE id = %s", (job_id,))).fetchone()
            if exists is None:
                raise NotFound(f"job {job_id} does not exist (its document may have been deleted)", reason="JOB_NOT_FOUND")
            raise LeaseNotHeld("this worker no longer holds the job's lease; it was taken over or ended", job_id=job_id)
        doc = await (
            await conn.execute(
                "SELECT status::text, collection_id, tenant_id FROM documents WHERE id = %s FOR UPDATE",
                (job["document_id"],),
            )
        ).fetchone()
        job["document_status"] = D(doc[0])
        job["collection_id"] = doc[1]
        job["tenant_id"] = doc[2]
        return job

    async def renew_lease(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> dt.datetime | None:
        """Heartbeat. None means the job no longer exists: it was cancelled by a deletion."""
        async with self.pool.connection() as conn, conn.transaction():
            # A heartbeat lost in a database crash only shortens the lease; skip the WAL flush.
            await conn.execute("SET LOCAL synchronous_commit = off")
            row = await (
                await conn.execute(
                    "UPDATE ingestion_jobs SET locked_at = now() WHERE id = %s AND lease_token = %s AND status = 'RUNNING'"
                    " RETURNING locked_at + make_interval(secs => %s)",
                    (job_id, lease_token, self.policy.lease_seconds),
                )
            ).fetchone()
            if row is not None:
                return row[0]
            exists = await (await conn.execute("SELECT 1 FROM ingestion_jobs WHERE id = %s", (job_id,))).fetchone()
            if exists is None:
                return None
            raise LeaseNotHeld("this worker no longer holds the job's lease; it was taken over or ended", job_id=job_id)

    async def report_stage(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, stage: D, done: int, total: int, unit: str
    ) -> dt.datetime:
        """Rule 2 (status before action) and rule 4 (a new stage clears a stale error)."""
        async with self.pool.connection() as conn, conn.transaction():
            job = await self._locked_lease(conn, job_id, lease_token)
            current = job["document_status"]
            if current == stage:
                # A progress tick within a stage: losing the last ticks in a database crash is
                # harmless, so it skips the WAL flush (the stage change itself stays durable).
                await conn.execute("SET LOCAL synchronous_commit = off")
                await conn.execute(
                    "UPDATE documents SET progress_stage = %s, progress_done = %s, progress_total = %s, progress_unit = %s,"
                    " updated_at = now() WHERE id = %s",
                    (str(stage), done, total, unit, job["document_id"]),
                )
            else:
                check_document_transition(current, stage)
                await conn.execute(
                    """
                    UPDATE documents SET status = %s, error_code = NULL, error_message = NULL, progress_stage = %s,
                        progress_done = %s, progress_total = %s, progress_unit = %s, updated_at = now()
                    WHERE id = %s AND status = ANY(%s)
                    """,
                    (str(stage), str(stage), done, total, unit, job["document_id"], document_sources(stage)),
                )
                await conn.execute("UPDATE job_attempts SET stage = %s WHERE lease_token = %s", (str(stage), lease_token))
            return job["locked_at"] + dt.timedelta(seconds=self.policy.lease_seconds)

    async def content_length(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> tuple[uuid.UUID, int]:
        async with self.pool.connection() as conn, conn.transaction():
            job = await self._locked_lease(conn, job_id, lease_token)
            row = await (
                await conn.execute(
                    "SELECT length(content) FROM document_contents WHERE document_id = %s", (job["document_id"],)
                )
            ).fetchone()
            if row is None:
                raise NotFound("the document's content is missing", reason="CONTENT_NOT_FOUND")
            return job["document_id"], int(row[0])

    async def content_slice(self, document_id: uuid.UUID, offset: int, size: int) -> bytes:
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT substring(content FROM %s FOR %s) FROM document_contents WHERE document_id = %s",
                    (offset + 1, size, document_id),
                )
            ).fetchone()
            if row is None:
                raise NotFound("the document was deleted while its content was being read", reason="JOB_NOT_FOUND")
            return bytes(row[0])

    async def save_snapshot(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, pipeline_version: str, chunks: list[dict[str, Any]]
    ) -> None:
        async with self.pool.connection() as conn, conn.transaction():
            job = await self._locked_lease(conn, job_id, lease_token)
            await conn.execute(
                """
                INSERT INTO chunk_snapshots (tenant_id, content_sha256, pipeline_version, chunk_count, chunks)
                SELECT tenant_id, content_sha256, %s, %s, %s FROM documents WHERE id = %s
                ON CONFLICT (tenant_id, content_sha256, pipeline_version)
                DO UPDATE SET chunks = EXCLUDED.chunks, chunk_count = EXCLUDED.chunk_count, created_at = now()
                """,
                (pipeline_version, len(chunks), json.dumps(chunks), job["document_id"]),
            )

    async def read_snapshot(self, job_id: uuid.UUID, lease_token: uuid.UUID, pipeline_version: str) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn, conn.transaction():
            job = await self._locked_lease(conn, job_id, lease_token)
            row = await (
                await conn.execute(
                    "SELECT s.chunks FROM chunk_snapshots s"
                    " JOIN documents d ON d.tenant_id = s.tenant_id AND d.content_sha256 = s.content_sha256"
                    " WHERE d.id = %s AND s.pipeline_version = %s",
                    (job["document_id"], pipeline_version),
                )
            ).fetchone()
            if row is None:
                raise NotFound("no snapshot for this content and pipeline version", reason="SNAPSHOT_NOT_FOUND")
            return row[0]

    async def collection_dimensions(self, job_id: uuid.UUID) -> int:
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT c.dimensions FROM ingestion_jobs j JOIN documents d ON d.id = j.document_id"
                    " JOIN collections c ON c.id = d.collection_id WHERE j.id = %s",
                    (job_id,),
                )
            ).fetchone()
            if row is None:
                raise NotFound(f"job {job_id} does not exist (its document may have been deleted)", reason="JOB_NOT_FOUND")
            return int(row[0])

    async def complete_job(self, job_id: uuid.UUID, lease_token: uuid.UUID, chunks: list[ChunkRow]) -> dict[str, Any]:
        """Rule 1: replace the chunks, set READY and SUCCEEDED in one transaction (binary COPY)."""
        async with self.pool.connection() as conn, conn.transaction():
            job = await self._locked_lease(conn, job_id, lease_token)
            if job["document_status"] != D.INDEXING:
                raise FailedPrecondition(
                    f"the document is {job['document_status']}; report INDEXING before completing",
                    reason="STAGE_NOT_INDEXING",
                )
            await conn.execute("DELETE FROM chunks WHERE document_id = %s", (job["document_id"],))
            async with conn.cursor().copy(
                "COPY chunks (document_id, tenant_id, collection_id, chunk_index, text, page_number, element_type,"
                " section_title, text_as_html, embedding, search_terms, text_source, ocr_confidence) FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["uuid", "int8", "int8", "int4", "text", "int4", "text", "text", "text", "vector", "text", "text", "float4"])
                for chunk in chunks:
                    await copy.write_row(
                        (
                            job["document_id"],
                            job["tenant_id"],
                            job["collection_id"],
                            chunk.index,
                            chunk.text,
                            chunk.page_number,
                            chunk.element_type,
                            chunk.section_title,
                            chunk.text_as_html,
                            chunk.embedding,
                            chunk.search_terms,
                            chunk.text_source,
                            chunk.ocr_confidence,
                        )
                    )
            check_document_transition(D.INDEXING, D.READY)
            await conn.execute(
                """
                UPDATE documents SET status = 'READY', error_code = NULL, error_message = NULL, chunk_count = %s,
                    progress_stage = 'INDEXING', progress_done = %s, progress_total = %s, progress_unit = 'chunks',
                    updated_at = now()
                WHERE id = %s AND status = 'INDEXING'
                """,
                (len(chunks), len(chunks), len(chunks), job["document_id"]),
            )
            await conn.execute(
                "UPDATE ingestion_jobs SET status = 'SUCCEEDED', locked_at = NULL, lease_token = NULL, updated_at = now()"
                " WHERE id = %s AND status = ANY(%s)",
                (job_id, job_sources(J.SUCCEEDED)),
            )
            await self._end_attempt(conn, lease_token, AttemptOutcome.SUCCEEDED, None, None, None)
            return await self._document(conn, job["document_id"])

    async def fail_job(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, retryable: bool, error_code: str, error_message: str
    ) -> tuple[dict[str, Any], bool]:
        """Rule 7: retry a temporary failure after a delay while attempts remain; else fail for good."""
        async with self.pool.connection() as conn, conn.transaction():
            job = await self._locked_lease(conn, job_id, lease_token)
            attempts, max_attempts = job["attempts"], job["max_attempts"]
            retry = should_retry(retryable, attempts, max_attempts)
            if retry:
                delay = retry_delay_seconds(attempts, self.policy.retry_delay_seconds, self.policy.max_retry_delay_seconds)
                await conn.execute(
                    """
                    UPDATE documents SET status = 'PENDING', error_code = %s, error_message = %s, updated_at = now()
                    WHERE id = %s AND status = ANY(%s)
                    """,
                    (error_code, retry_message(attempts, max_attempts, error_message), job["document_id"],
                     [*document_sources(D.PENDING), str(D.PENDING)]),
                )
                await conn.execute(
                    """
                    UPDATE ingestion_jobs SET status = 'PENDING', available_at = now() + make_interval(secs => %s),
                        locked_at = NULL, locked_by = NULL, lease_token = NULL, updated_at = now()
                    WHERE id = %s AND status = 'RUNNING'
                    """,
                    (delay, job_id),
                )
            else:
                if retryable:
                    error_message = f"failed after {attempts} attempts: {error_message}"
                await conn.execute(
                    """
                    UPDATE documents SET status = 'FAILED', error_code = %s, error_message = %s, updated_at = now()
                    WHERE id = %s AND status = ANY(%s)
                    """,
                    (error_code, error_message, job["document_id"], document_sources(D.FAILED)),
                )
                await conn.execute(
                    "UPDATE ingestion_jobs SET status = 'FAILED', locked_at = NULL, locked_by = NULL, lease_token = NULL,"
                    " updated_at = now() WHERE id = %s AND status = 'RUNNING'",
                    (job_id,),
                )
            outcome = AttemptOutcome.RETRYABLE_FAILURE if retryable else AttemptOutcome.PERMANENT_FAILURE
            await self._end_attempt(conn, lease_token, outcome, error_code, error_message, retryable)
            return await self._document(conn, job["document_id"]), retry

    async def release_job(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> dict[str, Any]:
        """A hand-back at shutdown: the job is due again at once and the attempt is not charged."""
        async with self.pool.connection() as conn, conn.transaction():
            job = await self._locked_lease(conn, job_id, lease_token)
            await conn.execute(
                """
                UPDATE documents SET status = 'PENDING', progress_stage = NULL, progress_done = 0, progress_total = 0,
                    progress_unit = '', updated_at = now()
                WHERE id = %s AND status = ANY(%s)
                """,
                (job["document_id"], [*document_sources(D.PENDING), str(D.PENDING)]),
            )
            await conn.execute(
                """
                UPDATE ingestion_jobs SET status = 'PENDING', attempts = attempts - 1, available_at = now(),
                    locked_at = NULL, locked_by = NULL, lease_token = NULL, updated_at = now()
                WHERE id = %s AND status = 'RUNNING'
                """,
                (job_id,),
            )
            await self._end_attempt(conn, lease_token, AttemptOutcome.RELEASED, None, None, None)
            return await self._document(conn, job["document_id"])

    async def _end_attempt(
        self,
        conn: psycopg.AsyncConnection,
        lease_token: uuid.UUID,
        outcome: AttemptOutcome,
        error_code: str | None,
        error_message: str | None,
        retryable: bool | None,
    ) -> None:
        await conn.execute(
            "UPDATE job_attempts SET outcome = %s, error_code = %s, error_message = %s, retryable = %s,"
            " ended_at = now() WHERE lease_token = %s AND outcome = 'RUNNING'",
            (str(outcome), error_code, error_message, retryable, lease_token),
        )

    async def queue_depth(self) -> dict[str, int]:
        async with self.pool.connection() as conn:
            rows = await (await conn.execute("SELECT status::text, count(*) FROM ingestion_jobs GROUP BY status")).fetchall()
            return {status: int(count) for status, count in rows}


__all__ = ["ChunkRow", "JobPolicy", "NewCollection", "NewDocument", "PostgresStore"]
