"""PostgreSQL connections: URL conversion, an async pool with pgvector types registered.

Pools check a connection as it is handed out when it has been idle for a while (one empty
round trip): after a PostgreSQL restart the dead ones are dropped and replaced, instead of
failing the next few calls one after the other. A connection in constant use is not checked
(that round trip was a fifth of a job cycle's statements, bench/ingest_bench.py): if the
server died under it, its one failing call answers UNAVAILABLE and the pool discards it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool


def sqlalchemy_url(url: str) -> str:
    """A libpq URL as SQLAlchemy wants it (psycopg 3 driver)."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError("database URL must start with postgresql://")


IDLE_CHECK_SECONDS = 1.0


async def _configure(conn: psycopg.AsyncConnection) -> None:
    await register_vector_async(conn)


async def mark_returned(conn: psycopg.AsyncConnection) -> None:
    """Pool `reset` hook: note when the connection was last in use (no round trip)."""
    conn.sluice_returned_at = time.monotonic()  # type: ignore[attr-defined]


async def check_if_idle(conn: psycopg.AsyncConnection) -> None:
    """Pool `check` hook: check connections idle for IDLE_CHECK_SECONDS or more."""
    if time.monotonic() - getattr(conn, "sluice_returned_at", 0.0) >= IDLE_CHECK_SECONDS:
        await AsyncConnectionPool.check_connection(conn)


async def open_pool(url: str, *, min_size: int = 1, max_size: int = 10, name: str = "sluice") -> AsyncConnectionPool:
    pool = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name=name,
        configure=_configure,
        check=check_if_idle,
        reset=mark_returned,
        kwargs={"autocommit": True},
        open=False,
    )
    await pool.open(wait=True, timeout=30)
    return pool


# A read answered from several statements sees one snapshot: never the rows of one commit beside
# those of the next (a generation switch, a version swap, a deletion; docs/contributing.md, Code).
# One statement opens it (a BEGIN, then a SET TRANSACTION, was one round trip more on every
# KEYWORD and HYBRID search: docs/search.md, "Latency at 100,000 chunks").
BEGIN_ONE_SNAPSHOT = b"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


@asynccontextmanager
async def one_snapshot(conn: psycopg.AsyncConnection) -> AsyncIterator[psycopg.AsyncConnection]:
    """The statements run inside see one snapshot: a REPEATABLE READ, READ ONLY transaction of
    their own, or the caller's transaction when one is already open on `conn`.

    Ended as psycopg's own transaction block ends one: COMMIT on the way out, ROLLBACK on an
    error, and an error of the ROLLBACK itself (a broken connection) does not hide the first;
    the pool discards a connection that is left in a failed state."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        yield conn
        return
    await conn.execute(BEGIN_ONE_SNAPSHOT)
    try:
        yield conn
    except BaseException:
        with contextlib.suppress(Exception):  # the first error is the one to report
            await conn.rollback()
        raise
    await conn.commit()
