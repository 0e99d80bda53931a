"""Who may make this call: the key from the metadata, authenticated, its role checked against the
access table, an admin's tenant header honoured, and the key's rate limit applied."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import Counter

from ..errors import PermissionDenied, RateLimited, Unauthenticated
from ..reasons import Reason
from .access import METHOD_ROLES, Role
from .directory import KeyDirectory
from .principal import Principal
from .rate_limit import RateLimiter, describe_wait

TENANT_HEADER = "x-sluice-tenant"
RATE_LIMITED_CALLS = Counter(
    "sluice_rate_limited_calls_total", "Calls refused by the per-key rate limit (RESOURCE_EXHAUSTED, RATE_LIMITED)"
)


def bearer_key(metadata: Iterable[tuple[str, str | bytes]] | None) -> tuple[str | None, str | None]:
    """(key, tenant header) from call metadata."""
    key = tenant = None
    for name, value in metadata or ():
        if isinstance(value, bytes):
            continue
        if name == "authorization":
            scheme, _, token = value.strip().partition(" ")
            key = token.strip() if scheme.lower() == "bearer" else ""
        elif name == TENANT_HEADER:
            tenant = value.strip()
    return key, tenant


class Guard:
    """Admits a call (returns its Principal) or raises the SluiceError that refuses it."""

    def __init__(
        self, directory: KeyDirectory, limiter: RateLimiter, method_roles: Mapping[str, frozenset[Role]] = METHOD_ROLES
    ) -> None:
        self.directory = directory
        self.limiter = limiter
        self.method_roles = method_roles

    async def admit(self, method: str, metadata: Iterable[tuple[str, str | bytes]] | None) -> Principal:
        key, tenant = bearer_key(metadata)
        if not key:
            raise Unauthenticated(
                "this call needs an API key: send `authorization: Bearer <key>` metadata", reason=Reason.API_KEY_MISSING
            )
        principal = await self.directory.authenticate(key)
        allowed = self.method_roles.get(method, frozenset())
        if principal.role not in allowed:
            raise PermissionDenied(
                f"a {principal.role} key may not call {method.rsplit('/', 1)[-1]}",
                reason=Reason.ROLE_NOT_ALLOWED,
                role=str(principal.role),
            )
        if tenant and tenant != principal.tenant:
            if principal.role != Role.ADMIN:
                raise PermissionDenied("only admin keys may act for another tenant", reason=Reason.TENANT_NOT_ALLOWED)
            principal = Principal(
                principal.key_id, principal.role, await self.directory.tenant_id(tenant), tenant, principal.collections
            )
        if principal.role != Role.WORKER:  # the worker fleet is paced by its leases, not by a budget
            wait = self.limiter.take(principal.key_id)
            if wait > 0:
                RATE_LIMITED_CALLS.inc()
                raise RateLimited(
                    f"too many calls with this API key (limit {self.limiter.rate:g} a second); retry in {describe_wait(wait)}",
                    retry_after=wait,
                    limit_per_second=f"{self.limiter.rate:g}",
                    burst=f"{self.limiter.burst:g}",
                )
        return principal


__all__ = ["TENANT_HEADER", "Guard", "bearer_key"]
