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
from dataclasses import dataclass, field
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row

from ..domain import DocumentStatus, EventCursor, JobStatus, SourceRunEvents
from .common import StoreBase, lookup_collection_settings, named_row, named_rows, one_row
from .literals import compose
from .rows import as_members

# What a reader selects of a log row: a document event's columns, or a run event's (migration
# 0024: `source_run_id` set, the document columns NULL). The log holds what changes over a
# document's life; what does not (name, hash, size, metadata, upload time, source_uri, version: a
# new version is a new row) comes from the documents row, in the same statement, so that an event
# shows the whole Document GetDocument would have answered then. A deletion's row carries them in
# `description` (migration 0025), written from the row it deleted; an older event read after the
# deletion has neither (NULL).
EVENT_COLUMNS = """
    e.id, e.txid::text::bigint AS txid, e.document_id, e.deleted, e.status::text AS status,
    e.error_code, e.error_message, e.progress_stage::text AS progress_stage, e.progress_done,
    e.progress_total, e.progress_unit, e.chunk_count, e.job_status::text AS job_status, e.attempts,
    e.max_attempts, e.available_at, e.updated_at, e.created_at,
    coalesce(d.filename, e.description ->> 'filename') AS filename,
    coalesce(d.mime_type, e.description ->> 'mime_type') AS mime_type,
    pg_current_wal_insert_lsn()::text AS wal_lsn, e.source_run_id, e.run_event, e.run,
    coalesce(d.content_sha256, e.description ->> 'content_sha256') AS content_sha256,
    coalesce(d.size_bytes, (e.description ->> 'size_bytes')::bigint) AS size_bytes,
    coalesce(d.metadata, e.description -> 'metadata') AS metadata,
    coalesce(d.created_at, (e.description ->> 'created_at')::timestamptz) AS document_created_at,
    coalesce(d.source_uri, e.description ->> 'source_uri') AS source_uri,
    coalesce(d.version, (e.description ->> 'version')::int) AS version
"""

# Every row's position is compared as a row value against the cursor; the index
# document_events_collection_order (collection_id, txid, id) serves the scan.
COLLECTION_EVENTS_SQL = f"""
    SELECT {EVENT_COLUMNS}
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
    `filename`, `mime_type` and the other fields that never change are the documents row's, or
    for a deletion the ones its event kept; None for an older event read after the deletion."""

    id: int
    txid: int
    document_id: uuid.UUID
    deleted: bool
    status: DocumentStatus
    error_code: str | None
    error_message: str | None
    progress_stage: DocumentStatus | None
    progress_done: int
    progress_total: int
    progress_unit: str
    chunk_count: int
    job_status: JobStatus
    attempts: int
    max_attempts: int
    available_at: dt.datetime
    updated_at: dt.datetime
    created_at: dt.datetime
    filename: str | None
    mime_type: str | None
    # pg_current_wal_insert_lsn() read by the statement that read this committed event: the
    # token of its Document.consistency_token (sluice_common.consistency). Keyword-only, so that
    # FilteredEventRow's fields may follow it.
    wal_lsn: str = field(default="", kw_only=True)
    # What does not change over the document's life (see EVENT_COLUMNS).
    content_sha256: str | None = field(default=None, kw_only=True)
    size_bytes: int | None = field(default=None, kw_only=True)
    metadata: dict[str, Any] | None = field(default=None, kw_only=True)
    document_created_at: dt.datetime | None = field(default=None, kw_only=True)
    source_uri: str | None = field(default=None, kw_only=True)
    version: int | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        as_members(self, status=DocumentStatus, progress_stage=DocumentStatus, job_status=JobStatus)

    @property
    def cursor(self) -> EventCursor:
        return EventCursor(self.txid, self.id)


@dataclass(frozen=True, slots=True)
class SourceRunEventRow:
    """One event of a sync run of one of the collection's sources (docs/sources.md): `kind` is
    STARTED, PROGRESS or FINISHED; `run` is the run as the event left it (the columns of
    sources.store.RunRow as JSON, and `source_display_name`)."""

    id: int
    txid: int
    source_run_id: uuid.UUID
    kind: str
    run: dict[str, Any]
    created_at: dt.datetime

    @property
    def cursor(self) -> EventCursor:
        return EventCursor(self.txid, self.id)


LogEvent = CollectionEventRow | SourceRunEventRow
_DOCUMENT_FIELDS = tuple(CollectionEventRow.__dataclass_fields__)


def event_of(row: dict[str, Any]) -> LogEvent:
    """The row a reader selected (EVENT_COLUMNS) as the event it is."""
    if row["source_run_id"] is not None:
        return SourceRunEventRow(
            id=row["id"],
            txid=row["txid"],
            source_run_id=row["source_run_id"],
            kind=row["run_event"],
            run=row["run"],
            created_at=row["created_at"],
        )
    return CollectionEventRow(**{name: row[name] for name in _DOCUMENT_FIELDS})


# --------------------------------------------------------------------------- WatchCollection

# One window of the log (up to `limit` rows after the cursor, unfiltered, in log order), of which
# only the rows that pass the filters come back, plus the window's last row whatever it is
# (`wanted` false): the watcher's cursor moves past filtered-out rows without sending them.
# A deletion passes every document filter; `statuses` NULL means every status. A run event is
# wanted when the watcher asked for run events (`runs` INCLUDED or ONLY), whatever the document
# filters; with ONLY no document event is.
WATCH_PAGE_SQL = compose(
    """
    WITH scanned AS MATERIALIZED (
        SELECT e.* FROM document_events e
         WHERE e.tenant_id = %(tenant_id)s AND e.collection_id = %(collection_id)s
           AND (e.txid, e.id) > (%(txid)s::text::xid8, %(event_id)s)
           AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY e.txid, e.id
         LIMIT %(limit)s
    ), last AS (
        SELECT s.txid, s.id FROM scanned s ORDER BY s.txid DESC, s.id DESC LIMIT 1
    ), marked AS (
        SELECT s.*, CASE WHEN s.source_run_id IS NOT NULL THEN %(runs)s <> {runs_none}
                         ELSE %(runs)s <> {runs_only} AND (s.deleted OR (
                             (%(statuses)s::text[] IS NULL OR s.status::text = ANY(%(statuses)s::text[]))
                             AND (NOT %(terminal_only)s OR s.status IN ({doc_ready}, {doc_failed})))) END AS wanted
          FROM scanned s
    )
    SELECT {event_columns}, e.wanted, (SELECT count(*) FROM scanned) AS scanned
      FROM marked e
      LEFT JOIN documents d ON d.id = e.document_id
     WHERE e.wanted OR (e.txid, e.id) = (SELECT l.txid, l.id FROM last l)
     ORDER BY e.txid, e.id
""",
    event_columns=sql.SQL(EVENT_COLUMNS),
)

# Committed events of the collection past the cursor that are not readable yet (an older writer
# still runs): their notification may already have been spent, so the watcher re-checks soon.
WAITING_SQL = """
    SELECT EXISTS (
        SELECT 1 FROM document_events e
         WHERE e.collection_id = %(collection_id)s AND (e.txid, e.id) > (%(txid)s::text::xid8, %(event_id)s)
           AND e.txid >= pg_snapshot_xmin(pg_current_snapshot()))
"""


# A watcher's read runs in one snapshot: the horizon and the rows (EventStore.watch_page).
REPEATABLE_READ_SQL = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
HORIZON_SQL = (
    "SELECT c.id IS NOT NULL AS collection_exists, h.txid::text::bigint AS txid, h.event_id FROM (SELECT 1) one"
    " LEFT JOIN collections c ON c.id = %(c)s AND c.tenant_id = %(t)s"
    " LEFT JOIN event_log_horizon h ON h.collection_id = %(c)s"
)

# The cursor before every event not yet readable.
HEAD_SQL = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"


@dataclass(frozen=True, slots=True)
class _Horizon:
    collection_exists: bool
    txid: int | None
    event_id: int | None


@dataclass(frozen=True, slots=True)
class WatchPage:
    """What one read of a watcher sees, all in one snapshot.

    `events` pass the filters; `read_to` is the last row read (sent or not), None when there was
    nothing new; `full` when the window was full (read again at once); `horizon` is the highest
    position pruned by age (None: nothing pruned); `waiting` when committed events are not
    readable yet; `exists` false once the collection is gone."""

    events: list[LogEvent]
    read_to: EventCursor | None
    full: bool
    horizon: EventCursor | None
    waiting: bool
    exists: bool


class EventStore(StoreBase):
    """The events log read a collection at a time: the webhook dispatcher's pages
    (collection_events_after) and WatchCollection's (the collection's id, then windows)."""

    async def events_head(self) -> EventCursor:
        """The cursor before every event not yet readable: start here to follow from now on."""
        async with self.pool.connection() as conn:
            row = await one_row(conn, HEAD_SQL)
            return EventCursor(int(row[0]) - 1, 2**63 - 1)

    async def collection_events_after(self, tenant_id: int, collection_id: int, after: EventCursor, limit: int) -> list[LogEvent]:
        """Up to `limit` events of the collection after `after`, in log order."""
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                COLLECTION_EVENTS_SQL,
                {
                    "tenant_id": tenant_id,
                    "collection_id": collection_id,
                    "txid": after.txid,
                    "event_id": after.event_id,
                    "limit": limit,
                },
            )
            return [event_of(row) for row in await cur.fetchall()]

    async def collection_id(self, tenant_id: int, name: str) -> int:
        """The id of the tenant's collection `name` (NOT_FOUND otherwise, also for another tenant's)."""
        async with self.pool.connection() as conn:
            return (await lookup_collection_settings(conn, tenant_id, name)).id

    async def watch_page(
        self,
        tenant_id: int,
        collection_id: int,
        after: EventCursor,
        limit: int,
        statuses: list[str] | None,
        terminal_only: bool,
        source_runs: SourceRunEvents = SourceRunEvents.NONE,
    ) -> WatchPage:
        async with self.pool.connection() as conn, conn.transaction():
            # One snapshot for the horizon and the rows: a prune that commits in between cannot
            # remove rows this read then misses without the horizon showing it.
            await conn.execute(REPEATABLE_READ_SQL)
            found = await named_row(conn, _Horizon, HORIZON_SQL, {"c": collection_id, "t": tenant_id})
            assert found is not None  # FROM (SELECT 1): always one row
            horizon = (
                EventCursor(int(found.txid), int(found.event_id))
                if found.txid is not None and found.event_id is not None
                else None
            )
            if not found.collection_exists:
                return WatchPage([], None, False, horizon, False, False)
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                WATCH_PAGE_SQL,
                {
                    "tenant_id": tenant_id,
                    "collection_id": collection_id,
                    "txid": after.txid,
                    "event_id": after.event_id,
                    "limit": limit,
                    "statuses": statuses,
                    "terminal_only": terminal_only,
                    "runs": str(source_runs),
                },
            )
            rows = await cur.fetchall()
            read_to = EventCursor(rows[-1]["txid"], rows[-1]["id"]) if rows else None
            events = [event_of(row) for row in rows if row["wanted"]]
            full = bool(rows) and rows[-1]["scanned"] >= limit
            waiting = False
            if not full:
                position = read_to or after
                (waiting,) = await one_row(
                    conn,
                    WAITING_SQL,
                    {"collection_id": collection_id, "txid": position.txid, "event_id": position.event_id},
                )
            return WatchPage(events, read_to, full, horizon, bool(waiting), True)


# --------------------------------------------------------------------------- retention

RETENTION_LOCK = "SELECT pg_try_advisory_xact_lock(hashtext('sluice_event_retention'))"

# Events older than the retention, except the latest of a document that still exists (WatchDocument
# and a deletion's last event build on it). The highest position removed per collection becomes
# its horizon, in the same transaction.
PRUNE_BY_AGE_SQL = """
    WITH doomed AS (
        SELECT e.id FROM document_events e
         WHERE e.created_at < now() - make_interval(secs => %(age)s)
           AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
           AND (EXISTS (SELECT 1 FROM document_events n WHERE n.document_id = e.document_id AND n.id > e.id)
                OR NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = e.document_id))
         ORDER BY e.created_at
         LIMIT %(batch)s
         FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM document_events e USING doomed WHERE e.id = doomed.id
        RETURNING e.collection_id, e.txid, e.id
    ), top AS (
        SELECT DISTINCT ON (g.collection_id) g.collection_id, g.txid, g.id
          FROM gone g ORDER BY g.collection_id, g.txid DESC, g.id DESC
    ), marked AS (
        INSERT INTO event_log_horizon AS h (collection_id, txid, event_id)
        SELECT t.collection_id, t.txid, t.id FROM top t
            ON CONFLICT (collection_id) DO UPDATE SET txid = EXCLUDED.txid, event_id = EXCLUDED.event_id, updated_at = now()
            WHERE (h.txid, h.event_id) < (EXCLUDED.txid, EXCLUDED.event_id)
        RETURNING 1
    )
    SELECT count(*) FROM gone
"""

# Documents with events newer than a watermark: only they can have grown past the count.
COUNT_CANDIDATES_SQL = """
    SELECT e.document_id, max(e.id) AS newest FROM document_events e WHERE e.id > %(since)s AND e.document_id IS NOT NULL
     GROUP BY e.document_id ORDER BY max(e.id) LIMIT %(limit)s
"""

# All but the newest `keep` events of each document (by id: a document's events are written under
# its row lock, so id order is its commit order). The newest (its final state, its deletion) stays.
PRUNE_BY_COUNT_SQL = """
    WITH doomed AS (
        SELECT x.id FROM unnest(%(documents)s::uuid[]) AS c(document_id)
        CROSS JOIN LATERAL (
            SELECT e.id FROM document_events e WHERE e.document_id = c.document_id
             ORDER BY e.id DESC OFFSET %(keep)s) x
        LIMIT %(batch)s
    )
    DELETE FROM document_events e USING doomed
     WHERE e.id = doomed.id AND e.txid < pg_snapshot_xmin(pg_current_snapshot())
"""


@dataclass(frozen=True, slots=True)
class _Candidate:
    document_id: uuid.UUID
    newest: int


class RetentionStore(StoreBase):
    """Pruning the events log in bounded batches, one short transaction each."""

    async def prune_events_by_age(self, age_seconds: float, batch: int) -> int | None:
        """Delete up to `batch` expired events; None when another process holds the pruning lock."""
        async with self.pool.connection() as conn, conn.transaction():
            (locked,) = await one_row(conn, RETENTION_LOCK)
            if not locked:
                return None
            (count,) = await one_row(conn, PRUNE_BY_AGE_SQL, {"age": age_seconds, "batch": batch})
            return int(count)

    async def count_prune_candidates(self, since_id: int, limit: int) -> list[tuple[uuid.UUID, int]]:
        """Up to `limit` documents with events after `since_id`, each with its newest event id."""
        async with self.pool.connection() as conn:
            rows = await named_rows(conn, _Candidate, COUNT_CANDIDATES_SQL, {"since": since_id, "limit": limit})
            return [(row.document_id, int(row.newest)) for row in rows]

    async def prune_events_by_count(self, documents: list[uuid.UUID], keep: int, batch: int) -> int | None:
        """Delete up to `batch` events of `documents` beyond each one's newest `keep`."""
        async with self.pool.connection() as conn, conn.transaction():
            (locked,) = await one_row(conn, RETENTION_LOCK)
            if not locked:
                return None
            cur = await conn.execute(PRUNE_BY_COUNT_SQL, {"documents": documents, "keep": keep, "batch": batch})
            return cur.rowcount
