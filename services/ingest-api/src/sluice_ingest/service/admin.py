"""Use cases of AdminService: tenants and API keys (admin keys only: the access table in
sluice_common.auth). A revoked key is also forgotten by this process's key cache at once."""

from __future__ import annotations

from collections.abc import Callable

from sluice_common.auth import Role
from sluice_common.errors import InvalidArgument
from sluice_common.reasons import Reason

from ..domain import check_tenant_name
from ..ports import TenantsPort
from ..store.tenants import ApiKeyRow, Quota, TenantRow

MAX_KEY_NAME = 200


class AdminUseCases:
    def __init__(self, tenants: TenantsPort, forget_key: Callable[[str], None]) -> None:
        self.tenants = tenants
        self.forget_key = forget_key

    async def create_tenant(self, name: str, max_documents: int, max_stored_bytes: int, max_collections: int) -> TenantRow:
        """A tenant with its quotas (0: unlimited)."""
        for value in (max_documents, max_stored_bytes, max_collections):
            if value < 0:
                raise InvalidArgument("quotas are 0 (unlimited) or more", reason=Reason.INVALID_QUOTA)
        check_tenant_name(name)
        return await self.tenants.create_tenant(
            name, Quota(max_documents or None, max_stored_bytes or None, max_collections or None)
        )

    async def list_tenants(self) -> list[TenantRow]:
        return await self.tenants.list_tenants()

    async def create_key(self, tenant: str, role: Role | None, name: str) -> tuple[ApiKeyRow, str]:
        """A new key and its secret (the only time the secret exists)."""
        if role is None:
            raise InvalidArgument("role is required: ADMIN, CLIENT, READER or WORKER", reason=Reason.INVALID_ROLE)
        if not tenant:
            raise InvalidArgument("tenant is required", reason=Reason.MISSING_TENANT)
        if len(name) > MAX_KEY_NAME:
            raise InvalidArgument(f"a key's name is at most {MAX_KEY_NAME} characters", reason=Reason.INVALID_KEY_NAME)
        return await self.tenants.create_key(tenant, role, name)

    async def list_keys(self, tenant: str) -> list[ApiKeyRow]:
        return await self.tenants.list_keys(tenant or None)

    async def revoke_key(self, key: str) -> ApiKeyRow:
        if not key:
            raise InvalidArgument("id is required", reason=Reason.MISSING_ID)
        row = await self.tenants.revoke_key(key)
        self.forget_key(row.id)
        return row


__all__ = ["AdminUseCases"]
