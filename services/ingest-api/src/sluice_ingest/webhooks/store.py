"""Webhook subscriptions and deliveries in PostgreSQL: the management calls (tenant-scoped) and
the dispatcher's statements (fenced by the subscription's lease).

Lock discipline: every statement here is short and touches only webhook rows (and a shared
lock on the collection row while a subscription is created), never document or job rows, and
no transaction is open while a request is in flight. A dispatcher's write carries
`lease_owner = me AND lease_expires_at > now()`: once another replica took the subscription
over, the old one's writes change nothing.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from sluice_common.db import one_snapshot
from sluice_common.errors import NotFound, ResourceExhausted
from sluice_common.reasons import Reason

from ..domain import EventCursor
from ..store.literals import compose, literal_table
from .domain import DeliveryState, SubscriptionState
from .events import Description, body_of

# The subscriptions' and the deliveries' states by their entries (`{subscription_active}`,
# `{delivery_pending}`), as store/literals.py names the domain's: no statement here types one by hand.
WEBHOOK_LITERAL_ENUMS: dict[str, type[SubscriptionState] | type[DeliveryState]] = {
    "subscription": SubscriptionState,
    "delivery": DeliveryState,
}
WEBHOOK_LITERALS = literal_table(WEBHOOK_LITERAL_ENUMS)

SUBSCRIPTION_SELECT = sql.SQL(
    """
    SELECT s.id, s.tenant_id, s.collection_id, c.name AS collection, s.url, s.event_types, s.description,
           s.state, s.disabled_reason, s.created_at, s.lost_events,
           (SELECT count(*) FROM webhook_deliveries d WHERE d.subscription_id = s.id AND d.state = {delivery_pending})
               AS pending_deliveries,
           (SELECT count(*) FROM webhook_deliveries d WHERE d.subscription_id = s.id AND d.state = {delivery_failed})
               AS failed_deliveries
      FROM webhook_subscriptions s
      JOIN collections c ON c.id = s.collection_id
"""
).format(**WEBHOOK_LITERALS)

DELIVERY_COLUMNS = """
    d.seq, d.id, d.subscription_id, d.event_id, d.event_txid, d.document_id, d.event_type, d.payload::text AS payload,
    d.event_time, d.state, d.attempts, d.next_attempt_at, d.last_status_code, d.last_error, d.delivered_at
"""

# A live lease of `owner` on the subscription: the fence of every dispatcher write.
LEASE_HELD = sql.SQL(
    """
    EXISTS (SELECT 1 FROM webhook_subscriptions l WHERE l.id = %(subscription_id)s AND l.state = {subscription_active}
             AND l.lease_owner = %(owner)s AND l.lease_expires_at > now())
"""
).format(**WEBHOOK_LITERALS)

# ------------------------------------------------------------ management (tenant-scoped)

# A shared lock on the collection: two creations cannot both take the last place, and uploads
# (KEY SHARE) are not blocked by it.
LOCK_COLLECTION_SQL = "SELECT id FROM collections WHERE tenant_id = %s AND name = %s FOR NO KEY UPDATE"
COUNT_SUBSCRIPTIONS_SQL = "SELECT count(*) FROM webhook_subscriptions WHERE collection_id = %s"
# Follows the log from now on: the cursor before every event not yet readable.
INSERT_SUBSCRIPTION_SQL = """
    INSERT INTO webhook_subscriptions (tenant_id, collection_id, url, event_types, description, secret,
                                       cursor_txid, cursor_event_id)
    VALUES (%s, %s, %s, %s, %s, %s, pg_snapshot_xmin(pg_current_snapshot())::text::bigint - 1,
            9223372036854775807)
    RETURNING id
"""
GET_SUBSCRIPTION_SQL = compose(
    "{subscription_select} WHERE s.tenant_id = %s AND s.id = %s", subscription_select=SUBSCRIPTION_SELECT
)
COLLECTION_EXISTS_SQL = "SELECT 1 FROM collections WHERE tenant_id = %s AND name = %s"
LIST_SUBSCRIPTIONS_SQL = compose(
    """{subscription_select} WHERE s.tenant_id = %(tenant)s AND (%(collection)s::text IS NULL OR c.name = %(collection)s)
      AND (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))
      AND (%(after_time)s::timestamptz IS NULL OR (s.created_at, s.id) > (%(after_time)s, %(after_id)s))
    ORDER BY s.created_at, s.id LIMIT %(limit)s""",
    subscription_select=SUBSCRIPTION_SELECT,
)
# The subscription and (by cascade) its deliveries; how many of them were pending.
DELETE_SUBSCRIPTION_SQL = compose(
    """
    WITH gone AS (DELETE FROM webhook_subscriptions WHERE tenant_id = %s AND id = %s RETURNING id)
    SELECT (SELECT count(*) FROM gone),
           (SELECT count(*) FROM webhook_deliveries d WHERE d.subscription_id IN (SELECT id FROM gone)
               AND d.state = {delivery_pending})
    """,
    **WEBHOOK_LITERALS,
)
ROTATE_SECRET_SQL = "UPDATE webhook_subscriptions SET secret = %s WHERE tenant_id = %s AND id = %s RETURNING id"
LIST_DELIVERIES_SQL = (
    "SELECT"
    + DELIVERY_COLUMNS
    + """ FROM webhook_deliveries d
     WHERE d.subscription_id = %(sub)s AND (%(state)s::text IS NULL OR d.state = %(state)s)
       AND (%(before)s::bigint IS NULL OR d.seq < %(before)s)
     ORDER BY d.seq DESC LIMIT %(limit)s"""
)

# ------------------------------------------------------------ the dispatcher (fenced by lease)

LEASED_COLUMNS = """
    s.id, s.tenant_id, s.collection_id, c.name AS collection, s.url, s.secret, s.event_types,
    s.cursor_txid, s.cursor_event_id
"""
RENEW_LEASES_SQL = compose(
    """
    UPDATE webhook_subscriptions s SET lease_expires_at = now() + make_interval(secs => %(lease)s)
      FROM collections c
     WHERE c.id = s.collection_id AND s.id = ANY(%(ids)s) AND s.lease_owner = %(owner)s
       AND s.state = {subscription_active}
    RETURNING {leased_columns}
    """,
    leased_columns=sql.SQL(LEASED_COLUMNS),
    **WEBHOOK_LITERALS,
)
CLAIM_LEASES_SQL = compose(
    """
    WITH free AS (
        SELECT id FROM webhook_subscriptions
         WHERE state = {subscription_active} AND (lease_owner IS NULL OR lease_expires_at < now())
         ORDER BY lease_expires_at NULLS FIRST
         LIMIT %(limit)s FOR UPDATE SKIP LOCKED
    )
    UPDATE webhook_subscriptions s
       SET lease_owner = %(owner)s, lease_expires_at = now() + make_interval(secs => %(lease)s)
      FROM free, collections c
     WHERE s.id = free.id AND c.id = s.collection_id
    RETURNING {leased_columns}
    """,
    leased_columns=sql.SQL(LEASED_COLUMNS),
    **WEBHOOK_LITERALS,
)
RELEASE_LEASES_SQL = (
    "UPDATE webhook_subscriptions SET lease_owner = NULL, lease_expires_at = NULL WHERE id = ANY(%s) AND lease_owner = %s"
)
PREVIOUS_STATUSES_SQL = """
    SELECT e.id, (SELECT p.status::text FROM document_events p
                   WHERE p.document_id = e.document_id AND p.id < e.id ORDER BY p.id DESC LIMIT 1)
      FROM document_events e WHERE e.id = ANY(%s)
"""
KNOWN_DESCRIPTIONS_SQL = """
    SELECT DISTINCT ON (document_id) document_id, payload::jsonb -> 'data'
      FROM webhook_deliveries WHERE subscription_id = %s AND document_id = ANY(%s)
     ORDER BY document_id, seq DESC
"""
EVENT_EXISTS_SQL = "SELECT 1 FROM document_events WHERE id = %s"
# The cursor moved past a batch and the batch's deliveries written, in one statement.
APPEND_SQL = compose(
    """
    WITH moved AS (
        UPDATE webhook_subscriptions SET cursor_txid = %(new_txid)s, cursor_event_id = %(new_id)s,
               lost_events = lost_events + %(lost)s
         WHERE id = %(subscription_id)s AND lease_owner = %(owner)s AND lease_expires_at > now()
           AND state = {subscription_active} AND cursor_txid = %(old_txid)s AND cursor_event_id = %(old_id)s
        RETURNING id
    ), added AS (
        INSERT INTO webhook_deliveries (subscription_id, event_id, event_txid, document_id, event_type,
                                        payload, event_time)
        SELECT moved.id, x.event_id, x.event_txid, x.document_id, x.event_type, x.payload, x.event_time
          FROM moved, unnest(%(event_ids)s::bigint[], %(event_txids)s::bigint[], %(document_ids)s::uuid[],
                             %(event_types)s::text[], %(payloads)s::json[], %(event_times)s::timestamptz[])
               AS x(event_id, event_txid, document_id, event_type, payload, event_time)
        ON CONFLICT (subscription_id, event_id, event_type) DO NOTHING
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM added)
    """,
    **WEBHOOK_LITERALS,
)
# Each document's first pending delivery among the window's oldest, those due now.
DUE_SQL = compose(
    """
    WITH oldest AS (
        SELECT * FROM webhook_deliveries
         WHERE subscription_id = %(sub)s AND state = {delivery_pending} ORDER BY seq LIMIT %(window)s
    ), heads AS (
        SELECT DISTINCT ON (d.document_id){delivery_columns}
          FROM oldest d ORDER BY d.document_id, d.event_id, d.seq
    )
    SELECT * FROM heads d WHERE d.next_attempt_at <= now() AND NOT (d.document_id = ANY(%(busy)s))
     ORDER BY d.seq LIMIT %(limit)s
    """,
    delivery_columns=sql.SQL(DELIVERY_COLUMNS),
    **WEBHOOK_LITERALS,
)
# The seconds until the window's next head is due.
NEXT_DUE_SQL = compose(
    """
    SELECT extract(epoch FROM min(h.next_attempt_at) - now())::float8 FROM (
        SELECT DISTINCT ON (d.document_id) d.next_attempt_at FROM (
            SELECT document_id, event_id, seq, next_attempt_at FROM webhook_deliveries
             WHERE subscription_id = %s AND state = {delivery_pending} ORDER BY seq LIMIT %s
        ) d ORDER BY d.document_id, d.event_id, d.seq
    ) h WHERE h.next_attempt_at > now()
    """,
    **WEBHOOK_LITERALS,
)
PRUNE_DELIVERIES_SQL = compose(
    """
    DELETE FROM webhook_deliveries WHERE seq IN (
        SELECT seq FROM webhook_deliveries
         WHERE state <> {delivery_pending} AND created_at < now() - make_interval(secs => %s) LIMIT %s)
    """,
    **WEBHOOK_LITERALS,
)
RECORD_ATTEMPT_SQL = compose(
    """
    UPDATE webhook_deliveries SET attempts = attempts + 1, state = %(state)s,
           last_status_code = %(code)s, last_error = %(error)s,
           delivered_at = CASE WHEN %(state)s = {delivery_delivered} THEN now() END,
           next_attempt_at = CASE WHEN %(state)s = {delivery_pending}
                                  THEN now() + make_interval(secs => %(retry_in)s) ELSE next_attempt_at END
     WHERE id = %(id)s AND state = {delivery_pending} AND {lease_held}
    RETURNING 1
    """,
    lease_held=LEASE_HELD,
    **WEBHOOK_LITERALS,
)
DISABLE_SQL = compose(
    """
    UPDATE webhook_subscriptions SET state = {subscription_disabled}, disabled_reason = %s,
           lease_owner = NULL, lease_expires_at = NULL
     WHERE id = %s AND lease_owner = %s AND state = {subscription_active} RETURNING id
    """,
    **WEBHOOK_LITERALS,
)
FAIL_PENDING_SQL = compose(
    "UPDATE webhook_deliveries SET state = {delivery_failed}, last_error = coalesce(last_error, %s)"
    " WHERE subscription_id = %s AND state = {delivery_pending}",
    **WEBHOOK_LITERALS,
)


@dataclass(frozen=True, slots=True)
class SubscriptionRow:
    id: uuid.UUID
    tenant_id: int
    collection_id: int
    collection: str
    url: str
    event_types: list[str]
    description: str
    state: str
    disabled_reason: str | None
    created_at: dt.datetime
    lost_events: int
    pending_deliveries: int
    failed_deliveries: int


@dataclass(frozen=True, slots=True)
class LeasedSubscription:
    """What the dispatcher needs of a subscription it serves (secret included)."""

    id: uuid.UUID
    tenant_id: int
    collection_id: int
    collection: str
    url: str
    secret: str
    event_types: list[str]
    cursor_txid: int
    cursor_event_id: int

    @property
    def cursor(self) -> EventCursor:
        return EventCursor(self.cursor_txid, self.cursor_event_id)


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    seq: int
    id: uuid.UUID
    subscription_id: uuid.UUID
    event_id: int
    event_txid: int
    document_id: uuid.UUID
    event_type: str
    payload: str
    event_time: dt.datetime
    state: str
    attempts: int
    next_attempt_at: dt.datetime
    last_status_code: int | None
    last_error: str | None
    delivered_at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class NewDelivery:
    event_id: int
    event_txid: int
    document_id: uuid.UUID
    event_type: str
    payload: dict[str, Any]
    event_time: dt.datetime


class SubscriptionLeaseLost(Exception):
    """The subscription is no longer this replica's (taken over, deleted or disabled)."""


class WebhookStore:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.pool = pool

    # ------------------------------------------------------------ management (tenant-scoped)

    async def create(
        self,
        tenant_id: int,
        collection: str,
        url: str,
        event_types: Sequence[str],
        description: str,
        secret: str,
        max_per_collection: int,
    ) -> SubscriptionRow:
        async with self.pool.connection() as conn, conn.transaction():
            row = await (await conn.execute(LOCK_COLLECTION_SQL, (tenant_id, collection))).fetchone()
            if row is None:
                raise NotFound(
                    f"collection {collection!r} does not exist", reason=Reason.COLLECTION_NOT_FOUND, collection=collection
                )
            collection_id = row[0]
            count = (await (await conn.execute(COUNT_SUBSCRIPTIONS_SQL, (collection_id,))).fetchone() or (0,))[0]
            if count >= max_per_collection:
                raise ResourceExhausted(
                    f"collection {collection!r} already has {count} webhooks, the most one collection may have",
                    reason=Reason.QUOTA_EXCEEDED,
                    quota="webhooks_per_collection",
                    limit=max_per_collection,
                )
            new = await (
                await conn.execute(
                    INSERT_SUBSCRIPTION_SQL,
                    (tenant_id, collection_id, url, list(event_types), description, secret),
                )
            ).fetchone()
            assert new is not None
            return await self._get(conn, tenant_id, new[0])

    async def get(self, tenant_id: int, subscription_id: uuid.UUID) -> SubscriptionRow:
        async with self.pool.connection() as conn:
            return await self._get(conn, tenant_id, subscription_id)

    async def _get(self, conn: Any, tenant_id: int, subscription_id: uuid.UUID) -> SubscriptionRow:
        cur = conn.cursor(row_factory=class_row(SubscriptionRow))
        await cur.execute(GET_SUBSCRIPTION_SQL, (tenant_id, subscription_id))
        row: SubscriptionRow | None = await cur.fetchone()
        if row is None:
            raise NotFound(f"webhook {subscription_id} does not exist", reason=Reason.WEBHOOK_NOT_FOUND)
        return row

    async def list_webhooks(
        self,
        tenant_id: int,
        collection: str | None,
        after: tuple[dt.datetime, uuid.UUID] | None,
        limit: int,
        scope: list[str] | None = None,
    ) -> list[SubscriptionRow]:
        """The tenant's webhooks (of one collection: NOT_FOUND when it does not exist), the check
        and the list in one snapshot: never the collection before a deletion and the list after."""
        async with self.pool.connection() as conn, one_snapshot(conn):
            if collection is not None:
                exists = await (await conn.execute(COLLECTION_EXISTS_SQL, (tenant_id, collection))).fetchone()
                if exists is None:
                    raise NotFound(
                        f"collection {collection!r} does not exist", reason=Reason.COLLECTION_NOT_FOUND, collection=collection
                    )
            cur = conn.cursor(row_factory=class_row(SubscriptionRow))
            await cur.execute(
                LIST_SUBSCRIPTIONS_SQL,
                {
                    "tenant": tenant_id,
                    "collection": collection,
                    "scope": scope,
                    "after_time": after[0] if after else None,
                    "after_id": after[1] if after else None,
                    "limit": limit,
                },
            )
            return await cur.fetchall()

    async def delete(self, tenant_id: int, subscription_id: uuid.UUID) -> int:
        """Delete the subscription and its deliveries; the number of pending ones dropped."""
        async with self.pool.connection() as conn, conn.transaction():
            row = await (await conn.execute(DELETE_SUBSCRIPTION_SQL, (tenant_id, subscription_id))).fetchone()
            if row is None or row[0] == 0:
                raise NotFound(f"webhook {subscription_id} does not exist", reason=Reason.WEBHOOK_NOT_FOUND)
            return int(row[1])

    async def rotate_secret(self, tenant_id: int, subscription_id: uuid.UUID, secret: str) -> SubscriptionRow:
        async with self.pool.connection() as conn, conn.transaction():
            row = await (await conn.execute(ROTATE_SECRET_SQL, (secret, tenant_id, subscription_id))).fetchone()
            if row is None:
                raise NotFound(f"webhook {subscription_id} does not exist", reason=Reason.WEBHOOK_NOT_FOUND)
            return await self._get(conn, tenant_id, subscription_id)

    async def list_deliveries(
        self, tenant_id: int, subscription_id: uuid.UUID, state: str | None, before_seq: int | None, limit: int
    ) -> list[DeliveryRow]:
        """The webhook's deliveries, newest first; the check and the list in one snapshot (never
        the webhook before a deletion and its deliveries after: an empty list)."""
        async with self.pool.connection() as conn, one_snapshot(conn):
            await self._get(conn, tenant_id, subscription_id)  # NOT_FOUND for another tenant's
            cur = conn.cursor(row_factory=class_row(DeliveryRow))
            await cur.execute(
                LIST_DELIVERIES_SQL,
                {"sub": subscription_id, "state": state, "before": before_seq, "limit": limit},
            )
            return await cur.fetchall()

    # ------------------------------------------------------------ the dispatcher (fenced by lease)

    async def renew(self, owner: str, ids: Sequence[uuid.UUID], lease_seconds: float) -> list[LeasedSubscription]:
        """Extend this replica's leases; the subscriptions it still holds, with their current
        url and secret (a rotation reaches the dispatcher here)."""
        if not ids:
            return []
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row(LeasedSubscription))
            await cur.execute(RENEW_LEASES_SQL, {"lease": lease_seconds, "ids": list(ids), "owner": owner})
            return await cur.fetchall()

    async def claim(self, owner: str, lease_seconds: float, limit: int) -> list[LeasedSubscription]:
        """Take the leases of active subscriptions nobody holds (or whose holder stopped renewing)."""
        if limit <= 0:
            return []
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row(LeasedSubscription))
            await cur.execute(CLAIM_LEASES_SQL, {"lease": lease_seconds, "owner": owner, "limit": limit})
            return await cur.fetchall()

    async def release(self, owner: str, ids: Sequence[uuid.UUID]) -> None:
        """Hand the leases back at shutdown, so another replica takes over at once."""
        if ids:
            async with self.pool.connection() as conn:
                await conn.execute(RELEASE_LEASES_SQL, (list(ids), owner))

    async def previous_statuses(self, event_ids: Sequence[int]) -> dict[int, str | None]:
        """For each event, its document's status in the document's previous event (None: none
        left). A document's events are written under its row lock, so their ids are in commit order."""
        async with self.pool.connection() as conn:
            rows = await (await conn.execute(PREVIOUS_STATUSES_SQL, (list(event_ids),))).fetchall()
            return {int(r[0]): r[1] for r in rows}

    async def known_descriptions(
        self,
        subscription_id: uuid.UUID,
        document_ids: Sequence[uuid.UUID],
    ) -> dict[uuid.UUID, Description]:
        """What this subscription's earlier deliveries said of documents that are gone (filename,
        source_uri, version, SHA-256): their rows, which events read it from, went with them."""
        async with self.pool.connection() as conn:
            rows = await (await conn.execute(KNOWN_DESCRIPTIONS_SQL, (subscription_id, list(document_ids)))).fetchall()
            return {
                r[0]: Description(
                    filename=r[1].get("filename") or "",
                    source_uri=r[1].get("source_uri") or "",
                    version=int(r[1].get("version") or 0),
                    content_sha256=r[1].get("content_sha256") or "",
                )
                for r in rows
                if r[1] and r[1].get("filename")
            }

    async def event_exists(self, event_id: int) -> bool:
        async with self.pool.connection() as conn:
            row = await (await conn.execute(EVENT_EXISTS_SQL, (event_id,))).fetchone()
            return row is not None

    async def append(
        self,
        owner: str,
        subscription_id: uuid.UUID,
        old: EventCursor,
        new: EventCursor,
        deliveries: Sequence[NewDelivery],
        lost_events: int = 0,
    ) -> None:
        """Move the subscription's cursor past a batch and write the batch's deliveries, in one
        statement (one round trip, atomic); SubscriptionLeaseLost when the cursor moved under us or the
        lease is gone."""
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute(
                    APPEND_SQL,
                    {
                        "new_txid": new.txid,
                        "new_id": new.event_id,
                        "lost": lost_events,
                        "subscription_id": subscription_id,
                        "owner": owner,
                        "old_txid": old.txid,
                        "old_id": old.event_id,
                        "event_ids": [d.event_id for d in deliveries],
                        "event_txids": [d.event_txid for d in deliveries],
                        "document_ids": [d.document_id for d in deliveries],
                        "event_types": [d.event_type for d in deliveries],
                        "payloads": [body_of(d.payload).decode() for d in deliveries],
                        "event_times": [d.event_time for d in deliveries],
                    },
                )
            ).fetchone()
            if row is None or row[0] == 0:
                raise SubscriptionLeaseLost(str(subscription_id))

    async def due(
        self, subscription_id: uuid.UUID, limit: int, busy: Sequence[uuid.UUID] = (), window: int = 1000
    ) -> tuple[list[DeliveryRow], float | None]:
        """The first pending delivery of each document not in `busy` (a request in flight), those
        due now (oldest first, at most `limit`), and the seconds until the next one that is not due
        yet (None: nothing waits). Only a document's first pending delivery is ever sent: in order
        per document. Only the subscription's `window` oldest pending deliveries are looked at, so
        a dead receiver's backlog costs a bounded scan (a document's first pending delivery is
        older than its others, so it is in the window whenever one of them is)."""
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=class_row(DeliveryRow))
            await cur.execute(DUE_SQL, {"sub": subscription_id, "limit": limit, "busy": list(busy), "window": window})
            rows = await cur.fetchall()
            wait = await (await conn.execute(NEXT_DUE_SQL, (subscription_id, window))).fetchone()
            return rows, (wait[0] if wait and wait[0] is not None else None)

    async def prune_deliveries(self, older_than_seconds: float, batch: int = 1000) -> int:
        """Delete delivered and failed deliveries older than the retention (a batch at a time)."""
        async with self.pool.connection() as conn:
            cur = await conn.execute(PRUNE_DELIVERIES_SQL, (older_than_seconds, batch))
            return cur.rowcount

    async def record_attempt(
        self,
        owner: str,
        delivery: DeliveryRow,
        *,
        delivered: bool,
        status_code: int | None,
        error: str | None,
        give_up: bool,
        retry_in: float,
    ) -> bool:
        """Write one attempt's outcome (fenced); False when the lease was lost meanwhile."""
        state = DeliveryState.DELIVERED if delivered else (DeliveryState.FAILED if give_up else DeliveryState.PENDING)
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute(
                    RECORD_ATTEMPT_SQL,
                    {
                        "state": str(state),
                        "code": status_code,
                        "error": error,
                        "retry_in": retry_in,
                        "id": delivery.id,
                        "subscription_id": delivery.subscription_id,
                        "owner": owner,
                    },
                )
            ).fetchone()
            return row is not None

    async def disable(self, owner: str, subscription_id: uuid.UUID, reason: str) -> None:
        """The receiver said 410 Gone: stop the subscription and give up its pending deliveries."""
        async with self.pool.connection() as conn, conn.transaction():
            row = await (await conn.execute(DISABLE_SQL, (reason, subscription_id, owner))).fetchone()
            if row is not None:
                await conn.execute(FAIL_PENDING_SQL, (reason, subscription_id))
