"""Every read-only RPC as a Connect GET through sluice-gateway (issue 19; docs/http.md, "GET
requests"): the calls the .protos mark NO_SIDE_EFFECTS (collections, documents, sources and their
runs, webhooks and their deliveries, tenants and keys, search) answer a GET exactly as their POST,
with the same keys, tenant header, rate limit, errors and caching headers; a method that writes,
or streams, still refuses GET with 405 and is not called. Real HTTP requests to a real gateway in
front of the real ingest-api (local-folder sources and loopback webhook URLs allowed, so that
both can be created here) and search, with the CLI tests' ScriptedWorker doing a worker's part."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import httpx
import pytest
from cli.conftest import ScriptedWorker
from search_server import RunningSearch
from sluice.v1 import document_pb2
from sluice_gateway.methods import METHODS

from gateway.conftest import RunningGateway, key_headers
from gateway.test_gateway import TEXT, create_collection, upload, watch_until_done

ADMIN_SERVICE = "AdminService."


@dataclass
class World:
    """What the reads below read: one READY document in `docs`, a local-folder source with one
    run asked for, and a webhook subscription, all of the default tenant."""

    document: str
    source: str
    webhook: str


@pytest.fixture
def gateway(ingest_api_factory, database_url, tmp_path):
    ingest = ingest_api_factory(source_local_roots=str(tmp_path), webhook_allow_private_networks=True)
    search = RunningSearch(database_url)
    worker = ScriptedWorker(ingest.address)
    gateway = RunningGateway(ingest.address, search.address)
    yield gateway
    gateway.stop()
    worker.stop()
    search.stop()
    assert not worker.errors, worker.errors


@pytest.fixture
def http(gateway):
    with httpx.Client(base_url=gateway.url, headers=key_headers(), timeout=60) as client:
        yield client


@pytest.fixture
def world(http, tmp_path) -> World:
    create_collection(http)
    document = upload(http, "docs", "leases.txt", TEXT).json()
    assert watch_until_done(http, document["id"])[-1] == "DOCUMENT_STATUS_READY"
    folder = tmp_path / "handbook"
    folder.mkdir()
    (folder / "a.md").write_text("# A page\n")
    source = post(
        http, "/sluice.v1.SourceService/CreateSource", {"source": {"collection": "docs", "localFolder": {"path": str(folder)}}}
    )
    post(http, "/sluice.v1.SourceService/SyncSource", {"name": source["name"]})  # a run to list (no runner takes it here)
    webhook = post(
        http,
        "/sluice.v1.WebhookService/CreateWebhook",
        {
            "webhook": {
                "collection": "docs",
                "url": "http://127.0.0.1:9/hook",
                "eventTypes": ["WEBHOOK_EVENT_TYPE_DOCUMENT_READY"],
            }
        },
    )["webhook"]
    return World(document["id"], source["name"], webhook["id"])


def post(http: httpx.Client, path: str, request: dict, **headers: str) -> dict:
    answer = http.post(path, json=request, headers=headers)
    assert answer.status_code == 200, (path, answer.text)
    return answer.json()


def get(http: httpx.Client, path: str, request: dict, **headers: str) -> httpx.Response:
    return http.get(path, params={"connect": "v1", "encoding": "json", "message": json.dumps(request)}, headers=headers)


def path_of(label: str) -> str:
    return "/sluice.v1." + label.replace(".", "/")


def reads(world: World) -> dict[str, dict]:
    """A request for every method that takes GET."""
    return {
        "DocumentService.GetCollection": {"name": "docs"},
        "DocumentService.ListCollections": {},
        "DocumentService.GetDocument": {"id": world.document},
        "DocumentService.ListDocuments": {"collection": "docs", "status": "DOCUMENT_STATUS_READY"},
        "DocumentService.ListChunks": {"documentId": world.document, "pageSize": 5},
        "SearchService.Search": {"collection": "docs", "query": "when do leases expire", "topK": 3},
        "SourceService.GetSource": {"name": world.source},
        "SourceService.ListSources": {"collection": "docs"},
        "SourceService.ListSourceRuns": {"name": world.source},
        "WebhookService.ListWebhooks": {"collection": "docs"},
        "WebhookService.GetWebhook": {"id": world.webhook},
        "WebhookService.ListWebhookDeliveries": {"webhookId": world.webhook},
        "AdminService.ListTenants": {},
        "AdminService.ListApiKeys": {"tenant": "default"},
        "AdminService.GetCaller": {},
    }


def role_for(label: str) -> str:
    return "admin" if label.startswith(ADMIN_SERVICE) else "client"


def test_every_read_answers_a_get_as_its_post_does(http, world):
    requests = reads(world)
    # The table above is every method the gateway serves by GET: marking another one in a .proto
    # without a case here fails this test.
    assert set(requests) == {m.label for m in METHODS.values() if m.takes_get}
    for label, request in requests.items():
        headers = key_headers(role_for(label))
        posted = post(http, path_of(label), request, **headers)
        answer = get(http, path_of(label), request, **headers)
        assert answer.status_code == 200, (label, answer.text)
        assert answer.headers["content-type"] == "application/json"
        assert answer.json() == posted, label
        assert answer.headers["cache-control"] == "no-store" and answer.headers["vary"] == "Authorization, X-Sluice-Tenant"
    # What they read is there, so the comparisons above compared something (deliveries excepted:
    # nothing delivers in this stack, so both answers are {}).
    assert post(http, path_of("DocumentService.GetDocument"), {"id": world.document})["status"] == "DOCUMENT_STATUS_READY"
    assert len(post(http, path_of("SourceService.ListSourceRuns"), {"name": world.source})["runs"]) == 1
    assert [w["id"] for w in post(http, path_of("WebhookService.ListWebhooks"), {})["webhooks"]] == [world.webhook]
    tenants = post(http, path_of("AdminService.ListTenants"), {}, **key_headers("admin"))["tenants"]
    assert "default" in [t["name"] for t in tenants]
    # Binary protobuf, as connect-es sends it with useBinaryFormat: the same Document.
    message = base64.urlsafe_b64encode(json.dumps({"id": world.document}).encode()).decode().rstrip("=")
    answer = http.get(path_of("DocumentService.GetDocument"), params={"encoding": "json", "base64": "1", "message": message})
    assert answer.status_code == 200 and answer.json()["id"] == world.document, answer.text
    from sluice.v1 import document_service_pb2

    payload = document_service_pb2.GetDocumentRequest(id=world.document).SerializeToString()
    answer = http.get(
        path_of("DocumentService.GetDocument"),
        params={"encoding": "proto", "base64": "1", "message": base64.urlsafe_b64encode(payload).decode().rstrip("=")},
    )
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/proto"
    document = document_pb2.Document.FromString(answer.content)
    assert document.id == world.document and document.status == document_pb2.DOCUMENT_STATUS_READY


def test_a_get_reads_only_the_callers_tenant(http, world):
    admin = key_headers("admin")
    post(http, path_of("AdminService.CreateTenant"), {"tenant": {"name": "acme"}}, **admin)
    created = post(http, path_of("AdminService.CreateApiKey"), {"tenant": "acme", "role": "API_KEY_ROLE_CLIENT"}, **admin)
    acme = {"Authorization": f"Bearer {created['secret']}"}
    # acme's key finds none of the default tenant's things, by GET as by POST: the same 404.
    for label, request, reason in [
        ("DocumentService.GetDocument", {"id": world.document}, "DOCUMENT_NOT_FOUND"),
        ("DocumentService.GetCollection", {"name": "docs"}, "COLLECTION_NOT_FOUND"),
        ("DocumentService.ListDocuments", {"collection": "docs"}, "COLLECTION_NOT_FOUND"),
        ("SourceService.GetSource", {"name": world.source}, "SOURCE_NOT_FOUND"),
        ("SourceService.ListSourceRuns", {"name": world.source}, "SOURCE_NOT_FOUND"),
        ("WebhookService.GetWebhook", {"id": world.webhook}, "WEBHOOK_NOT_FOUND"),
        ("WebhookService.ListWebhookDeliveries", {"webhookId": world.webhook}, "WEBHOOK_NOT_FOUND"),
    ]:
        posted = http.post(path_of(label), json=request, headers=acme)
        answer = get(http, path_of(label), request, **acme)
        assert (posted.status_code, posted.json().get("reason")) == (404, reason), (label, posted.text)
        assert (answer.status_code, answer.json().get("reason")) == (404, reason), (label, answer.text)
        assert answer.json() == posted.json() and answer.headers["cache-control"] == "no-store"
    # Its lists are its own (empty), not the default tenant's.
    for label in ("DocumentService.ListCollections", "DocumentService.ListDocuments", "SourceService.ListSources"):
        answer = get(http, path_of(label), {}, **acme)
        assert answer.status_code == 200 and answer.json() == {}, (label, answer.text)
    # An admin key reads the tenant its X-Sluice-Tenant header names; a client key may not name one.
    names = get(http, path_of("DocumentService.ListCollections"), {}, **admin, **{"X-Sluice-Tenant": "acme"})
    assert names.status_code == 200 and names.json() == {} and names.headers["vary"] == "Authorization, X-Sluice-Tenant"
    own = get(http, path_of("DocumentService.ListCollections"), {}, **admin)
    assert [c["name"] for c in own.json()["collections"]] == ["docs"]
    refused = get(http, path_of("DocumentService.ListCollections"), {}, **{"X-Sluice-Tenant": "acme"})
    assert refused.status_code == 403 and refused.json()["reason"] == "TENANT_NOT_ALLOWED", refused.text
    # Roles hold too: a reader key reads documents; a client key may not list tenants; no key is 401.
    assert get(http, path_of("DocumentService.GetDocument"), {"id": world.document}, **key_headers("reader")).status_code == 200
    assert get(http, path_of("AdminService.ListTenants"), {}).status_code == 403
    with httpx.Client(base_url=str(http.base_url), timeout=30) as anonymous:
        unauthenticated = get(anonymous, path_of("DocumentService.GetCollection"), {"name": "docs"})
    assert unauthenticated.status_code == 401 and unauthenticated.json()["code"] == "unauthenticated"


def test_a_get_of_a_write_or_a_stream_is_refused_and_not_called(http, world):
    refused = {m.label: m for m in METHODS.values() if not m.takes_get}
    assert {"DocumentService.DeleteDocument", "DocumentService.DeleteCollection", "DocumentService.WatchDocument"} <= set(refused)
    requests = {
        "DocumentService.DeleteDocument": {"id": world.document},
        "DocumentService.DeleteCollection": {"name": "docs", "force": True},
        "SourceService.DeleteSource": {"name": world.source},
        "WebhookService.DeleteWebhook": {"id": world.webhook},
        "DocumentService.WatchDocument": {"id": world.document},
    }
    for label, method in refused.items():
        answer = get(http, method.path, requests.get(label, {}), **key_headers(role_for(label)))
        assert answer.status_code == 405, (label, answer.text)
        assert answer.headers["allow"] == "POST" and answer.headers["cache-control"] == "no-store"
        assert answer.json()["reason"] == "GET_NOT_ALLOWED" and answer.json()["code"] == "unimplemented"
        expected = "is a server stream" if method.kind == "server_stream" else "has side effects"
        assert expected in answer.json()["message"], (label, answer.text)
    # Nothing was deleted: the GETs never reached ingest-api.
    assert post(http, path_of("DocumentService.GetDocument"), {"id": world.document})["status"] == "DOCUMENT_STATUS_READY"
    assert post(http, path_of("SourceService.GetSource"), {"name": world.source})["name"] == world.source
    assert post(http, path_of("WebhookService.GetWebhook"), {"id": world.webhook})["id"] == world.webhook
    # A POST still deletes.
    assert post(http, path_of("DocumentService.DeleteDocument"), {"id": world.document}) == {"deletedDocuments": 1}
    gone = get(http, path_of("DocumentService.GetDocument"), {"id": world.document})
    assert gone.status_code == 404 and gone.json()["reason"] == "DOCUMENT_NOT_FOUND", gone.text


def test_reads_by_get_share_the_rate_limit_and_the_cache_setting(ingest_api_factory, database_url):
    """ingest-api's per-key rate limit (one token every 10 s, bursts of 4) counts GETs as it counts
    POSTs; an operator's max-age reaches every GET's success and no error."""
    ingest = ingest_api_factory(rate_limit_per_second=0.1, rate_limit_burst=4)
    search = RunningSearch(database_url)
    gateway = RunningGateway(ingest.address, search.address, gateway_get_max_age_seconds=30)
    try:
        with httpx.Client(base_url=gateway.url, headers=key_headers(), timeout=30) as http:
            create_collection(http)  # one token
            answers = [get(http, path_of("DocumentService.GetCollection"), {"name": "docs"}) for _ in range(4)]
        assert [a.status_code for a in answers[:3]] == [200, 200, 200], [a.text for a in answers]
        assert answers[0].headers["cache-control"] == "max-age=30, s-maxage=30"
        assert answers[0].headers["vary"] == "Authorization, X-Sluice-Tenant"
        limited = answers[-1]
        assert limited.status_code == 429 and limited.json()["reason"] == "RATE_LIMITED", limited.text
        assert int(limited.headers["retry-after"]) >= 1
        assert limited.headers["cache-control"] == "no-store"
    finally:
        gateway.stop()
        search.stop()
