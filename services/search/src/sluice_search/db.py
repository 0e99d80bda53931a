"""search's connections: the read-only pool and its session settings, the role check, and the
tenant each session is held to.

Tenancy twice (docs/architecture.md#tenancy-and-access): every query names the caller's tenant in
its SQL, and runs on a session whose `sluice.tenant_id` is that tenant, which PostgreSQL's
row-level security policies for search's role filter on (migration 0004), so even a query that
forgot the tenant cannot cross it, and a session that set none sees nothing. The setting is made
per session, not per transaction: a connection remembers the tenant it was set to and is set again
only when the next query is another tenant's. Setting it in a transaction around every query cost
0.37 ms of a 1.0 ms query (bench/search_bench.py); this way a query stays one round trip.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from sluice_common.db import check_if_idle, mark_returned

from . import rows

_SET_TENANT = "SELECT set_config('sluice.tenant_id', %s, false)"


async def open_read_pool(
    url: str,
    *,
    min_size: int,
    max_size: int,
    ef_search: int,
    max_scan_tuples: int,
    statement_timeout_ms: int,
) -> AsyncConnectionPool:
    """A pool of read-only sessions tuned for filtered HNSW scans.

    Session settings rather than SET LOCAL per query: these connections belong to search
    alone, and one round trip per query is what keeps gRPC latency close to raw SQL. (Behind
    a transaction-mode pooler such as PgBouncer, session settings do not stick: use session
    pooling for search, or a direct connection to a replica.)
    """

    async def configure(conn: psycopg.AsyncConnection) -> None:
        await register_vector_async(conn)
        # The vector type's input function loads pgvector's library, which defines hnsw.*.
        await conn.execute("SELECT '[1]'::vector")
        await conn.execute("SET default_transaction_read_only = on")
        # pgvector applies WHERE after the HNSW scan; an iterative scan keeps walking the
        # graph until LIMIT rows passed the READY join and the filters (or the tuple budget
        # ran out: then the exact fallback answers, repository.py).
        await conn.execute("SET hnsw.iterative_scan = relaxed_order")
        await conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(int(ef_search))))
        await conn.execute(sql.SQL("SET hnsw.max_scan_tuples = {}").format(sql.Literal(int(max_scan_tuples))))
        await conn.execute(sql.SQL("SET statement_timeout = {}").format(sql.Literal(int(statement_timeout_ms))))
        # Pages of an index are as cheap to reach as the table's (SSD, or a cache that holds
        # them). At the default 4, the planner scanned every chunk for a KEYWORD query rather
        # than the GIN index's few thousand, and paid for every row's tsvector (keyword.py).
        await conn.execute("SET random_page_cost = 1.1")

    pool = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name="sluice-search",
        configure=configure,
        check=check_if_idle,  # drop connections a PostgreSQL restart killed (sluice_common.db)
        reset=mark_returned,
        kwargs={"autocommit": True, "prepare_threshold": 5, "application_name": "sluice-search"},
        open=False,
    )
    await pool.open(wait=True, timeout=30)
    return pool


@dataclass(slots=True)
class RoleRow:
    role_name: str
    bypasses_security: bool


ROLE_SQL = (
    "SELECT current_user AS role_name, r.rolsuper OR r.rolbypassrls"
    " OR pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = 'chunks'::regclass), 'USAGE')"
    " AS bypasses_security"
    " FROM pg_roles r WHERE r.rolname = current_user"
)


async def check_unprivileged(pool: AsyncConnectionPool) -> None:
    """search must be held by row-level security: refuse a role that bypasses it (a superuser,
    BYPASSRLS, or the tables' owner), whatever URL it was given."""
    async with pool.connection() as conn:
        row = await rows.fetch_one(conn, ROLE_SQL, None, rows.named(RoleRow))
    if row is None:  # pg_roles always holds current_user
        raise SystemExit("search could not read its own PostgreSQL role")
    if row.bypasses_security:
        raise SystemExit(
            f"search refuses to run as PostgreSQL role {row.role_name!r}: it bypasses row-level security (superuser, "
            "BYPASSRLS or the tables' owner). Give SLUICE_SEARCH_DATABASE_URL a login in role sluice_search_reader."
        )


class ConnectionSource(Protocol):
    """What the repository needs of a pool: an AsyncConnectionPool, or one behind
    consistency.GatedPool."""

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection]: ...


class TenantSessions:
    """Connections of `pool` that row-level security holds to a tenant (the module's docstring)."""

    def __init__(self, pool: ConnectionSource) -> None:
        self.pool = pool
        # The tenant each pooled session was last set to (missing: unknown), dropped with the connection.
        self._tenants: weakref.WeakKeyDictionary[psycopg.AsyncConnection, int] = weakref.WeakKeyDictionary()

    @asynccontextmanager
    async def session(self, tenant_id: int) -> AsyncIterator[psycopg.AsyncConnection]:
        """A connection that row-level security holds to `tenant_id`."""
        async with self.pool.connection() as conn:
            if self._tenants.get(conn) != tenant_id:
                self._tenants.pop(conn, None)  # unknown until the setting has succeeded
                await conn.execute(_SET_TENANT, (str(int(tenant_id)),))
                self._tenants[conn] = tenant_id
            yield conn
