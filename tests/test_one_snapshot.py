"""sluice_common.db.one_snapshot: one REPEATABLE READ, READ ONLY transaction opened by one
statement, ended whatever happens inside, and the caller's transaction reused when one is open
(docs/contributing.md, Code: "A read answered from several statements sees one snapshot")."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from sluice_common.db import one_snapshot


async def test_the_statements_inside_share_one_read_only_snapshot_and_the_transaction_ends(database_url):
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        async with one_snapshot(conn):
            assert conn.info.transaction_status == TransactionStatus.INTRANS
            level = await (await conn.execute("SHOW transaction_isolation")).fetchone()
            read_only = await (await conn.execute("SHOW transaction_read_only")).fetchone()
            first = await (await conn.execute("SELECT pg_current_snapshot()::text")).fetchone()
            # Another session commits between two statements: the snapshot does not move.
            async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as other:
                await other.execute("CREATE TABLE one_snapshot_probe (n int)")
            seen = await (await conn.execute("SELECT count(*) FROM pg_class WHERE relname = 'one_snapshot_probe'")).fetchone()
            second = await (await conn.execute("SELECT pg_current_snapshot()::text")).fetchone()
        assert (level, read_only) == (("repeatable read",), ("on",))
        assert seen == (0,)
        assert first == second
        assert conn.info.transaction_status == TransactionStatus.IDLE
        # Outside, the session is autocommit again and sees the commit.
        assert await (await conn.execute("SELECT count(*) FROM pg_class WHERE relname = 'one_snapshot_probe'")).fetchone() == (1,)


async def test_an_error_inside_rolls_back_and_is_the_one_reported(database_url):
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            async with one_snapshot(conn):
                await conn.execute("SELECT 1 / 0")
        assert conn.info.transaction_status == TransactionStatus.IDLE
        with pytest.raises(LookupError):
            async with one_snapshot(conn):
                await conn.execute("SELECT 1")
                raise LookupError("not a database error")
        assert conn.info.transaction_status == TransactionStatus.IDLE
        # A write inside is refused (READ ONLY), and the connection is usable afterwards.
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            async with one_snapshot(conn):
                await conn.execute("CREATE TABLE one_snapshot_refused (n int)")
        assert await (await conn.execute("SELECT 1")).fetchone() == (1,)


async def test_inside_a_callers_transaction_it_is_that_transaction(database_url):
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        async with conn.transaction():
            await conn.execute("CREATE TEMP TABLE mine (n int)")
            async with one_snapshot(conn):
                # The caller's READ COMMITTED, read-write transaction: its uncommitted table is seen.
                assert await (await conn.execute("SELECT count(*) FROM mine")).fetchone() == (0,)
                level = await (await conn.execute("SHOW transaction_isolation")).fetchone()
            assert conn.info.transaction_status == TransactionStatus.INTRANS
        assert level == ("read committed",)
