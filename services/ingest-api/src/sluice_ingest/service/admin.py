"""Use cases of AdminService: tenants and API keys (admin keys only: the access table in
sluice_common.auth). A revoked key is also forgotten by this process's key cache at once."""

from __future__ import annotations

import re
from collections.abc import Callable

from sluice_common.auth import Role, key_id_of
from sluice_common.errors import InvalidArgument
from sluice_common.reasons import Reason

from ..domain import check_tenant_name
from ..ports import TenantsPort
from ..store.tenants import ApiKeyRow, QueueShare, Quota, TenantRow
from .collections import COLLECTION_NAME

MAX_KEY_NAME = 200
KEY_ID = re.compile(r"[a-z0-9]{12}")  # api_keys.id (migration 0004)
MAX_QUEUE_WEIGHT = 100
MAX_RUNNING_JOBS_CAP = 10_000
MAX_KEY_COLLECTIONS = 100
# A key that manages tenants or claims every tenant's jobs cannot be held to some collections.
UNSCOPABLE_ROLES = frozenset({Role.ADMIN, Role.WORKER})


def quota_of(max_documents: int, max_stored_bytes: int, max_collections: int) -> Quota:
    """A quota from its request fields (0: unlimited), refused when one is negative."""
    for value in (max_documents, max_stored_bytes, max_collections):
        if value < 0:
            raise InvalidArgument("quotas are 0 (unlimited) or more", reason=Reason.INVALID_QUOTA)
    return Quota(max_documents or None, max_stored_bytes or None, max_collections or None)


def queue_share_of(weight: int, max_running_jobs: int) -> QueueShare:
    """A queue share from its request fields (weight 0: 1; cap 0: none), refused out of range."""
    if not 0 <= weight <= MAX_QUEUE_WEIGHT:
        raise InvalidArgument(
            f"queue.weight is 1 to {MAX_QUEUE_WEIGHT} (0 means 1), not {weight}", reason=Reason.INVALID_QUEUE_SHARE
        )
    if not 0 <= max_running_jobs <= MAX_RUNNING_JOBS_CAP:
        raise InvalidArgument(
            f"queue.max_running_jobs is 1 to {MAX_RUNNING_JOBS_CAP} (0 means no cap), not {max_running_jobs}",
            reason=Reason.INVALID_QUEUE_SHARE,
        )
    return QueueShare(weight or 1, max_running_jobs or None)


def key_scope_of(role: Role, collections: tuple[str, ...]) -> tuple[str, ...]:
    """The sorted, distinct collections a new key is limited to (empty: every collection),
    refused on roles that cannot be scoped, past MAX_KEY_COLLECTIONS or on an invalid name."""
    if not collections:
        return ()
    if role in UNSCOPABLE_ROLES:
        raise InvalidArgument(
            f"a {role} key cannot be limited to collections; only client and reader keys can",
            reason=Reason.API_KEY_SCOPE_INVALID,
        )
    scope = tuple(sorted(set(collections)))
    if len(scope) > MAX_KEY_COLLECTIONS:
        raise InvalidArgument(
            f"a key is limited to at most {MAX_KEY_COLLECTIONS} collections, not {len(scope)}",
            reason=Reason.API_KEY_SCOPE_INVALID,
        )
    for name in scope:
        if not COLLECTION_NAME.match(name):
            raise InvalidArgument(
                f"{name[:64]!r} is not a collection name (1-63 lowercase letters, digits, '-' or '_')",
                reason=Reason.API_KEY_SCOPE_INVALID,
            )
    return scope


class AdminUseCases:
    def __init__(self, tenants: TenantsPort, forget_key: Callable[[str], None]) -> None:
        self.tenants = tenants
        self.forget_key = forget_key

    async def create_tenant(self, name: str, max_documents: int, max_stored_bytes: int, max_collections: int) -> TenantRow:
        """A tenant with its quotas (0: unlimited)."""
        quota = quota_of(max_documents, max_stored_bytes, max_collections)
        check_tenant_name(name)
        return await self.tenants.create_tenant(name, quota)

    async def update_tenant(self, name: str, quota: Quota | None, queue: QueueShare | None) -> TenantRow:
        """Replace a tenant's quota and/or queue share (None: unchanged); claims follow at once."""
        if not name:
            raise InvalidArgument("name is required", reason=Reason.MISSING_TENANT)
        check_tenant_name(name)
        return await self.tenants.update_tenant(name, quota, queue)

    async def list_tenants(self) -> list[TenantRow]:
        return await self.tenants.list_tenants()

    async def create_key(
        self, tenant: str, role: Role | None, name: str, collections: tuple[str, ...] = ()
    ) -> tuple[ApiKeyRow, str]:
        """A new key and its secret (the only time the secret exists), limited to `collections`
        when some are given (docs/tenancy.md, "Scoped keys")."""
        if role is None:
            raise InvalidArgument("role is required: ADMIN, CLIENT, READER or WORKER", reason=Reason.INVALID_ROLE)
        if not tenant:
            raise InvalidArgument("tenant is required", reason=Reason.MISSING_TENANT)
        if len(name) > MAX_KEY_NAME:
            raise InvalidArgument(f"a key's name is at most {MAX_KEY_NAME} characters", reason=Reason.INVALID_KEY_NAME)
        return await self.tenants.create_key(tenant, role, name, key_scope_of(role, collections))

    async def list_keys(self, tenant: str) -> list[ApiKeyRow]:
        return await self.tenants.list_keys(tenant or None)

    async def revoke_key(self, key: str) -> ApiKeyRow:
        if not key:
            raise InvalidArgument("id is required", reason=Reason.MISSING_ID)
        if not KEY_ID.fullmatch(key_id_of(key)):
            # Not quoted back: whatever was sent may be a secret or anything else.
            raise InvalidArgument(
                "id is a key's id (12 lowercase letters and digits), its prefix slk_<id>_ or the whole key",
                reason=Reason.INVALID_ID,
            )
        row = await self.tenants.revoke_key(key)
        self.forget_key(row.id)
        return row


__all__ = ["AdminUseCases"]
