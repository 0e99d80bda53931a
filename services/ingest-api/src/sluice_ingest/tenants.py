"""Tenants and API keys: the SQL of AdminService, and the bootstrap of a first set of keys.

A key's secret is generated here, returned once, and stored only as its SHA-256
(sluice_common.auth). Listing returns ids and prefixes, never secrets.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from sluice_common.auth import NewKey, Role, generate_key, key_id_of, parse_key
from sluice_common.errors import AlreadyExists, InvalidArgument, NotFound
from sluice_common.reasons import Reason

TENANT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
DEFAULT_TENANT = "default"


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


def _tenant(row: dict) -> TenantRow:
    return TenantRow(
        row["name"], Quota(row["max_documents"], row["max_stored_bytes"], row["max_collections"]),
        int(row["documents"]), int(row["stored_bytes"]), int(row["collections"]), row["created_at"],
    )


def _key(row: dict) -> ApiKeyRow:
    return ApiKeyRow(row["id"], row["tenant"], Role(row["role"]), row["name"], row["created_at"], row["revoked_at"])


def check_tenant_name(name: str) -> str:
    if not TENANT_NAME.match(name or ""):
        raise InvalidArgument(
            "tenant name must be 1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit",
            reason=Reason.INVALID_TENANT_NAME,
        )
    return name


class TenantStore:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self.pool = pool

    async def create_tenant(self, name: str, quota: Quota) -> TenantRow:
        check_tenant_name(name)
        async with self.pool.connection() as conn, conn.transaction():
            row = await (
                await conn.execute(
                    "INSERT INTO tenants (name, max_documents, max_stored_bytes, max_collections) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (name) DO NOTHING RETURNING id",
                    (name, quota.max_documents, quota.max_stored_bytes, quota.max_collections),
                )
            ).fetchone()
            if row is None:
                raise AlreadyExists(f"tenant {name!r} already exists", reason=Reason.TENANT_EXISTS, tenant=name)
            return await self._tenant(conn, name)

    async def list_tenants(self) -> list[TenantRow]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_TENANT_SELECT + " ORDER BY t.name")
            return [_tenant(r) for r in await cur.fetchall()]

    async def _tenant(self, conn: psycopg.AsyncConnection, name: str) -> TenantRow:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(_TENANT_SELECT + " WHERE t.name = %s", (name,))
        row = await cur.fetchone()
        if row is None:
            raise NotFound(f"tenant {name[:64]!r} does not exist", reason=Reason.TENANT_NOT_FOUND)
        return _tenant(row)

    async def create_key(self, tenant: str, role: Role, name: str = "") -> tuple[ApiKeyRow, str]:
        """A new key of `tenant` with `role`; returns it and its secret (the only time it exists)."""
        if len(name) > 200:
            raise InvalidArgument("a key's name is at most 200 characters", reason=Reason.INVALID_KEY_NAME)
        key: NewKey = generate_key()
        async with self.pool.connection() as conn, conn.transaction():
            row = await (
                await conn.execute(
                    "INSERT INTO api_keys (id, tenant_id, role, name, secret_sha256)"
                    " SELECT %s, id, %s, %s, %s FROM tenants WHERE name = %s RETURNING id",
                    (key.id, str(role), name, key.secret_sha256, tenant),
                )
            ).fetchone()
            if row is None:
                raise NotFound(f"tenant {tenant[:64]!r} does not exist", reason=Reason.TENANT_NOT_FOUND)
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_KEY_SELECT + " WHERE k.id = %s", (key.id,))
            return _key(await cur.fetchone()), key.secret

    async def list_keys(self, tenant: str | None) -> list[ApiKeyRow]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(
                _KEY_SELECT + " WHERE %(tenant)s::text IS NULL OR t.name = %(tenant)s ORDER BY k.created_at, k.id",
                {"tenant": tenant},
            )
            return [_key(r) for r in await cur.fetchall()]

    async def revoke_key(self, key: str) -> ApiKeyRow:
        key_id = key_id_of(key)
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute(
                "UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = %s", (key_id,)
            )
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(_KEY_SELECT + " WHERE k.id = %s", (key_id,))
            row = await cur.fetchone()
            if row is None:
                raise NotFound(f"API key {key_id[:12]!r} does not exist", reason=Reason.API_KEY_NOT_FOUND)
            return _key(row)


# ---------------------------------------------------------------- bootstrap (sync, for tools)


def key_is_valid(conn: psycopg.Connection, key: str, role: Role) -> bool:
    """True when `key` exists with `role`, is not revoked and its secret matches."""
    import hashlib
    import hmac

    parsed = parse_key(key)
    if parsed is None:
        return False
    row = conn.execute(
        "SELECT secret_sha256 FROM api_keys WHERE id = %s AND role = %s AND revoked_at IS NULL", (parsed[0], str(role))
    ).fetchone()
    return row is not None and hmac.compare_digest(bytes(row[0]), hashlib.sha256(parsed[1].encode()).digest())


def bootstrap_keys(
    database_url: str, existing: dict[str, str] | None = None, tenant: str = DEFAULT_TENANT
) -> dict[str, str]:
    """Keys for a first start: an admin, a client and a worker key of `tenant` (created if
    missing). Keys in `existing` (role → key) that are still valid are kept; the rest are new.
    Returns role → key."""
    existing = existing or {}
    check_tenant_name(tenant)
    keys: dict[str, str] = {}
    with psycopg.connect(database_url, autocommit=True) as conn, conn.transaction():
        conn.execute("INSERT INTO tenants (name) VALUES (%s) ON CONFLICT (name) DO NOTHING", (tenant,))
        (tenant_id,) = conn.execute("SELECT id FROM tenants WHERE name = %s", (tenant,)).fetchone()
        for role in (Role.ADMIN, Role.CLIENT, Role.WORKER):
            current = existing.get(str(role), "")
            if current and key_is_valid(conn, current, role):
                keys[str(role)] = current
                continue
            new = generate_key()
            conn.execute(
                "INSERT INTO api_keys (id, tenant_id, role, name, secret_sha256) VALUES (%s, %s, %s, %s, %s)",
                (new.id, tenant_id, str(role), f"bootstrap {role}", new.secret_sha256),
            )
            keys[str(role)] = new.secret
    return keys


def bootstrap_main(argv: list[str] | None = None) -> None:
    """`sluice-bootstrap`: create the first tenant and keys (docker-compose's one-shot service).

    Writes the keys as a credentials file (JSON, mode 0600) and, with --env-dir, one file per
    role (`admin_key`, `client_key`, `worker_key`) for services to read. Idempotent: keys
    already in the file that are still valid are kept.
    """
    import argparse
    import json
    import os
    from pathlib import Path

    from .settings import IngestSettings

    parser = argparse.ArgumentParser(prog="sluice-bootstrap", description=bootstrap_main.__doc__.split("\n\n")[0])
    parser.add_argument("--credentials", required=True, help="credentials file to write (JSON, mode 0600)")
    parser.add_argument("--tenant", default=DEFAULT_TENANT)
    parser.add_argument("--key-dir", help="also write admin_key, client_key and worker_key files here")
    args = parser.parse_args(argv)
    path = Path(args.credentials)
    try:
        existing = json.loads(path.read_text())
    except (OSError, ValueError):
        existing = {}
    keys = bootstrap_keys(IngestSettings().database_url, existing.get("keys", {}), args.tenant)
    write_private(path, json.dumps({"tenant": args.tenant, "keys": keys}, indent=2) + "\n")
    if args.key_dir:
        os.makedirs(args.key_dir, exist_ok=True)
        for role, key in keys.items():
            write_private(Path(args.key_dir) / f"{role}_key", key)
    print(f"sluice-bootstrap: tenant {args.tenant!r}, keys for {', '.join(sorted(keys))} in {path}")


def write_private(path, text: str, mode: int = 0o600) -> None:
    """Write a secret file readable by its owner only (created with that mode, never wider)."""
    import os

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


__all__ = ["ApiKeyRow", "Quota", "TenantRow", "TenantStore", "bootstrap_keys", "bootstrap_main", "write_private"]
