"""Who may call what: API keys, the access table, the key cache, the rate limit, the guard and
the one server interceptor, one module each.

- `keys`: the key format `slk_<id>_<secret>` (only the secret's SHA-256 is stored).
- `access`: roles and the table of the methods each may call.
- `principal`: the authenticated caller, for the servicer (`current_principal()`).
- `directory`: keys looked up in PostgreSQL, cached for under a second.
- `rate_limit`: the per-key token bucket and the wait a refused call is told (RetryInfo).
- `guard`: admits a call (key, role, tenant header, rate limit) or says why not.
- `interceptor`: `AuthInterceptor`, in front of every method of ingest-api and search.

Keys travel as `authorization: Bearer <key>`.
"""

from __future__ import annotations

from .access import METHOD_ROLES, OPEN_SERVICES, REFLECTION_SERVICES, Role
from .directory import KeyDirectory
from .guard import TENANT_HEADER, Guard, bearer_key
from .interceptor import AuthInterceptor
from .keys import KEY_PREFIX, NewKey, generate_key, key_id_of, parse_key, prefix_of
from .principal import Principal, current_principal
from .rate_limit import RateLimiter, describe_wait

__all__ = [
    "KEY_PREFIX",
    "METHOD_ROLES",
    "OPEN_SERVICES",
    "REFLECTION_SERVICES",
    "TENANT_HEADER",
    "AuthInterceptor",
    "Guard",
    "KeyDirectory",
    "NewKey",
    "Principal",
    "RateLimiter",
    "Role",
    "bearer_key",
    "current_principal",
    "describe_wait",
    "generate_key",
    "key_id_of",
    "parse_key",
    "prefix_of",
]
