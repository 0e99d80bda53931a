"""What the sources tests share: a SourceService client of the test tenant, and the sources
runner carried out in this thread's own event loop (the real Runner over its own pool, as the
`sluice-sources` process runs it)."""

from __future__ import annotations

import asyncio

import auth_keys
import psycopg
from ingest.helpers import Clients
from sluice.v1 import source_service_pb2 as src
from sluice.v1 import source_service_pb2_grpc
from sluice_common.channels import keyed_channel


class Sources:
    """SourceService and DocumentService stubs with one key (the default tenant's client key)."""

    def __init__(self, address: str, key: str | None = None) -> None:
        channel = keyed_channel(address, key) if key else auth_keys.channel(address)
        self.stub = source_service_pb2_grpc.SourceServiceStub(channel)
        self.clients = Clients(address)
        if key:
            self.clients.channel = channel
            from sluice.v1 import document_service_pb2_grpc

            self.clients.docs = document_service_pb2_grpc.DocumentServiceStub(channel)

    def create_folder(self, collection: str, path: str, glob: str = "", **fields) -> src.Source:
        return self.stub.CreateSource(
            src.CreateSourceRequest(
                source=src.Source(collection=collection, local_folder=src.LocalFolderSource(path=path, glob=glob), **fields)
            )
        )

    def sync(self, source: src.Source, allow_mass_delete: bool = False) -> src.SourceRun:
        return self.stub.SyncSource(src.SyncSourceRequest(name=source.name, allow_mass_delete=allow_mass_delete))

    def last_run(self, source: src.Source) -> src.SourceRun:
        return self.stub.GetSource(src.GetSourceRequest(name=source.name)).last_run


def runner_settings(database_url: str, **overrides):
    from sluice_ingest.settings import IngestSettings

    return IngestSettings(
        database_url=database_url,
        log_json=False,
        log_level="WARNING",
        source_allow_private_networks=True,
        source_lease_seconds=5.0,
        **overrides,
    )


async def _drain(settings) -> int:
    from sluice_common.db import open_pool
    from sluice_ingest.service.documents import DocumentUseCases
    from sluice_ingest.sources.runner import Runner
    from sluice_ingest.sources.store import RunStore
    from sluice_ingest.store import CollectionStore, DocumentStore

    pool = await open_pool(settings.database_url, max_size=8, name="test-sources")
    try:
        runner = Runner(
            settings,
            RunStore(pool, settings.source_lease_seconds),
            DocumentUseCases(DocumentStore(pool), CollectionStore(pool), settings),
        )
        runs = 0
        while await runner.run_once():
            runs += 1
        return runs
    finally:
        await pool.close()


def run_pending(database_url: str, **overrides) -> int:
    """Carry out every claimable run (in this thread), as one sources runner; how many."""
    return asyncio.run(_drain(runner_settings(database_url, **overrides)))


def live_documents(database_url: str, collection: str = "docs") -> dict[str, list[tuple[int, str]]]:
    """source_uri → [(version, content SHA-256)] of the collection's live documents."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT d.source_uri, d.version, d.content_sha256 FROM documents d JOIN collections c ON c.id = d.collection_id"
            " WHERE c.name = %s ORDER BY d.source_uri, d.version",
            (collection,),
        ).fetchall()
    live: dict[str, list[tuple[int, str]]] = {}
    for uri, version, sha in rows:
        live.setdefault(uri, []).append((version, sha))
    return live


def create_tenant_key(address: str, tenant: str, role: str, *, create: bool = True) -> str:
    """A key of `role` for `tenant` (created first when `create`), through AdminService."""
    from sluice.v1 import admin_service_pb2 as admin_pb2
    from sluice.v1 import admin_service_pb2_grpc

    admin = admin_service_pb2_grpc.AdminServiceStub(keyed_channel(address, auth_keys.KEYS["admin"]))
    if create:
        admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name=tenant)))
    role_value = admin_pb2.ApiKeyRole.Value("API_KEY_ROLE_" + role.upper())
    return admin.CreateApiKey(admin_pb2.CreateApiKeyRequest(tenant=tenant, role=role_value, name=f"test {role}")).secret
