"""An admin key acts for another tenant over HTTP as over gRPC: the gateway forwards the
`x-sluice-tenant` header with the key (docs/http.md, "Keys, limits and TLS"), and the backends
honour it for an admin key only."""

from __future__ import annotations

import auth_keys
import httpx
from sluice.v1 import admin_service_pb2 as admin_pb2
from sluice.v1 import admin_service_pb2_grpc
from sluice_common.channels import keyed_channel

from gateway.conftest import key_headers

CREATE = "/sluice.v1.DocumentService/CreateCollection"
LIST = "/sluice.v1.DocumentService/ListCollections"
WATCH_DOCUMENT = "/sluice.v1.DocumentService/WatchDocument"


def collection_names(http: httpx.Client, **headers: str) -> list[str]:
    response = http.post(LIST, json={}, headers=headers)
    assert response.status_code == 200, response.text
    return [c["name"] for c in response.json().get("collections", [])]


def test_an_admin_key_acts_for_the_tenant_it_names(stack, http):
    admin_service_pb2_grpc.AdminServiceStub(keyed_channel(stack.ingest, auth_keys.KEYS["admin"])).CreateTenant(
        admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="acme"))
    )
    as_acme = {**key_headers("admin"), "x-sluice-tenant": "acme"}
    created = http.post(
        CREATE, json={"collection": {"name": "acme-docs", "embedder": {"provider": "EMBEDDER_PROVIDER_HASHING"}}}, headers=as_acme
    )
    assert created.status_code == 200, created.text
    # The collection is acme's: listed for acme, not for the default tenant the keys belong to.
    assert collection_names(http, **as_acme) == ["acme-docs"]
    assert "acme-docs" not in collection_names(http)
    assert "acme-docs" not in collection_names(http, **key_headers("admin"))
    # The upload path and a server stream carry it too.
    uploaded = http.post(
        "/v1/collections/acme-docs/documents",
        params={"filename": "a.txt"},
        content=b"acme's notes",
        headers={**as_acme, "Content-Type": "text/plain"},
    )
    assert uploaded.status_code == 200, uploaded.text
    with http.stream("POST", WATCH_DOCUMENT, json={"id": uploaded.json()["id"]}, headers=as_acme) as watch:
        assert watch.status_code == 200
        first = next(line for line in watch.iter_lines() if line.startswith("data:"))
        assert uploaded.json()["id"] in first
    assert http.post(WATCH_DOCUMENT, json={"id": uploaded.json()["id"]}).status_code == 404  # not the default tenant's
    # A client key may not name another tenant; a tenant that does not exist is not found.
    refused = http.post(LIST, json={}, headers={"x-sluice-tenant": "acme"})
    assert refused.status_code == 403 and refused.json()["reason"] == "TENANT_NOT_ALLOWED"
    missing = http.post(LIST, json={}, headers={**key_headers("admin"), "x-sluice-tenant": "nobody"})
    assert missing.status_code == 404, missing.text
    # Dify's /retrieval forwards it too: acme's knowledge is found for acme, not for the default tenant.
    ask = {"knowledge_id": "acme-docs", "query": "notes", "retrieval_setting": {"top_k": 3, "score_threshold": 0}}
    assert http.post("/retrieval", json=ask, headers=as_acme).status_code == 200
    not_ours = http.post("/retrieval", json=ask, headers=key_headers("admin"))
    assert not_ours.status_code == 404 and not_ours.json()["error_code"] == 2001, not_ours.text
