"""Documents: the upload's commit (rule 5), look-ups, events, lists, deletion and restarts."""

from __future__ import annotations

import datetime as dt
import json
import struct
import uuid
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import psycopg
from sluice_common import tracing
from sluice_common.db import one_snapshot
from sluice_common.errors import (
    AlreadyExists,
    FailedPrecondition,
    NotFound,
)
from sluice_common.reasons import Reason

from ..domain import (
    DocumentStatus,
    IllegalTransition,
    JobKind,
    JobStatus,
    VersionOutcome,
    VersionRole,
    check_document_transition,
)
from ..transitions import NOW, RELEASED_LEASE, move_document, move_job
from .common import (
    COPY_SIGNATURE,
    COPY_TRAILER,
    DOCUMENT_SELECT,
    FRESH_PROGRESS,
    NO_ERROR,
    StoreBase,
    check_quota,
    lookup_collection_settings,
    lookup_document,
    lookup_document_where,
    named_rows,
    one_row,
)
from .literals import compose
from .rows import AttemptRow, DocumentRow, EventRow, Fence, NewDocument, UploadedContent, as_members
from .versions import (
    VersionsView,
    add_version,
    delete_versions,
    end_versions,
    lock_live_versions,
    lock_source,
    record_version,
    versions_view,
)

WAL_POSITION_SQL = "SELECT pg_current_wal_insert_lsn()::text"

# Which document an upload finds already there (lookup_document_where's conditions).
BY_REQUEST_ID = "d.tenant_id = %s AND d.request_id = %s"
BY_CONTENT = "d.collection_id = %s AND d.content_sha256 = %s AND d.source_uri IS NULL"
# A source's current version, else its next one.
BY_SOURCE = (
    "d.collection_id = %s AND d.source_uri = %s AND d.tenant_id = %s ORDER BY d.version_role = {role_current} DESC LIMIT 1"
)

INSERT_DOCUMENT_SQL = """
    INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256, size_bytes,
        metadata, request_id, source_uri, version, version_role)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
    ON CONFLICT DO NOTHING
    RETURNING id
"""
# Its INGEST job (the column's default kind), in the upload's transaction (rule 5).
INSERT_JOB_SQL = "INSERT INTO ingestion_jobs (document_id, max_attempts, trace_context, priority) VALUES (%s, %s, %s, %s)"
COPY_CONTENT_SQL = "COPY document_contents (document_id, content) FROM STDIN (FORMAT BINARY)"

ATTEMPTS_SQL = (
    "SELECT number, worker_id, stage::text AS stage, outcome::text AS outcome, error_code, error_message,"
    " retryable, started_at, ended_at FROM job_attempts WHERE job_id = %s ORDER BY id"
)
LATEST_EVENT_SQL = "SELECT coalesce(max(id), 0) FROM document_events WHERE document_id = %s"
EVENTS_AFTER_SQL = (
    "SELECT id, status::text AS status, error_code, error_message, progress_stage::text AS progress_stage,"
    " progress_done, progress_total, progress_unit, chunk_count, job_status::text AS job_status, attempts,"
    " max_attempts, available_at, updated_at, now() AS db_now, pg_current_wal_insert_lsn()::text AS wal_lsn"
    " FROM document_events WHERE document_id = %s AND id > %s AND NOT deleted ORDER BY id"
)

# ListDocuments' conditions, each with its parameter, in this order; the tenant's always.
LIST_CONDITIONS = {
    "tenant": "d.tenant_id = %s",
    "collection": "d.collection_id = %s",
    "status": "d.status = %s",
    "source_uri": "d.source_uri = %s",
    "after": "(d.created_at, d.id) < (%s, %s)",
    # A scoped key's collections only (docs/tenancy.md, "Scoped keys").
    "scope": "c.name = ANY(%s::text[])",
}
# The name of a document's collection, for a scoped key's check after a look-up by id.
DOCUMENT_COLLECTION_SQL = (
    "SELECT c.name FROM documents d JOIN collections c ON c.id = d.collection_id WHERE d.id = %s AND d.tenant_id = %s"
)
LIST_PAGE = " ORDER BY d.created_at DESC, d.id DESC LIMIT %s"


@cache
def list_documents_sql(conditions: tuple[str, ...]) -> bytes:
    """ListDocuments' page (newest first) under the tenant's and the named LIST_CONDITIONS,
    composed once per set of conditions."""
    where = " AND ".join(LIST_CONDITIONS[name] for name in ("tenant", *conditions))
    return compose(DOCUMENT_SELECT + " WHERE " + where + LIST_PAGE)


# A document's jobs (its INGEST job, EMBED jobs of a reindex), locked first: the lock order.
LOCK_JOBS_SQL = (
    "SELECT j.id, j.status::text AS status, j.kind::text AS kind FROM ingestion_jobs j JOIN documents d ON d.id = j.document_id"
    " WHERE j.document_id = %s AND d.tenant_id = %s FOR UPDATE OF j"
)
DELETE_DOCUMENT_SQL = "DELETE FROM documents WHERE id = %s AND tenant_id = %s"
INGEST_RUNNING_SQL = compose(
    "SELECT EXISTS (SELECT 1 FROM ingestion_jobs WHERE document_id = ANY(%s) AND kind = {kind_ingest} AND status = {job_running})"
)
# What a document leaving READY drops (ReprocessDocument; _restart_document says why).
DROP_EMBED_JOBS_SQL = compose("DELETE FROM ingestion_jobs WHERE kind = {kind_embed} AND document_id = %s")
DROP_CHUNKS_SQL = "DELETE FROM chunks WHERE document_id = %s AND tenant_id = %s"
DROP_DISABLED_CHUNKS_SQL = "DELETE FROM disabled_chunks WHERE document_id = %s AND tenant_id = %s"


@dataclass(frozen=True, slots=True)
class _Job:
    id: uuid.UUID
    status: JobStatus
    kind: JobKind

    def __post_init__(self) -> None:
        as_members(self, status=JobStatus, kind=JobKind)


def _ingest_job(jobs: list[_Job]) -> _Job | None:
    return next((j for j in jobs if j.kind is JobKind.INGEST), None)


class DocumentStore(StoreBase):
    async def create_document(self, new: NewDocument) -> tuple[DocumentRow, bool]:
        """Rule 5: the document, its content and its job are created in one transaction.

        Returns (document, created). An existing document is returned for a repeated
        request_id or for the same content in the same collection (with a source_uri: the same
        content as the source's current or next version; docs/architecture.md#document-versions).
        """
        document, created = await self._create_document(new)
        return await self._after_commit(document), created

    async def _after_commit(self, document: DocumentRow) -> DocumentRow:
        """The row of a write with a WAL position read once its transaction committed: one read
        inside the transaction would come before the write's own commit record, too early for a
        consistency token (sluice_common.consistency)."""
        async with self.pool.connection() as conn:
            row = await one_row(conn, WAL_POSITION_SQL)
        return replace(document, wal_lsn=row[0])

    async def _create_document(self, new: NewDocument) -> tuple[DocumentRow, bool]:
        async with self.pool.connection() as conn, conn.transaction():
            if new.fence is not None:
                await new.fence(conn)
            collection = await lookup_collection_settings(conn, new.tenant_id, new.collection)
            if new.request_id:
                existing = await lookup_document_where(conn, BY_REQUEST_ID, (new.tenant_id, new.request_id))
                if existing is not None:
                    if (
                        existing.collection_id != collection.id
                        or existing.content_sha256 != new.content_sha256
                        or existing.source_uri != new.source_uri
                    ):
                        raise AlreadyExists(
                            "request_id was already used for a different upload",
                            reason=Reason.REQUEST_ID_REUSED,
                            request_id=new.request_id,
                        )
                    return existing, False
            version: int | None = None
            role: VersionRole | None = None
            if new.source_uri is not None:
                await lock_source(conn, collection.id, new.source_uri)
                live = await lock_live_versions(conn, collection.id, new.source_uri)
                current = next((d for d in live if d.version_role is VersionRole.CURRENT), None)
                upcoming = next((d for d in live if d.version_role is VersionRole.NEXT), None)
                if upcoming is not None and upcoming.content_sha256 == new.content_sha256:
                    return upcoming, False  # the same content again is not a new version
                if upcoming is not None:
                    # Newer content (or the current content again) supersedes the pending version:
                    # its job goes with it, and its worker learns at its next lease renewal.
                    await delete_versions(conn, [upcoming], VersionOutcome.SUPERSEDED)
                if current is not None and current.content_sha256 == new.content_sha256:
                    return current, False
                version = await add_version(conn, new.tenant_id, collection.id, new.source_uri)
                role = VersionRole.NEXT if current is not None else VersionRole.CURRENT
            await check_quota(conn, new.tenant_id, documents=1, stored_bytes=new.content.size)
            row = await (
                await conn.execute(
                    INSERT_DOCUMENT_SQL,
                    (
                        new.tenant_id,
                        collection.id,
                        new.filename,
                        new.mime_type,
                        new.content_sha256,
                        new.content.size,
                        json.dumps(new.metadata),
                        new.request_id,
                        new.source_uri,
                        version,
                        None if role is None else str(role),
                    ),
                )
            ).fetchone()
            if row is None:
                # Same content already in this collection (or a concurrent twin with our request_id).
                existing = (
                    None
                    if new.source_uri is not None
                    else await lookup_document_where(conn, BY_CONTENT, (collection.id, new.content_sha256))
                )
                if existing is None and new.request_id:
                    existing = await lookup_document_where(conn, BY_REQUEST_ID, (new.tenant_id, new.request_id))
                if existing is None:  # pragma: no cover - the conflicting row was deleted meanwhile
                    raise FailedPrecondition("the upload raced with a deletion; try again", reason=Reason.UPLOAD_RACE)
                return existing, False
            document_id = row[0]
            await self._copy_content(conn, document_id, new.content)
            await conn.execute(
                INSERT_JOB_SQL,
                (document_id, collection.max_attempts, tracing.current_trace_context(), int(new.priority)),
            )
            if new.source_uri is not None:
                await record_version(conn, document_id)
            return await lookup_document(conn, document_id), True

    @staticmethod
    async def _copy_content(conn: psycopg.AsyncConnection, document_id: uuid.UUID, content: UploadedContent) -> None:
        """One document_contents row, its bytea streamed piece by piece: the file is never whole in memory here.

        Binary COPY written by hand: the signature, one tuple (uuid, bytea of content.size bytes,
        whose length goes first), the trailer. Readers are unchanged (content_slice).
        """
        async with conn.cursor().copy(COPY_CONTENT_SQL) as copy:
            await copy.write(COPY_SIGNATURE + struct.pack("!hi", 2, 16) + document_id.bytes + struct.pack("!i", content.size))
            async for piece in content.pieces():
                await copy.write(piece)
            await copy.write(COPY_TRAILER)

    async def get_document(self, tenant_id: int, document_id: uuid.UUID) -> DocumentRow:
        async with self.pool.connection() as conn:
            return await lookup_document(conn, document_id, tenant_id)

    async def document_collection(self, tenant_id: int, document_id: uuid.UUID) -> str | None:
        """The name of the document's collection; None when the tenant has no such document."""
        async with self.pool.connection() as conn:
            row = await (await conn.execute(DOCUMENT_COLLECTION_SQL, (document_id, tenant_id))).fetchone()
            return None if row is None else str(row[0])

    async def get_document_with_history(
        self,
        tenant_id: int,
        document_id: uuid.UUID | None,
        source: tuple[str, str] | None = None,
    ) -> tuple[DocumentRow, list[AttemptRow], VersionsView | None]:
        """A document with its attempts and (with a source_uri) its versions, by id or by
        (collection, source_uri): then the source's current version, else its next one; in one
        snapshot (a version swap commits between none of its reads)."""
        async with self.pool.connection() as conn, one_snapshot(conn):
            if source is not None:
                document = await self._lookup_source(conn, tenant_id, *source)
            else:
                assert document_id is not None
                document = await lookup_document(conn, document_id, tenant_id)
            attempts = await named_rows(conn, AttemptRow, ATTEMPTS_SQL, (document.job_id,))
            versions = None
            if document.source_uri is not None:
                versions = await versions_view(conn, document.collection_id, document.source_uri)
            return document, attempts, versions

    @staticmethod
    async def _lookup_source(conn: psycopg.AsyncConnection, tenant_id: int, collection: str, source_uri: str) -> DocumentRow:
        settings = await lookup_collection_settings(conn, tenant_id, collection)
        document = await lookup_document_where(conn, BY_SOURCE, (settings.id, source_uri, tenant_id))
        if document is None:
            raise NotFound(
                f"collection {collection!r} holds no document with source_uri {source_uri[:200]!r}",
                reason=Reason.DOCUMENT_NOT_FOUND,
            )
        return document

    async def latest_event_id(self, document_id: uuid.UUID) -> int:
        """The newest event of a document (callers have checked its tenant with get_document)."""
        async with self.pool.connection() as conn:
            row = await one_row(conn, LATEST_EVENT_SQL, (document_id,))
            return int(row[0])

    async def document_events_after(self, document_id: uuid.UUID, after_id: int) -> list[EventRow]:
        async with self.pool.connection() as conn:
            return await named_rows(conn, EventRow, EVENTS_AFTER_SQL, (document_id, after_id))

    async def list_documents(
        self,
        tenant_id: int,
        collection: str | None,
        status: str | None,
        after: tuple[dt.datetime, uuid.UUID] | None,
        limit: int,
        source_uri: str | None = None,
        scope: list[str] | None = None,
    ) -> list[DocumentRow]:
        """A page of the tenant's documents, newest first, only those of the collections in
        `scope` when it is given. With a collection, its look-up (NOT_FOUND)
        and the page see one snapshot: never the collection of one commit and the documents of the
        next (a deletion between them, or its name given to another)."""
        async with self.pool.connection() as conn, one_snapshot(conn):
            conditions: list[str] = []
            params: list[Any] = [tenant_id]
            if collection:
                collection_row = await lookup_collection_settings(conn, tenant_id, collection)
                conditions.append("collection")
                params.append(collection_row.id)
            if status:
                conditions.append("status")
                params.append(status)
            if source_uri:
                conditions.append("source_uri")
                params.append(source_uri)
            if scope is not None:
                conditions.append("scope")
                params.append(scope)
            if after:
                conditions.append("after")
                params.extend(after)
            return await named_rows(conn, DocumentRow, list_documents_sql(tuple(conditions)), (*params, limit))

    async def delete_document(self, tenant_id: int, document_id: uuid.UUID) -> bool:
        """Deletes the document with its content, job, attempts and chunks; True if a job was running."""
        async with self.pool.connection() as conn, conn.transaction():
            # Every job of the document (its INGEST job, EMBED jobs of a reindex) is locked first.
            job = _ingest_job(await named_rows(conn, _Job, LOCK_JOBS_SQL, (document_id, tenant_id)))
            if job is None:
                raise NotFound(f"document {document_id} does not exist", reason=Reason.DOCUMENT_NOT_FOUND)
            await end_versions(conn, [document_id], VersionOutcome.DELETED)
            await conn.execute(DELETE_DOCUMENT_SQL, (document_id, tenant_id))
            return job.status is JobStatus.RUNNING

    async def delete_source(
        self,
        tenant_id: int,
        collection: str,
        source_uri: str,
        fence: Fence | None = None,
    ) -> tuple[bool, int]:
        """Every live version of a source (jobs locked first, the NEXT version's before the
        CURRENT one's, as its READY commit takes them); (a job was running, versions deleted)."""
        async with self.pool.connection() as conn, conn.transaction():
            if fence is not None:
                await fence(conn)
            settings = await lookup_collection_settings(conn, tenant_id, collection)
            live = await lock_live_versions(conn, settings.id, source_uri, tenant_id)
            if not live:
                raise NotFound(
                    f"collection {collection!r} holds no document with source_uri {source_uri[:200]!r}",
                    reason=Reason.DOCUMENT_NOT_FOUND,
                )
            running = await (await conn.execute(INGEST_RUNNING_SQL, ([d.id for d in live],))).fetchone()
            await delete_versions(conn, live, VersionOutcome.DELETED)
            return bool(running and running[0]), len(live)

    async def restart_document(self, tenant_id: int, document_id: uuid.UUID, expected: DocumentStatus) -> DocumentRow:
        """RetryDocument (FAILED) and ReprocessDocument (READY): back to PENDING with fresh attempts and
        no chunks (rule 1)."""
        return await self._after_commit(await self._restart_document(tenant_id, document_id, expected))

    async def _restart_document(self, tenant_id: int, document_id: uuid.UUID, expected: DocumentStatus) -> DocumentRow:
        job_from = JobStatus.FAILED if expected == DocumentStatus.FAILED else JobStatus.SUCCEEDED
        check_document_transition(expected, DocumentStatus.PENDING)
        async with self.pool.connection() as conn, conn.transaction():
            job = _ingest_job(await named_rows(conn, _Job, LOCK_JOBS_SQL, (document_id, tenant_id)))
            if job is None:
                raise NotFound(f"document {document_id} does not exist", reason=Reason.DOCUMENT_NOT_FOUND)
            try:
                if job.status is not job_from:
                    raise IllegalTransition(f"the job is {job.status}")
                await move_document(conn, document_id, DocumentStatus.PENDING, {**FRESH_PROGRESS, **NO_ERROR}, sources=[expected])
            except IllegalTransition as illegal:
                current = await lookup_document(conn, document_id, tenant_id)
                verb = "retried" if expected == DocumentStatus.FAILED else "reprocessed"
                raise FailedPrecondition(
                    f"only a {expected} document can be {verb}; this one is {current.status}",
                    reason=Reason(f"DOCUMENT_NOT_{expected}"),
                    status=current.status,
                ) from illegal
            await move_job(
                conn, job.id, JobStatus.PENDING, {"attempts": 0, "available_at": NOW, **RELEASED_LEASE}, sources=[job_from]
            )
            # It leaves READY: its EMBED jobs of a reindex go (its next commit adds a fresh one), and
            # so do its chunks of every generation, so no document that is not READY holds chunks
            # (docs/architecture.md#the-rules, rule 1). The keyword statistics and document_vectors
            # follow by their triggers. For a retry (FAILED) it deletes nothing: migration 0027 took
            # what reprocesses that failed before this delete left. Its disabled chunks go too: a
            # reprocess starts from the file again (docs/chunks.md).
            await conn.execute(DROP_EMBED_JOBS_SQL, (document_id,))
            await conn.execute(DROP_CHUNKS_SQL, (document_id, tenant_id))
            await conn.execute(DROP_DISABLED_CHUNKS_SQL, (document_id, tenant_id))
            return await lookup_document(conn, document_id, tenant_id)
