"""PostgreSQL connections: URL conversion, an async pool with pgvector types registered.

Pools check each connection as it is handed out (`check_connection`, one empty round trip):
after a PostgreSQL restart the dead ones are dropped and replaced, instead of failing the
next few calls one after the other.
"""

from __future__ import annotations

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool


def sqlalchemy_url(url: str) -> str:
    """A libpq URL as SQLAlchemy wants it (psycopg 3 driver)."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError("database URL must start with postgresql://")


async def _configure(conn: psycopg.AsyncConnection) -> None:
    await register_vector_async(conn)


async def open_pool(url: str, *, min_size: int = 1, max_size: int = 10, name: str = "sluice") -> AsyncConnectionPool:
    pool = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name=name,
        configure=_configure,
        check=AsyncConnectionPool.check_connection,
        kwargs={"autocommit": True},
        open=False,
    )
    await pool.open(wait=True, timeout=30)
    return pool
