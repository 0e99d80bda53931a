"""Tenants and API keys: the SQL of AdminService.

A key's secret is generated here, returned once, and stored only as its SHA-256
(sluice_common.auth). Listing returns ids and prefixes, never secrets.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row
from sluice_common.auth import NewKey, Role, generate_key, key_id_of
from sluice_common.errors import AlreadyExists, NotFound
from sluice_common.reasons import Reason

from .common import StoreBase
from .literals import compose


@dataclass(frozen=True)
class Quota:
    max_documents: int | None = None
    max_stored_bytes: int | None = None
    max_collections: int | None = None


@dataclass(frozen=True)
class QueueShare:
    """A tenant's share of the workers (docs/tenancy.md, "Fair queues")."""

    weight: int = 1
    max_running_jobs: int | None = None  # None: no cap


@dataclass(frozen=True)
class TenantRow:
    name: str
    quota: Quota
    documents: int
    stored_bytes: int
    collections: int
    created_at: dt.datetime
    queue: QueueShare = QueueShare()


@dataclass(frozen=True)
class ApiKeyRow:
    id: str
    tenant: str
    role: Role
    name: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None
    collections: tuple[str, ...] = ()  # empty: every collection of the tenant (docs/tenancy.md, "Scoped keys")


_TENANT_SELECT = """
    SELECT t.name, t.max_documents, t.max_stored_bytes, t.max_collections, t.created_at, t.queue_weight, t.max_running_jobs,
           (SELECT count(*) FROM documents d WHERE d.tenant_id = t.id) AS documents,
           (SELECT coalesce(sum(size_bytes), 0) FROM documents d WHERE d.tenant_id = t.id) AS stored_bytes,
           (SELECT count(*) FROM collections c WHERE c.tenant_id = t.id) AS collections
    FROM tenants t
"""
_KEY_SELECT = """
    SELECT k.id, t.name AS tenant, k.role::text AS role, k.name, k.created_at, k.revoked_at, k.collections
    FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
"""

TENANTS_SQL = _TENANT_SELECT + " ORDER BY t.name"
TENANT_BY_NAME_SQL = _TENANT_SELECT + " WHERE t.name = %s"
CREATE_TENANT_SQL = (
    "INSERT INTO tenants (name, max_documents, max_stored_bytes, max_collections) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (name) DO NOTHING RETURNING id"
)
CREATE_KEY_SQL = (
    "INSERT INTO api_keys (id, tenant_id, role, name, secret_sha256, collections)"
    " SELECT %s, id, %s, %s, %s, %s FROM tenants WHERE name = %s RETURNING id"
)
# UpdateTenant: a part given as NULL keeps its value (%(quota)s / %(queue)s say which parts change).
UPDATE_TENANT_SQL = """
    UPDATE tenants SET
        max_documents = CASE WHEN %(quota)s THEN %(max_documents)s ELSE max_documents END,
        max_stored_bytes = CASE WHEN %(quota)s THEN %(max_stored_bytes)s ELSE max_stored_bytes END,
        max_collections = CASE WHEN %(quota)s THEN %(max_collections)s ELSE max_collections END,
        queue_weight = CASE WHEN %(queue)s THEN %(weight)s ELSE queue_weight END,
        max_running_jobs = CASE WHEN %(queue)s THEN %(max_running_jobs)s ELSE max_running_jobs END
    WHERE name = %(name)s
    RETURNING id
"""
# Jobs waiting for a tenant whose cap was set or lifted queue apart or together again (migration
# 0032): the capped ones are claimed under the tenant's claim lock.
MARK_CAPPED_JOBS_SQL = compose(
    "UPDATE ingestion_jobs SET capped = %(capped)s WHERE tenant_id = %(tenant)s AND status = {job_pending}"
    " AND capped <> %(capped)s"
)
KEY_BY_ID_SQL = _KEY_SELECT + " WHERE k.id = %s"
KEYS_SQL = _KEY_SELECT + " WHERE %(tenant)s::text IS NULL OR t.name = %(tenant)s ORDER BY k.created_at, k.id"
REVOKE_KEY_SQL = "UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = %s"


def _tenant(row: dict[str, Any]) -> TenantRow:
    return TenantRow(
        row["name"],
        Quota(row["max_documents"], row["max_stored_bytes"], row["max_collections"]),
        int(row["documents"]),
        int(row["stored_bytes"]),
        int(row["collections"]),
        row["created_at"],
        QueueShare(row["queue_weight"], row["max_running_jobs"]),
    )


def _key(row: dict[str, Any]) -> ApiKeyRow:
    return ApiKeyRow(
        row["id"],
        row["tenant"],
        Role(row["role"]),
        row["name"],
        row["created_at"],
        row["revoked_at"],
        tuple(row["collections"] or ()),
    )


class TenantStore(StoreBase):
    """Tenants and API keys: the SQL of AdminService (its use cases check the arguments)."""

    async def create_tenant(self, name: str, quota: Quota) -> TenantRow:
        async with self.pool.connection() as conn, conn.transaction():
            row = await (
                await conn.execute(
                    CREATE_TENANT_SQL,
                    (name, quota.max_documents, quota.max_stored_bytes, quota.max_collections),
                )
            ).fetchone()
            if row is None:
                raise AlreadyExists(f"tenant {name!r} already exists", reason=Reason.TENANT_EXISTS, tenant=name)
            return await self._tenant(conn, name)

    async def update_tenant(self, name: str, quota: Quota | None, queue: QueueShare | None) -> TenantRow:
        """Replace a tenant's quota and/or queue share; None keeps that part as it is."""
        q = quota or Quota()
        share = queue or QueueShare()
        params = {
            "name": name,
            "quota": quota is not None,
            "max_documents": q.max_documents,
            "max_stored_bytes": q.max_stored_bytes,
            "max_collections": q.max_collections,
            "queue": queue is not None,
            "weight": share.weight,
            "max_running_jobs": share.max_running_jobs,
        }
        async with self.pool.connection() as conn, conn.transaction():
            row = await (await conn.execute(UPDATE_TENANT_SQL, params)).fetchone()
            if row is None:
                raise NotFound(f"tenant {name[:64]!r} does not exist", reason=Reason.TENANT_NOT_FOUND)
            if queue is not None:
                await conn.execute(MARK_CAPPED_JOBS_SQL, {"tenant": row[0], "capped": queue.max_running_jobs is not None})
            return await self._tenant(conn, name)

    async def list_tenants(self) -> list[TenantRow]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(TENANTS_SQL)
            return [_tenant(r) for r in await cur.fetchall()]

    async def _tenant(self, conn: psycopg.AsyncConnection, name: str) -> TenantRow:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(TENANT_BY_NAME_SQL, (name,))
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"tenant {name[:64]!r} does not exist", reason=Reason.TENANT_NOT_FOUND)
        return _tenant(row)

    async def create_key(
        self, tenant: str, role: Role, name: str = "", collections: tuple[str, ...] = ()
    ) -> tuple[ApiKeyRow, str]:
        """A new key of `tenant` with `role`, limited to `collections` when some are given
        (stored as NULL when none: every collection); returns it and its secret (the only time it exists)."""
        key: NewKey = generate_key()
        async with self.pool.connection() as conn, conn.transaction():
            row = await (
                await conn.execute(
                    CREATE_KEY_SQL,
                    (key.id, str(role), name, key.secret_sha256, list(collections) or None, tenant),
                )
            ).fetchone()
            if row is None:
                raise NotFound(f"tenant {tenant[:64]!r} does not exist", reason=Reason.TENANT_NOT_FOUND)
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(KEY_BY_ID_SQL, (key.id,))
            created = await cur.fetchone()
            assert created is not None  # inserted by this transaction
            return _key(created), key.secret

    async def list_keys(self, tenant: str | None) -> list[ApiKeyRow]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(KEYS_SQL, {"tenant": tenant})
            return [_key(r) for r in await cur.fetchall()]

    async def revoke_key(self, key: str) -> ApiKeyRow:
        key_id = key_id_of(key)
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute(REVOKE_KEY_SQL, (key_id,))
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(KEY_BY_ID_SQL, (key_id,))
            row = await cur.fetchone()
            if row is None:
                raise NotFound(f"API key {key_id[:12]!r} does not exist", reason=Reason.API_KEY_NOT_FOUND)
            return _key(row)


__all__ = ["ApiKeyRow", "QueueShare", "Quota", "TenantRow", "TenantStore"]
