"""The service layer's ports: what IngestService needs of its store (PostgresStore implements
it; the unit tests of the claim long-poll and WatchDocument run on a fake)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, Protocol

from .domain import DocumentStatus as D, EventCursor
from .store import (
    AttemptRow,
    ChunkRow,
    ClaimedJob,
    CollectionRow,
    DocumentRow,
    EventRow,
    NewCollection,
    NewDocument,
    PostgresStore,
    WatchPage,
)


class IngestStore(Protocol):
    async def create_collection(self, new: NewCollection) -> CollectionRow: ...

    async def get_collection(self, tenant_id: int, name: str) -> CollectionRow: ...

    async def list_collections(self, tenant_id: int, after: str | None, limit: int) -> list[CollectionRow]: ...

    async def delete_collection(self, tenant_id: int, name: str, force: bool) -> int: ...

    async def collection_settings(self, tenant_id: int, name: str) -> CollectionRow: ...

    async def reindex_collection(self, tenant_id: int, name: str, provider: str, model: str, dimensions: int,
                                 eval_set: list[dict[str, Any]] | None = None, min_ratio: float = 1.0) -> CollectionRow: ...

    async def cancel_reindex(self, tenant_id: int, name: str) -> CollectionRow: ...

    async def sweep_generations(self, grace_seconds: float) -> tuple[int, int]: ...

    async def create_document(self, new: NewDocument) -> tuple[DocumentRow, bool]: ...

    async def get_document_with_history(
        self, tenant_id: int, document_id: uuid.UUID
    ) -> tuple[DocumentRow, list[AttemptRow]]: ...

    async def list_documents(
        self,
        tenant_id: int,
        collection: str | None,
        status: str | None,
        after: tuple[dt.datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[DocumentRow]: ...

    async def delete_document(self, tenant_id: int, document_id: uuid.UUID) -> bool: ...

    async def restart_document(self, tenant_id: int, document_id: uuid.UUID, expected: D) -> DocumentRow: ...

    async def latest_event_id(self, document_id: uuid.UUID) -> int: ...

    async def get_document(self, tenant_id: int, document_id: uuid.UUID) -> DocumentRow: ...

    async def document_events_after(self, document_id: uuid.UUID, after_id: int) -> list[EventRow]: ...

    async def collection_id(self, tenant_id: int, name: str) -> int: ...

    async def events_head(self) -> EventCursor: ...

    async def watch_page(
        self, tenant_id: int, collection_id: int, after: EventCursor, limit: int,
        statuses: list[str] | None, terminal_only: bool,
    ) -> WatchPage: ...

    async def claim_job(self, worker_id: str) -> ClaimedJob | None: ...

    async def next_wakeup(self) -> dt.timedelta | None: ...

    async def renew_lease(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> dt.datetime | None: ...

    async def report_stage(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, stage: D, done: int, total: int, unit: str
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



def _postgres_store_is_an_ingest_store(store: PostgresStore) -> IngestStore:
    return store  # mypy (make lint) checks that PostgresStore implements every method above


__all__ = ["IngestStore"]
