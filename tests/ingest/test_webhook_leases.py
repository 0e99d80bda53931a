"""The dispatcher's leases on subscriptions, against real PostgreSQL with real concurrency:
two replicas claiming at once split the subscriptions (never both), a lease is exclusive while
it is renewed, and a replica that stopped renewing (died) is taken over once its lease expires."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from sluice_common.db import open_pool
from sluice_ingest.domain import EventCursor
from sluice_ingest.webhooks.store import SubscriptionLeaseLost, WebhookStore

from .helpers import Clients

URL = "https://93.184.215.14/hook"


def subscriptions(database_url: str, count: int) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO webhook_subscriptions (tenant_id, collection_id, url, event_types, secret, cursor_txid,"
            " cursor_event_id) SELECT tenant_id, id, %s, ARRAY['document.ready'], 'whsec_AAAA', 0, 0"
            " FROM collections, generate_series(1, %s)",
            (URL, count),
        )


async def stores(database_url: str, count: int) -> list[WebhookStore]:
    return [WebhookStore(await open_pool(database_url, min_size=1, max_size=2, name=f"replica-{i}")) for i in range(count)]


def test_replicas_claiming_at_once_split_the_subscriptions_and_take_over_expired_leases(ingest_api, database_url):
    clients = Clients(ingest_api.address)
    clients.create_collection()
    clients.close()
    ingest_api.stop()  # its own dispatcher stays out of this
    subscriptions(database_url, 40)

    async def scenario() -> None:
        replicas = await stores(database_url, 4)
        try:
            for _ in range(5):  # several rounds of simultaneous claims, each replica asking for everything
                claimed = await asyncio.gather(*(r.claim(f"replica-{i}", 30, 40) for i, r in enumerate(replicas)))
                ids = [row.id for rows in claimed for row in rows]
                assert len(ids) == len(set(ids)), "a subscription was leased to two replicas"
                await asyncio.gather(
                    *(r.release(f"replica-{i}", [row.id for row in rows]) for i, (r, rows) in enumerate(zip(replicas, claimed)))
                )
            assert len(ids) == 40
            # replica-0 holds everything for a short lease; the others get nothing while it lives.
            held = await replicas[0].claim("replica-0", 0.5, 40)
            assert len(held) == 40 and await replicas[1].claim("replica-1", 30, 40) == []
            renewed = await replicas[0].renew("replica-0", [row.id for row in held], 0.5)
            assert len(renewed) == 40
            # replica-0 dies (stops renewing): after the lease, replica-1 takes over...
            await asyncio.sleep(0.7)
            taken = await replicas[1].claim("replica-1", 30, 40)
            assert {row.id for row in taken} == {row.id for row in held}
            # ...and the dead one's late writes are fenced off.
            assert await replicas[0].renew("replica-0", [row.id for row in held], 0.5) == []
            row = held[0]
            with pytest.raises(SubscriptionLeaseLost):  # a write without the lease does not go through
                await replicas[0].append("replica-0", row.id, row.cursor, EventCursor(row.cursor_txid, 1), [])
            await replicas[1].append("replica-1", row.id, row.cursor, EventCursor(row.cursor_txid, 1), [])
        finally:
            for r in replicas:
                await r.pool.close()

    asyncio.run(scenario())
