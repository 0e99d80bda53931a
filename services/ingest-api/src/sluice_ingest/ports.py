"""The service layer's ports: what each group of use cases needs of a store (the stores of
store/ implement them, checked by mypy at the end of this module; the unit tests of the claim
long-poll and the watches run on fakes)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, Protocol

import numpy as np
from sluice_common.auth import Role

from .domain import DocumentStatus, EventCursor, SourceRunEvents
from .store import (
    AttemptRow,
    ChunkRow,
    ClaimedJob,
    CollectionRow,
    CollectionStore,
    DocumentRow,
    DocumentStore,
    EventRow,
    EventStore,
    GenerationStore,
    NewCollection,
    NewDocument,
    QueueStore,
    WatchPage,
)
from .store.chunks import ChunkStore, ChunkTarget, DocumentChunkRow
from .store.rows import Fence
from .store.tenants import ApiKeyRow, QueueShare, Quota, TenantRow, TenantStore
from .store.versions import VersionsView


class CollectionsPort(Protocol):
    async def create_collection(self, new: NewCollection) -> CollectionRow: ...

    async def get_collection(self, tenant_id: int, name: str) -> CollectionRow: ...

    async def list_collections(
        self, tenant_id: int, after: str | None, limit: int, scope: list[str] | None = None
    ) -> list[CollectionRow]: ...

    async def delete_collection(self, tenant_id: int, name: str, force: bool) -> int: ...

    async def collection_settings(self, tenant_id: int, name: str) -> CollectionRow: ...


class GenerationsPort(Protocol):
    async def reindex_collection(
        self,
        tenant_id: int,
        name: str,
        provider: str,
        model: str,
        dimensions: int,
        eval_set: list[dict[str, Any]] | None = None,
        min_ratio: float = 1.0,
        *,
        vector_precision: str | None = None,
    ) -> CollectionRow: ...

    async def cancel_reindex(self, tenant_id: int, name: str) -> CollectionRow: ...

    async def sweep_generations(self, grace_seconds: float) -> tuple[int, int]: ...

    async def compact_keyword_stats(self, min_statements: int = 32) -> int: ...


class DocumentLogPort(Protocol):
    """A document and its changes (WatchDocument)."""

    async def latest_event_id(self, document_id: uuid.UUID) -> int: ...

    async def get_document(self, tenant_id: int, document_id: uuid.UUID) -> DocumentRow: ...

    async def document_events_after(self, document_id: uuid.UUID, after_id: int) -> list[EventRow]: ...


class DocumentsPort(DocumentLogPort, Protocol):
    async def create_document(self, new: NewDocument) -> tuple[DocumentRow, bool]: ...

    async def get_document_with_history(
        self,
        tenant_id: int,
        document_id: uuid.UUID | None,
        source: tuple[str, str] | None = None,
    ) -> tuple[DocumentRow, list[AttemptRow], VersionsView | None]: ...

    async def list_documents(
        self,
        tenant_id: int,
        collection: str | None,
        status: str | None,
        after: tuple[dt.datetime, uuid.UUID] | None,
        limit: int,
        source_uri: str | None = None,
        scope: list[str] | None = None,
    ) -> list[DocumentRow]: ...

    async def document_collection(self, tenant_id: int, document_id: uuid.UUID) -> str | None: ...

    async def delete_document(self, tenant_id: int, document_id: uuid.UUID) -> bool: ...

    async def delete_source(
        self,
        tenant_id: int,
        collection: str,
        source_uri: str,
        fence: Fence | None = None,
    ) -> tuple[bool, int]: ...

    async def restart_document(self, tenant_id: int, document_id: uuid.UUID, expected: DocumentStatus) -> DocumentRow: ...


class CollectionLogPort(Protocol):
    """A collection's events log (WatchCollection)."""

    async def collection_id(self, tenant_id: int, name: str) -> int: ...

    async def events_head(self) -> EventCursor: ...

    async def watch_page(
        self,
        tenant_id: int,
        collection_id: int,
        after: EventCursor,
        limit: int,
        statuses: list[str] | None,
        terminal_only: bool,
        source_runs: SourceRunEvents = SourceRunEvents.NONE,
    ) -> WatchPage: ...


class QueuePort(Protocol):
    async def claim_job(self, worker_id: str) -> ClaimedJob | None: ...

    async def next_wakeup(self) -> dt.timedelta | None: ...

    async def renew_lease(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> dt.datetime | None: ...

    async def report_stage(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, stage: DocumentStatus, done: int, total: int, unit: str
    ) -> dt.datetime: ...

    async def content_length(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> tuple[uuid.UUID, int]: ...

    async def content_slice(self, document_id: uuid.UUID, offset: int, size: int) -> bytes: ...

    async def save_snapshot(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, pipeline_version: str, chunks: list[dict[str, Any]]
    ) -> None: ...

    async def read_snapshot(self, job_id: uuid.UUID, lease_token: uuid.UUID, pipeline_version: str) -> list[dict[str, Any]]: ...

    async def collection_dimensions(self, job_id: uuid.UUID) -> int: ...

    async def complete_job(self, job_id: uuid.UUID, lease_token: uuid.UUID, chunks: list[ChunkRow]) -> DocumentRow: ...

    async def fail_job(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, retryable: bool, error_code: str, error_message: str
    ) -> tuple[DocumentRow, bool]: ...

    async def release_job(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> DocumentRow: ...


class ChunksPort(Protocol):
    """A document's chunks and bytes (ListChunks, UpdateChunk, DownloadDocument)."""

    async def list_chunks(
        self, tenant_id: int, document_id: uuid.UUID, generation: int, after_index: int, limit: int
    ) -> tuple[list[DocumentChunkRow], int, int]: ...

    async def chunk_collection(self, tenant_id: int, chunk_id: int) -> str | None: ...

    async def chunk_target(self, tenant_id: int, chunk_id: int) -> ChunkTarget: ...

    async def apply_update(
        self,
        tenant_id: int,
        target: ChunkTarget,
        enabled: bool | None,
        text: str | None,
        terms: str,
        vectors: dict[int, np.ndarray],
    ) -> DocumentChunkRow: ...

    async def document_for_download(self, tenant_id: int, document_id: uuid.UUID) -> DocumentRow: ...

    async def content_slice(self, tenant_id: int, document_id: uuid.UUID, offset: int, size: int) -> bytes: ...


class TenantsPort(Protocol):
    async def create_tenant(self, name: str, quota: Quota) -> TenantRow: ...

    async def update_tenant(self, name: str, quota: Quota | None, queue: QueueShare | None) -> TenantRow: ...

    async def list_tenants(self) -> list[TenantRow]: ...

    async def create_key(
        self, tenant: str, role: Role, name: str = "", collections: tuple[str, ...] = ()
    ) -> tuple[ApiKeyRow, str]: ...

    async def list_keys(self, tenant: str | None) -> list[ApiKeyRow]: ...

    async def revoke_key(self, key: str) -> ApiKeyRow: ...


# mypy (make lint) checks that each store implements its ports.
def _collection_store(store: CollectionStore) -> CollectionsPort:
    return store


def _generation_store(store: GenerationStore) -> GenerationsPort:
    return store


def _document_store(store: DocumentStore) -> DocumentsPort:
    return store


def _event_store(store: EventStore) -> CollectionLogPort:
    return store


def _queue_store(store: QueueStore) -> QueuePort:
    return store


def _tenant_store(store: TenantStore) -> TenantsPort:
    return store


def _chunk_store(store: ChunkStore) -> ChunksPort:
    return store


__all__ = [
    "ChunksPort",
    "CollectionLogPort",
    "CollectionsPort",
    "DocumentLogPort",
    "DocumentsPort",
    "GenerationsPort",
    "QueuePort",
    "TenantsPort",
]
