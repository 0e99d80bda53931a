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


@dataclass(frozen=True)
class Quota:
    max_documents: int | None = None
    max_stored_bytes: int | None = None
    max_collections: int | None = None


@dataclass(frozen=True)
class TenantRow:
    name: str
    quota: Quota
    documents: int
    stored_bytes: int
    collections: int
    created_at: dt.datetime


@dataclass(frozen=True)
class ApiKeyRow:
    id: str
    tenant: str
    role: Role
    name: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None


_TENANT_SELECT = """
    SELECT t.name, t.max_documents, t.max_stored_bytes, t.max_collections, t.created_at,
           (SELECT count(*) FROM documents d WHERE d.tenant_id = t.id) AS documents,
           (SELECT coalesce(sum(size_bytes), 0) FROM documents d WHERE d.tenant_id = t.id) AS stored_bytes,
           (SELECT count(*) FROM collections c WHERE c.tenant_id = t.id) AS collections
    FROM tenants t
"""
_KEY_SELECT = """
    SELECT k.id, t.name AS tenant, k.role::text AS role, k.name, k.created_at, k.revoked_at
    FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
"""

TENANTS_SQL = _TENANT_SELECT + " ORDER BY t.name"
TENANT_BY_NAME_SQL = _TENANT_SELECT + " WHERE t.name = %s"
CREATE_TENANT_SQL = (
    "INSERT INTO tenants (name, max_documents, max_stored_bytes, max_collections) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (name) DO NOTHING RETURNING id"
)
CREATE_KEY_SQL = (
    "INSERT INTO api_keys (id, tenant_id, role, name, secret_sha256)"
    " SELECT %s, id, %s, %s, %s FROM tenants WHERE name = %s RETURNING id"
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
    )


def _key(row: dict[str, Any]) -> ApiKeyRow:
    return ApiKeyRow(row["id"], row["tenant"], Role(row["role"]), row["name"], row["created_at"], row["revoked_at"])


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

    async def create_key(self, tenant: str, role: Role, name: str = "") -> tuple[ApiKeyRow, str]:
        """A new key of `tenant` with `role`; returns it and its secret (the only time it exists)."""
        key: NewKey = generate_key()
        async with self.pool.connection() as conn, conn.transaction():
            row = await (
                await conn.execute(
                    CREATE_KEY_SQL,
                    (key.id, str(role), name, key.secret_sha256, tenant),
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


__all__ = ["ApiKeyRow", "Quota", "TenantRow", "TenantStore"]
