"""The events log read a collection at a time: the outbox behind WatchCollection and webhooks.

Rows are read in (txid, id) order and only once their transaction is older than every
transaction still running (`txid < pg_snapshot_xmin(pg_current_snapshot())`). Identity ids are
taken at insert, not at commit: a transaction holding id 100 can commit after one holding 101
was read, and "id > cursor" would skip it for good. Below the snapshot's xmin every writer has
finished, so the set of readable rows only ever grows past the last cursor handed out.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

from psycopg.rows import class_row

from ..domain import EventCursor
from .common import StoreBase, _one

# Every row's position is compared as a row value against the cursor; the index
# document_events_collection_order (collection_id, txid, id) serves the scan.
COLLECTION_EVENTS_SQL = """
    SELECT e.id, e.txid::text::bigint AS txid, e.document_id, e.deleted, e.status::text AS status,
           e.error_code, e.error_message, e.progress_stage::text AS progress_stage, e.progress_done,
           e.progress_total, e.progress_unit, e.chunk_count, e.job_status::text AS job_status, e.attempts,
           e.max_attempts, e.available_at, e.updated_at, e.created_at, d.filename, d.mime_type
      FROM document_events e
      LEFT JOIN documents d ON d.id = e.document_id
     WHERE e.tenant_id = %(tenant_id)s AND e.collection_id = %(collection_id)s
       AND (e.txid, e.id) > (%(txid)s::text::xid8, %(event_id)s)
       AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
     ORDER BY e.txid, e.id
     LIMIT %(limit)s
"""


@dataclass(frozen=True, slots=True)
class CollectionEventRow:
    """One committed change of one document of a collection, with its position in the log.
    `filename` and `mime_type` are None once the document is gone."""

    id: int
    txid: int
    document_id: uuid.UUID
    deleted: bool
    status: str
    error_code: str | None
    error_message: str | None
    progress_stage: str | None
    progress_done: int
    progress_total: int
    progress_unit: str
    chunk_count: int
    job_status: str
    attempts: int
    max_attempts: int
    available_at: dt.datetime
    updated_at: dt.datetime
    created_at: dt.datetime
    filename: str | None
    mime_type: str | None

    @property
    def cursor(self) -> EventCursor:
        return EventCursor(self.txid, self.id)


class EventStore(StoreBase):
    async def events_head(self) -> EventCursor:
        """The cursor before every event not yet readable: start here to follow from now on."""
        async with self.pool.connection() as conn:
            row = await _one(conn, "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
            return EventCursor(int(row[0]) - 1, 2**63 - 1)

    async def collection_events_after(
        self, tenant_id: int, collection_id: int, after: EventCursor, limit: int
    ) -> list[CollectionEventRow]:
        """Up to `limit` events of the collection after `after`, in log order."""
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row(CollectionEventRow))
            await cur.execute(
                COLLECTION_EVENTS_SQL,
                {"tenant_id": tenant_id, "collection_id": collection_id, "txid": after.txid,
                 "event_id": after.event_id, "limit": limit},
            )
            return await cur.fetchall()
