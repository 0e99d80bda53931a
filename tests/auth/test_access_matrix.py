"""The access matrix: every RPC of every service x every kind of caller, from one table.

The expectations are written here, independently of sluice_common.auth.METHOD_ROLES, so a
change to the server's table that lets a role through where it should not fails this test.
A caller the table admits must get past authentication: its (empty) request may be invalid,
but the answer is never UNAUTHENTICATED or PERMISSION_DENIED.
"""

from __future__ import annotations

import auth_keys
import grpc
import pytest
from google.protobuf import symbol_database
from sluice.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    document_service_pb2,
    job_service_pb2,
    search_service_pb2,
    source_service_pb2,
    webhook_service_pb2,
)
from sluice_common.auth import METHOD_ROLES
from sluice_common.channels import keyed_channel
from sluice_common.errors import reason_of

from .conftest import create_key

ALL = {"admin", "client", "reader", "worker"}
WRITE = {"admin", "client"}
READ = {"admin", "client", "reader"}
WORKER = {"worker"}
ADMIN = {"admin"}

EXPECTED_ROLES: dict[str, set[str]] = {
    "/sluice.v1.DocumentService/CreateCollection": WRITE,
    "/sluice.v1.DocumentService/GetCollection": READ,
    "/sluice.v1.DocumentService/ListCollections": READ,
    "/sluice.v1.DocumentService/DeleteCollection": WRITE,
    "/sluice.v1.DocumentService/ReindexCollection": WRITE,
    "/sluice.v1.DocumentService/CancelReindex": WRITE,
    "/sluice.v1.DocumentService/UploadDocument": WRITE,
    "/sluice.v1.DocumentService/GetDocument": READ,
    "/sluice.v1.DocumentService/ListDocuments": READ,
    "/sluice.v1.DocumentService/DeleteDocument": WRITE,
    "/sluice.v1.DocumentService/RetryDocument": WRITE,
    "/sluice.v1.DocumentService/ReprocessDocument": WRITE,
    "/sluice.v1.DocumentService/WatchDocument": READ,
    "/sluice.v1.DocumentService/WatchCollection": READ,
    "/sluice.v1.DocumentService/ListChunks": READ,
    "/sluice.v1.DocumentService/UpdateChunk": WRITE,
    "/sluice.v1.DocumentService/DownloadDocument": READ,
    "/sluice.v1.DocumentService/ExportCollection": READ,
    "/sluice.v1.DocumentService/ImportCollection": WRITE,
    "/sluice.v1.SearchService/Search": READ,
    "/sluice.v1.JobService/ClaimJob": WORKER,
    "/sluice.v1.JobService/RenewLease": WORKER,
    "/sluice.v1.JobService/ReportStage": WORKER,
    "/sluice.v1.JobService/ReadDocumentContent": WORKER,
    "/sluice.v1.JobService/SaveSnapshot": WORKER,
    "/sluice.v1.JobService/ReadSnapshot": WORKER,
    "/sluice.v1.JobService/CompleteJob": WORKER,
    "/sluice.v1.JobService/FailJob": WORKER,
    "/sluice.v1.JobService/ReleaseJob": WORKER,
    "/sluice.v1.WebhookService/CreateWebhook": WRITE,
    "/sluice.v1.WebhookService/ListWebhooks": READ,
    "/sluice.v1.WebhookService/GetWebhook": READ,
    "/sluice.v1.WebhookService/DeleteWebhook": WRITE,
    "/sluice.v1.WebhookService/ListWebhookDeliveries": READ,
    "/sluice.v1.WebhookService/RotateWebhookSecret": WRITE,
    "/sluice.v1.SourceService/CreateSource": WRITE,
    "/sluice.v1.SourceService/GetSource": READ,
    "/sluice.v1.SourceService/ListSources": READ,
    "/sluice.v1.SourceService/DeleteSource": WRITE,
    "/sluice.v1.SourceService/SyncSource": WRITE,
    "/sluice.v1.SourceService/ListSourceRuns": READ,
    "/sluice.v1.AdminService/CreateTenant": ADMIN,
    "/sluice.v1.AdminService/UpdateTenant": ADMIN,
    "/sluice.v1.AdminService/ListTenants": ADMIN,
    "/sluice.v1.AdminService/CreateApiKey": ADMIN,
    "/sluice.v1.AdminService/ListApiKeys": ADMIN,
    "/sluice.v1.AdminService/RevokeApiKey": ADMIN,
    "/sluice.v1.AdminService/GetCaller": ALL,  # any key, of itself
}

# Principals that fail authentication, and the ErrorInfo reason each gets.
UNAUTHENTICATED = {
    "no key": (None, "API_KEY_MISSING"),
    "malformed key": ("slk_not-a-key", "API_KEY_INVALID"),
    "unknown key": ("slk_aaaaaaaaaaaa_" + "A" * 43, "API_KEY_INVALID"),
    "revoked key": ("revoked", "API_KEY_INVALID"),
}
PRINCIPALS = [*UNAUTHENTICATED, "client of default", "client of b", "reader", "worker", "admin"]
ROLE_OF = {"client of default": "client", "client of b": "client", "reader": "reader", "worker": "worker", "admin": "admin"}

FILES = (document_service_pb2, job_service_pb2, search_service_pb2, admin_service_pb2, webhook_service_pb2, source_service_pb2)


def all_methods():
    """Every RPC of the protos: (full name, method descriptor)."""
    for module in FILES:
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                yield f"/{service.full_name}/{method.name}", method


def test_every_rpc_is_in_the_tables():
    methods = {name for name, _ in all_methods()}
    assert methods == set(EXPECTED_ROLES), "an RPC is missing from the test's table (or the table names one that is gone)"
    assert methods == set(METHOD_ROLES), "an RPC is missing from sluice_common.auth.METHOD_ROLES"


def call(channel: grpc.Channel, name: str, method, metadata) -> grpc.StatusCode:
    """Call `name` with an empty request (one empty message for client streams)."""
    request_class = symbol_database.Default().GetSymbol(method.input_type.full_name)
    response_class = symbol_database.Default().GetSymbol(method.output_type.full_name)
    kind = (method.client_streaming, method.server_streaming)
    args = dict(request_serializer=request_class.SerializeToString, response_deserializer=response_class.FromString)
    try:
        if kind == (False, False):
            channel.unary_unary(name, **args)(request_class(), metadata=metadata, timeout=20)
        elif kind == (False, True):
            list(channel.unary_stream(name, **args)(request_class(), metadata=metadata, timeout=20))
        elif kind == (True, False):
            channel.stream_unary(name, **args)(iter([request_class()]), metadata=metadata, timeout=20)
        else:
            list(channel.stream_stream(name, **args)(iter([request_class()]), metadata=metadata, timeout=20))
    except grpc.RpcError as err:
        return err.code(), reason_of(err)
    return grpc.StatusCode.OK, ""


@pytest.fixture
def matrix_servers(ingest_api, tenant_b, search_server_address):
    keys = {
        "client of default": auth_keys.KEYS["client"],
        "client of b": tenant_b.keys["client"],
        "reader": auth_keys.KEYS["reader"],
        "worker": auth_keys.KEYS["worker"],
        "admin": auth_keys.KEYS["admin"],
    }
    revoked = create_key(ingest_api.address, "default", "client")
    from sluice.v1 import admin_service_pb2 as admin_pb2

    from .conftest import admin_stub

    admin_stub(ingest_api.address).RevokeApiKey(admin_pb2.RevokeApiKeyRequest(id=revoked))
    return ingest_api.address, search_server_address, keys, revoked


def test_access_matrix(matrix_servers):
    ingest, search, keys, revoked = matrix_servers
    channels = {"ingest": grpc.insecure_channel(ingest), "search": grpc.insecure_channel(search)}
    outcomes: list[tuple[str, str, str, str]] = []
    wrong: list[str] = []
    for name, method in all_methods():
        channel = channels["search" if "SearchService" in name else "ingest"]
        for principal in PRINCIPALS:
            if principal in UNAUTHENTICATED:
                key, expected_reason = UNAUTHENTICATED[principal]
                key = revoked if key == "revoked" else key
            else:
                key, expected_reason = keys[principal], None
            metadata = [("authorization", f"Bearer {key}")] if key else []
            code, reason = call(channel, name, method, metadata)
            if principal in UNAUTHENTICATED:
                ok = code == grpc.StatusCode.UNAUTHENTICATED and reason == expected_reason
                expected = f"UNAUTHENTICATED/{expected_reason}"
            elif ROLE_OF[principal] in EXPECTED_ROLES[name]:
                ok = code not in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INTERNAL)
                expected = "admitted (not UNAUTHENTICATED/PERMISSION_DENIED/INTERNAL)"
            else:
                ok = code == grpc.StatusCode.PERMISSION_DENIED and reason == "ROLE_NOT_ALLOWED"
                expected = "PERMISSION_DENIED/ROLE_NOT_ALLOWED"
            outcomes.append((name, principal, code.name, reason))
            if not ok:
                wrong.append(f"{name} as {principal}: got {code.name}/{reason}, expected {expected}")
    for channel in channels.values():
        channel.close()
    assert not wrong, "\n".join(wrong)
    assert len(outcomes) == len(EXPECTED_ROLES) * len(PRINCIPALS)  # 26 RPCs x 9 principals


def test_health_stays_open_and_reflection_can_be_turned_off(ingest_api_factory):
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    server = ingest_api_factory(reflection_enabled=False)
    with grpc.insecure_channel(server.address) as channel:
        status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status
        assert status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            list(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_invalid_utf8_in_a_string_field_is_invalid_argument_not_internal(ingest_api):
    # GetCollectionRequest.name is field 1 (string): bytes that are not UTF-8.
    raw = b"\x0a\x03\xff\xfe\xfd"
    with keyed_channel(ingest_api.address, auth_keys.KEYS["client"]) as channel:
        method = channel.unary_unary(
            "/sluice.v1.DocumentService/GetCollection", request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        with pytest.raises(grpc.RpcError) as err:
            method(raw, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(err.value) == "MALFORMED_REQUEST"
    # A stream whose second message is malformed (UploadDocument: metadata, then garbage).
    from ingest.helpers import Clients

    clients = Clients(ingest_api.address)
    clients.create_collection("x")
    clients.close()
    first = document_service_pb2.UploadDocumentRequest(
        metadata=document_service_pb2.UploadDocumentMetadata(collection="x", filename="a.txt")
    ).SerializeToString()
    with keyed_channel(ingest_api.address, auth_keys.KEYS["client"]) as channel:
        method = channel.stream_unary(
            "/sluice.v1.DocumentService/UploadDocument", request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        with pytest.raises(grpc.RpcError) as err:
            method(iter([first, b"\x0a\x03\xff\xfe\xfd"]), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(err.value) == "MALFORMED_REQUEST"


def test_a_nul_in_any_name_is_invalid_argument_not_internal(ingest_api, search_server_address):
    from sluice.v1 import document_service_pb2_grpc, search_service_pb2, search_service_pb2_grpc

    stub = document_service_pb2_grpc.DocumentServiceStub(keyed_channel(ingest_api.address, auth_keys.KEYS["client"]))
    search = search_service_pb2_grpc.SearchServiceStub(keyed_channel(search_server_address, auth_keys.KEYS["client"]))
    calls = [
        lambda: stub.GetCollection(document_service_pb2.GetCollectionRequest(name="a\x00b"), timeout=10),
        lambda: stub.DeleteCollection(document_service_pb2.DeleteCollectionRequest(name="a\x00b"), timeout=10),
        lambda: stub.ListDocuments(document_service_pb2.ListDocumentsRequest(collection="a\x00b"), timeout=10),
        lambda: search.Search(search_service_pb2.SearchRequest(collection="a\x00b", query="x"), timeout=10),
    ]
    for call_ in calls:
        with pytest.raises(grpc.RpcError) as err:
            call_()
        assert err.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), err.value.details()
        assert "internal error" not in (err.value.details() or "")


def test_every_key_learns_who_it_is(matrix_servers):
    """AdminService.GetCaller: the calling key's prefix, role and tenant, for every role (a console
    shows the actions its role allows without guessing), and an admin key acting for another
    tenant is told that tenant."""
    ingest, _, keys, _ = matrix_servers
    roles = {"client of default": "CLIENT", "client of b": "CLIENT", "reader": "READER", "worker": "WORKER", "admin": "ADMIN"}
    with grpc.insecure_channel(ingest) as channel:
        stub = admin_service_pb2_grpc.AdminServiceStub(channel)
        for principal, role in roles.items():
            caller = stub.GetCaller(
                admin_service_pb2.GetCallerRequest(), metadata=[("authorization", f"Bearer {keys[principal]}")]
            )
            assert admin_service_pb2.ApiKeyRole.Name(caller.role) == f"API_KEY_ROLE_{role}", principal
            assert keys[principal].startswith(caller.key_prefix) and caller.key_prefix.endswith("_")
            assert caller.tenant == ("b" if principal == "client of b" else "default"), (principal, caller.tenant)
        acting = stub.GetCaller(
            admin_service_pb2.GetCallerRequest(),
            metadata=[("authorization", f"Bearer {keys['admin']}"), ("x-sluice-tenant", "b")],
        )
        assert acting.tenant == "b" and acting.role == admin_service_pb2.API_KEY_ROLE_ADMIN
