"""AsyncClient has what the sync Client has beyond documents and search: webhooks, administration
and `documents.sync_folder`, against the real services (the same answers as the sync client)."""

from __future__ import annotations

import asyncio

import auth_keys
import pytest
from sluice_client import AsyncClient, Client, MassDeleteRefused, NotFound, PermissionDenied, Unauthenticated


@pytest.fixture
async def aclient(services):
    async with AsyncClient(services.ingest, search_address=services.search, api_key=auth_keys.KEYS["client"]) as client:
        yield client


async def test_webhooks_in_asyncio(ingest_api_factory):
    api = ingest_api_factory(webhook_allow_private_networks=True)  # a receiver on this machine, never called here
    async with AsyncClient(api.address, api_key=auth_keys.KEYS["client"]) as aclient:
        await webhooks_round(aclient)


async def webhooks_round(aclient: AsyncClient) -> None:
    await aclient.collections.create("docs", embedder="hashing")
    created = await aclient.webhooks.create(
        "docs", "http://127.0.0.1:9/sluice", event_types=["document.ready"], description="ready documents"
    )
    assert created.secret and created.webhook.url == "http://127.0.0.1:9/sluice"
    fetched = await aclient.webhooks.get(created.webhook.id)
    assert fetched.id == created.webhook.id and fetched.raw.description == "ready documents"
    assert fetched.event_types == ["document.ready"]
    assert [w.id async for w in aclient.webhooks.list("docs")] == [created.webhook.id]
    rotated = await aclient.webhooks.rotate_secret(created.webhook.id)
    assert rotated.secret and rotated.secret != created.secret
    assert await aclient.webhooks.deliveries(created.webhook.id) == []
    assert await aclient.webhooks.delete(created.webhook.id) == 0
    with pytest.raises(NotFound):
        await aclient.webhooks.get(created.webhook.id)
    with pytest.raises(ValueError, match="unknown event type"):
        await aclient.webhooks.create("docs", "http://127.0.0.1:9/x", event_types=["document.nope"])


async def test_admin_in_asyncio(services):
    async with AsyncClient(services.ingest, api_key=auth_keys.KEYS["admin"]) as admin:
        tenant = await admin.admin.create_tenant("acme", max_documents=10)
        assert tenant.name == "acme"
        assert "acme" in [t.name for t in await admin.admin.list_tenants()]
        new = await admin.admin.create_key("acme", "client", name="ci")
        assert new.secret.startswith("slk_")
        assert new.key.id in [k.id for k in await admin.admin.list_keys("acme")]
        # The new key works for its tenant, and stops working once revoked.
        async with AsyncClient(services.ingest, api_key=new.secret) as acme:
            await acme.collections.create("acme-docs", embedder="hashing")
            await admin.admin.revoke_key(new.key.id)
            with pytest.raises(Unauthenticated):
                await acme.collections.get("acme-docs", timeout=5)
        with pytest.raises(ValueError, match="unknown role"):
            await admin.admin.create_key("acme", "superuser")
    async with AsyncClient(services.ingest, api_key=auth_keys.KEYS["client"]) as not_admin:
        with pytest.raises((PermissionDenied, Unauthenticated)):
            await not_admin.admin.list_tenants()


async def test_sync_folder_in_asyncio_gives_the_sync_clients_report(aclient, services, tmp_path):
    await aclient.collections.create("docs", embedder="hashing")
    folder = tmp_path / "handbook"
    (folder / "team").mkdir(parents=True)
    (folder / "a.md").write_text("# A\n\nabout leases\n")
    (folder / "b.md").write_text("# B\n\nabout workers\n")
    (folder / "team" / "c.md").write_text("# C\n\nabout retries\n")
    (folder / ".hidden.md").write_text("never synced\n")
    first = await aclient.documents.sync_folder("docs", folder, delete=True, timeout=120)
    assert first.ok, first.failed
    assert sorted(d.source_uri for d in first.new) == ["a.md", "b.md", "team/c.md"]
    assert all(d.status.name == "READY" for d in first.new)
    # A sync is bulk work; a plain upload is interactive unless it says bulk (docs/tenancy.md).
    assert {(await aclient.documents.get(d.id)).raw.priority for d in first.new} == {2}
    await aclient.collections.create("uploads", embedder="hashing")
    assert (await aclient.documents.upload("uploads", b"plain", filename="p.txt")).raw.priority == 1
    assert (await aclient.documents.upload("uploads", b"bulky", filename="q.txt", priority="bulk")).raw.priority == 2
    with pytest.raises(ValueError, match="interactive"):
        await aclient.documents.upload("uploads", b"x", filename="r.txt", priority="urgent")

    (folder / "a.md").write_text("# A\n\nabout leases, changed\n")
    (folder / "b.md").unlink()
    planned = []
    second = await aclient.documents.sync_folder(
        "docs", folder, delete=True, allow_mass_delete=True, timeout=120, on_plan=planned.append
    )
    assert second.ok, second.failed
    assert [d.source_uri for d in second.updated] == ["a.md"] and second.updated[0].version == 2
    assert second.unchanged == ["team/c.md"] and second.deleted == ["b.md"] and not second.new
    assert len(planned) == 1
    # The sync client sees what the async one left: nothing to do.
    with Client(services.ingest, api_key=auth_keys.KEYS["client"]) as client:
        third = client.documents.sync_folder("docs", folder, delete=True)
    assert (third.new, third.updated, third.deleted, sorted(third.unchanged)) == ([], [], [], ["a.md", "team/c.md"])
    # The mass-delete guard holds in asyncio too, before anything is sent.
    for path in (folder / "a.md", folder / "team" / "c.md"):
        path.unlink()
    (folder / "new.md").write_text("# New\n")
    with pytest.raises(MassDeleteRefused):
        await aclient.documents.sync_folder("docs", folder, delete=True, max_delete_share=0.1)
    assert sorted([d.source_uri async for d in aclient.documents.list("docs")]) == ["a.md", "team/c.md"]


async def test_reindex_cancel_and_wait_in_asyncio(aclient, services):
    """AsyncCollections.reindex and cancel_reindex, and AsyncDocuments.wait's on_change, which the
    asyncio client lacked (tests/clients/test_sdk_surface_parity.py found them)."""
    from sluice_client import FailedPrecondition

    await aclient.collections.create("docs", embedder="hashing")
    document = await aclient.documents.upload("docs", b"Leases expire when a worker stops renewing them.", filename="l.txt")
    seen = []
    ready = await aclient.documents.wait(document.id, timeout=60, on_change=lambda d: seen.append(d.status))
    assert str(ready.status).endswith("READY") and seen and seen[-1] == ready.status
    started = await aclient.collections.reindex("docs", embedder="hashing", dimensions=16)
    assert len(started.generations) == 2
    for _ in range(300):  # the scripted worker embeds the one document; the new generation switches
        current = await aclient.collections.get("docs")
        if current.embedder.dimensions == 16:
            break
        await asyncio.sleep(0.1)
    assert current.embedder.dimensions == 16
    with pytest.raises(FailedPrecondition) as nothing:
        await aclient.collections.cancel_reindex("docs")
    assert nothing.value.reason == "NO_REINDEX_IN_PROGRESS"
