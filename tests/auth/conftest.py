"""Fixtures of the access-control tests: a second tenant with its own keys, real servers."""

from __future__ import annotations

from dataclasses import dataclass

import auth_keys
import pytest
from sluice.v1 import admin_service_pb2 as admin_pb2
from sluice.v1 import admin_service_pb2_grpc
from sluice_common.channels import keyed_channel

ROLE_PROTO = {
    "admin": admin_pb2.API_KEY_ROLE_ADMIN,
    "client": admin_pb2.API_KEY_ROLE_CLIENT,
    "reader": admin_pb2.API_KEY_ROLE_READER,
    "worker": admin_pb2.API_KEY_ROLE_WORKER,
}


def admin_stub(address: str) -> admin_service_pb2_grpc.AdminServiceStub:
    return admin_service_pb2_grpc.AdminServiceStub(keyed_channel(address, auth_keys.KEYS["admin"]))


def create_key(address: str, tenant: str, role: str) -> str:
    response = admin_stub(address).CreateApiKey(
        admin_pb2.CreateApiKeyRequest(tenant=tenant, role=ROLE_PROTO[role], name=f"test {role}")
    )
    return response.secret


def create_tenant(address: str, name: str, **quota) -> None:
    admin_stub(address).CreateTenant(
        admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name=name, quota=admin_pb2.TenantQuota(**quota)))
    )


@dataclass
class Tenant:
    name: str
    keys: dict[str, str]


@pytest.fixture
def tenant_b(ingest_api) -> Tenant:
    """Tenant `b` with a client and a reader key (tenant `default`'s keys are auth_keys.KEYS)."""
    create_tenant(ingest_api.address, "b")
    return Tenant("b", {role: create_key(ingest_api.address, "b", role) for role in ("client", "reader")})


@pytest.fixture
def search_server_address(database_url):
    """The real search service (as its read-only login) on this test's database."""
    from search_server import RunningSearch

    search = RunningSearch(database_url)
    yield search.address
    search.stop()
