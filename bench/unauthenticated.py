"""The baseline for the cost of authentication: the same servers with the key check replaced
by a constant principal (tenant `default`). Benchmarks only; nothing in the services can
turn authentication off.

    python -m bench.unauthenticated search   # sluice-search without the key check
"""

from __future__ import annotations

import contextlib
import sys

from sluice_common import auth


@contextlib.contextmanager
def without_key_check(tenant_id: int = 1, tenant: str = "default"):
    """Every call is admitted as a principal of `tenant`, with the role its method needs."""
    original = auth.AuthInterceptor.admit

    async def admit(self, method, context):
        role = sorted(self.method_roles[method])[0]
        return auth.Principal("bench", auth.Role(role), tenant_id, tenant)

    auth.AuthInterceptor.admit = admit
    try:
        yield
    finally:
        auth.AuthInterceptor.admit = original


if __name__ == "__main__":
    if sys.argv[1:] != ["search"]:
        raise SystemExit("usage: python -m bench.unauthenticated search")
    from sluice_search.main import main

    with without_key_check():
        main()
