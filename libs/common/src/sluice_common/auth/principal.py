"""The authenticated caller of the RPC being served, set by the interceptor for the servicer."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from ..errors import Unauthenticated
from ..reasons import Reason
from .access import Role


@dataclass(frozen=True)
class Principal:
    """The authenticated caller: which key, which role, acting in which tenant, limited to which
    collections (None: every collection of the tenant; docs/tenancy.md, "Scoped keys")."""

    key_id: str
    role: Role
    tenant_id: int
    tenant: str
    collections: frozenset[str] | None = None

    def may_see(self, collection: str) -> bool:
        """Whether the key's scope holds `collection`; outside it, a collection is NOT_FOUND."""
        return self.collections is None or collection in self.collections

    @property
    def scope(self) -> list[str] | None:
        """The scope as a query parameter: the collection names, or None for every collection."""
        return None if self.collections is None else sorted(self.collections)


_current: contextvars.ContextVar[Principal] = contextvars.ContextVar("sluice_principal")


def current_principal() -> Principal:
    """The caller of the RPC being served (set by AuthInterceptor before the servicer runs)."""
    try:
        return _current.get()
    except LookupError:  # pragma: no cover - a servicer outside the interceptor is a wiring bug
        raise Unauthenticated("the call was not authenticated", reason=Reason.API_KEY_MISSING) from None


__all__ = ["Principal", "current_principal"]
