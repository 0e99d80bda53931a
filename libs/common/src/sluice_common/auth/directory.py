"""Keys looked up in PostgreSQL and cached briefly, so a revocation reaches every process within a second."""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from ..errors import NotFound, Unauthenticated
from ..reasons import Reason
from .access import Role
from .keys import parse_key, prefix_of
from .principal import Principal


@dataclass(frozen=True)
class _KeyRecord:
    tenant_id: int
    tenant: str
    role: Role
    secret_sha256: bytes
    revoked: bool
    collections: frozenset[str] | None  # None: every collection of the tenant


_DUMMY_HASH = hashlib.sha256(b"no such key").digest()


class KeyDirectory:
    """Looks keys up in PostgreSQL, caching each answer for `cache_seconds` (≤ 1 s, so a
    revocation reaches every process within a second without a listener of its own). The
    secret's hash is compared in constant time."""

    def __init__(self, pool: AsyncConnectionPool, *, cache_seconds: float = 0.5, max_entries: int = 100_000) -> None:
        self._pool = pool
        self._ttl = cache_seconds
        self._max = max_entries
        self._keys: dict[str, tuple[float, _KeyRecord | None]] = {}
        self._tenants: dict[str, tuple[float, int | None]] = {}
        # Whole keys verified within the TTL, so a hot key costs one dict lookup per call.
        self._verified: dict[str, tuple[float, Principal]] = {}

    async def authenticate(self, key: str) -> Principal:
        now = time.monotonic()
        verified = self._verified.get(key)
        if verified is not None and verified[0] > now:
            return verified[1]
        principal = await self._authenticate(key)
        if len(self._verified) >= self._max:
            self._verified.clear()
        self._verified[key] = (self._keys[principal.key_id][0], principal)  # expires with its record
        return principal

    async def _authenticate(self, key: str) -> Principal:
        parsed = parse_key(key)
        if parsed is None:
            raise Unauthenticated("the API key is malformed; keys look like slk_<id>_<secret>", reason=Reason.API_KEY_INVALID)
        key_id, secret = parsed
        record = await self._record(key_id)
        presented = hashlib.sha256(secret.encode()).digest()
        matches = hmac.compare_digest(presented, record.secret_sha256 if record else _DUMMY_HASH)
        if record is None or not matches or record.revoked:
            raise Unauthenticated("the API key is not valid (unknown or revoked)", reason=Reason.API_KEY_INVALID)
        return Principal(key_id, record.role, record.tenant_id, record.tenant, record.collections)

    async def tenant_id(self, name: str) -> int:
        now = time.monotonic()
        cached = self._tenants.get(name)
        if cached is None or cached[0] <= now:
            async with self._pool.connection() as conn:
                row = await (await conn.execute("SELECT id FROM tenants WHERE name = %s", (name,))).fetchone()
            if len(self._tenants) >= self._max:
                self._tenants.clear()
            cached = (now + self._ttl, row[0] if row else None)
            self._tenants[name] = cached
        if cached[1] is None:
            raise NotFound(f"tenant {name[:64]!r} does not exist", reason=Reason.TENANT_NOT_FOUND)
        return cached[1]

    def forget(self, key_id: str) -> None:
        """Drop a key from this process's cache at once (after a revocation here)."""
        self._keys.pop(key_id, None)
        for key in [k for k in self._verified if k.startswith(prefix_of(key_id))]:
            del self._verified[key]

    async def _record(self, key_id: str) -> _KeyRecord | None:
        now = time.monotonic()
        cached = self._keys.get(key_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        async with self._pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT k.tenant_id, t.name, k.role::text, k.secret_sha256, k.revoked_at IS NOT NULL, k.collections"
                    " FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.id = %s",
                    (key_id,),
                )
            ).fetchone()
        record = (
            _KeyRecord(row[0], row[1], Role(row[2]), bytes(row[3]), row[4], None if row[5] is None else frozenset(row[5]))
            if row
            else None
        )
        if len(self._keys) >= self._max:
            self._keys.clear()
        self._keys[key_id] = (now + self._ttl, record)
        return record


__all__ = ["KeyDirectory"]
