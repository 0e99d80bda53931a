"""The authenticated caller of the RPC being served, set by the interceptor for the servicer."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from ..errors import Unauthenticated
from ..reasons import Reason
from .access import Role


@dataclass(frozen=True)
class Principal:
    """The authenticated caller: which key, which role, acting in which tenant."""

    key_id: str
    role: Role
    tenant_id: int
    tenant: str


_current: contextvars.ContextVar[Principal] = contextvars.ContextVar("sluice_principal")


def current_principal() -> Principal:
    """The caller of the RPC being served (set by AuthInterceptor before the servicer runs)."""
    try:
        return _current.get()
    except LookupError:  # pragma: no cover - a servicer outside the interceptor is a wiring bug
        raise Unauthenticated("the call was not authenticated", reason=Reason.API_KEY_MISSING) from None


__all__ = ["Principal", "current_principal"]
