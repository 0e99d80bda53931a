"""Use cases of documents (DocumentService's document calls): the upload (spooled and confirmed,
uploads.py), look-ups, lists, deletion, retry and reprocess."""

from __future__ import annotations

import datetime as dt
import logging
import mimetypes
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from sluice_common import metadata as typed_metadata
from sluice_common.auth.scope import document_not_found
from sluice_common.errors import InvalidArgument
from sluice_common.media_types import media_type_of
from sluice_common.reasons import Reason

from .. import metrics, uploads
from ..arguments import decode_token, encode_token, page_size_of, parse_id
from ..domain import DocumentStatus, JobPriority, safe_filename, source_uri_of
from ..ports import CollectionsPort, DocumentsPort
from ..settings import IngestSettings
from ..store import AttemptRow, DocumentRow, NewDocument, VersionsView
from ..store.rows import Fence

log = logging.getLogger("sluice.ingest")

MIME_TYPE = re.compile(r"^[\w.+-]+/[\w.+-]+$")


@dataclass
class UploadMeta:
    collection: str
    filename: str
    mime_type: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    request_id: str = ""
    expected_size_bytes: int = 0
    expected_sha256: str = ""
    # Typed entries, already converted to their stored JSON (sluice_common.metadata.from_proto).
    typed_metadata: dict[str, Any] = field(default_factory=dict)
    source_uri: str = ""
    # A source run's lease check, run inside the upload's transaction (docs/sources.md).
    fence: Fence | None = None
    priority: JobPriority = JobPriority.INTERACTIVE  # docs/tenancy.md, "Priorities"


def detect_mime_type(filename: str, given: str, head: bytes) -> str:
    if given:
        if len(given) > 255 or not MIME_TYPE.match(given):
            raise InvalidArgument(
                f"mime_type {given[:80]!r} is not a media type like 'text/plain'", reason=Reason.INVALID_MIME_TYPE
            )
        return given.lower()
    from_table = media_type_of(filename)  # the one table the SDKs carry copies of
    if from_table:
        return from_table
    guessed, _ = mimetypes.guess_type(filename)
    if guessed:
        return guessed
    if head.startswith(b"%PDF"):
        return "application/pdf"
    return "application/octet-stream"


class DocumentUseCases:
    def __init__(self, documents: DocumentsPort, collections: CollectionsPort, settings: IngestSettings) -> None:
        self.documents = documents
        self.collections = collections
        self.settings = settings
        self.uploads = uploads.UploadGate(settings.max_concurrent_uploads, settings.upload_idle_timeout_seconds)

    async def upload_document(
        self, tenant_id: int, meta: UploadMeta, data: AsyncIterator[bytes | uploads.Trailer]
    ) -> tuple[DocumentRow, bool]:
        """Spool and check the stream (uploads.receive); only a confirmed, matching upload is stored."""
        if not meta.collection:
            raise InvalidArgument("the first message must carry metadata with a collection", reason=Reason.MISSING_COLLECTION)
        uploads.check_no_nul(meta.collection, meta.filename, meta.mime_type, meta.request_id, meta.metadata)
        filename = safe_filename(meta.filename)
        if not filename:
            raise InvalidArgument("filename is required and must contain a visible name", reason=Reason.INVALID_FILENAME)
        try:
            document_metadata = typed_metadata.merge_upload(meta.metadata, meta.typed_metadata)
        except typed_metadata.MetadataError as err:
            raise InvalidArgument(str(err), reason=Reason.INVALID_METADATA) from None
        if len(meta.request_id) > 128:
            raise InvalidArgument("request_id is longer than 128 characters", reason=Reason.INVALID_REQUEST_ID)
        source_uri = source_uri_of(meta.source_uri)
        await self.collections.collection_settings(tenant_id, meta.collection)  # fail fast, before the bytes arrive

        s = self.settings
        content = await uploads.receive(
            data,
            uploads.Expected(meta.expected_size_bytes, meta.expected_sha256),
            max_bytes=s.max_upload_bytes,
            spool_memory_bytes=s.upload_spool_memory_bytes,
            spool_dir=s.upload_spool_dir or None,
        )
        try:
            mime_type = detect_mime_type(filename, meta.mime_type, content.head[:8])
            document, created = await self.documents.create_document(
                NewDocument(
                    tenant_id,
                    meta.collection,
                    filename,
                    mime_type,
                    document_metadata,
                    meta.request_id or None,
                    content,
                    content.sha256,
                    source_uri,
                    meta.fence,
                    meta.priority,
                )
            )
        finally:
            content.close()
        if created:
            metrics.UPLOADS.inc()
            log.info(
                "document uploaded", extra={"document_id": str(document.id), "bytes": content.size, "version": document.version}
            )
        return document, created

    async def get_document(
        self,
        tenant_id: int,
        document_id: str,
        collection: str = "",
        source_uri: str = "",
    ) -> tuple[DocumentRow, list[AttemptRow], VersionsView | None]:
        """By id, or by collection and source_uri (the source's current version, else its next)."""
        source = source_of(document_id, collection, source_uri)
        if source is not None:
            return await self.documents.get_document_with_history(tenant_id, None, source)
        return await self.documents.get_document_with_history(tenant_id, parse_id(document_id))

    async def list_documents(
        self,
        tenant_id: int,
        collection: str,
        status: DocumentStatus | None,
        page_size: int,
        page_token: str,
        source_uri: str = "",
        scope: list[str] | None = None,
    ) -> tuple[list[DocumentRow], str]:
        """A page of documents, newest first; only of the collections in `scope` when given."""
        limit = page_size_of(page_size)
        source = source_uri_of(source_uri)
        filters = f"{collection}|{status or ''}" + (f"|{source}" if source else "")
        token = decode_token(page_token, filters)
        after = None
        if token:
            try:
                after = (dt.datetime.fromisoformat(token["t"]), uuid.UUID(token["i"]))
            except (KeyError, ValueError, TypeError):
                raise InvalidArgument("page_token is not valid", reason=Reason.INVALID_PAGE_TOKEN) from None
        rows = await self.documents.list_documents(
            tenant_id, collection or None, str(status) if status else None, after, limit + 1, source, scope
        )
        next_token = ""
        if len(rows) > limit:
            last = rows[limit - 1]
            next_token = encode_token({"f": filters, "t": last.created_at.isoformat(), "i": str(last.id)})
        return rows[:limit], next_token

    async def delete_document(
        self,
        tenant_id: int,
        document_id: str,
        collection: str = "",
        source_uri: str = "",
        fence: Fence | None = None,
    ) -> tuple[bool, int]:
        """By id (that version), or by collection and source_uri (every live version of the source).
        Returns (a running job was cancelled, documents deleted)."""
        source = source_of(document_id, collection, source_uri)
        if source is not None:
            cancelled, deleted = await self.documents.delete_source(tenant_id, *source, fence=fence)
            log.info("source deleted", extra={"collection": source[0], "versions": deleted, "cancelled_running_job": cancelled})
            return cancelled, deleted
        doc_id = parse_id(document_id)
        cancelled = await self.documents.delete_document(tenant_id, doc_id)
        log.info("document deleted", extra={"document_id": str(doc_id), "cancelled_running_job": cancelled})
        return cancelled, 1

    async def require_document_visible(self, tenant_id: int, document_id: str, scope: frozenset[str] | None) -> None:
        """For a scoped key (docs/tenancy.md, "Scoped keys"): a document of a collection outside
        `scope` answers NOT_FOUND as a missing one; a missing one is left for the call to refuse as
        it always has. An unscoped key (None) costs no read."""
        if scope is None or not document_id:
            return
        doc_id = parse_id(document_id)
        collection = await self.documents.document_collection(tenant_id, doc_id)
        if collection is not None and collection not in scope:
            raise document_not_found(doc_id)

    async def retry_document(self, tenant_id: int, document_id: str) -> DocumentRow:
        return await self.documents.restart_document(tenant_id, parse_id(document_id), DocumentStatus.FAILED)

    async def reprocess_document(self, tenant_id: int, document_id: str) -> DocumentRow:
        return await self.documents.restart_document(tenant_id, parse_id(document_id), DocumentStatus.READY)


def source_of(document_id: str, collection: str, source_uri: str) -> tuple[str, str] | None:
    """(collection, source_uri) when a call names its document by source, None for an id."""
    source = source_uri_of(source_uri)
    if source is None:
        return None
    if document_id:
        raise InvalidArgument(
            "give the document's id or its collection and source_uri, not both", reason=Reason.INVALID_SOURCE_URI
        )
    if not collection:
        raise InvalidArgument(
            "a source_uri is looked up in a collection: collection is required", reason=Reason.COLLECTION_REQUIRED
        )
    return collection, source


__all__ = ["DocumentUseCases", "UploadMeta", "detect_mime_type", "source_of"]
