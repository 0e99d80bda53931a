"""Scoped keys (docs/tenancy.md, "Scoped keys"): a key limited to collection `alpha` of tenant
`default` meets `beta`, the same tenant's other collection, exactly as a collection that does not
exist (code, message and reason compared with a truly missing one, ids and names aside), lists
only `alpha`'s things, and cannot create outside its scope; the tenant's unscoped keys see both.
Real servers: ingest-api, search, the HTTP gateway (its routes and Dify's /retrieval)."""

from __future__ import annotations

import json
import uuid

import auth_keys
import grpc
import httpx
import pytest
from ingest.helpers import Clients, upload_messages
from sluice.v1 import admin_service_pb2 as admin_pb2
from sluice.v1 import (
    admin_service_pb2_grpc,
    collection_pb2,
    document_service_pb2_grpc,
    job_service_pb2_grpc,
    search_service_pb2_grpc,
    source_service_pb2_grpc,
    webhook_service_pb2_grpc,
)
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import search_service_pb2 as ss
from sluice.v1 import source_service_pb2 as src
from sluice.v1 import webhook_service_pb2 as wh
from sluice_common.channels import keyed_channel
from sluice_common.errors import reason_of

from auth.conftest import ROLE_PROTO, admin_stub

PUBLIC_URL = "https://93.184.215.14/hooks/sluice"  # given literally, never delivered to
MISSING = "no-such-collection"
NF = grpc.StatusCode.NOT_FOUND


def scoped_key(address: str, role: str, collections: list[str]) -> str:
    return (
        admin_stub(address)
        .CreateApiKey(
            admin_pb2.CreateApiKeyRequest(tenant="default", role=ROLE_PROTO[role], name=f"scoped {role}", collections=collections)
        )
        .secret
    )


def refusal(call, request, **kwargs) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        result = call(request, timeout=10, **kwargs)
        if hasattr(result, "__iter__") and not hasattr(result, "ByteSize"):
            list(result)
    return err.value


def same_answer(call, theirs, absent, replace: tuple[str, str]) -> str:
    """Refusals of `theirs` (in beta) and `absent` (missing) are NOT_FOUND with the same reason and
    the same message once the id or name that differs is put aside; returns the reason."""
    a, b = refusal(call, theirs), refusal(call, absent)
    assert a.code() == b.code() == NF, (a.code(), a.details(), b.code(), b.details())
    assert reason_of(a) == reason_of(b), (reason_of(a), reason_of(b))
    assert a.details().replace(*replace) == b.details(), (a.details(), b.details())
    return reason_of(a)


def process(clients: Clients, texts: list[str]) -> None:
    job = clients.claim(wait=2)
    clients.run_to_indexing(job)
    clients.complete(job, texts)


@pytest.fixture
def root(tmp_path):
    folder = tmp_path / "root"
    (folder / "beta-files").mkdir(parents=True)
    (folder / "alpha-files").mkdir(parents=True)
    return folder


@pytest.fixture
def api(ingest_api_factory, root):
    return ingest_api_factory(source_local_roots=str(root))


@pytest.fixture
def world(api, root):
    """Tenant default: `alpha` and `beta`, one READY document each, a source and a webhook each
    (made with the unscoped client key); a client key and a reader key scoped to alpha (and to
    `later`, which does not exist yet)."""
    full = Clients(api.address)
    workers = Clients(api.address)
    workers.jobs = job_service_pb2_grpc.JobServiceStub(keyed_channel(api.address, auth_keys.KEYS["worker"]))
    full.create_collection("alpha")
    full.create_collection("beta")
    alpha_doc = full.upload("alpha", b"alpha's notes on leases", filename="a.txt")
    process(workers, ["alpha's notes on leases"])
    beta_doc = full.upload("beta", b"beta's secret numbers", filename="b.txt", request_id="beta-1")
    process(workers, ["beta's secret numbers"])
    sources = source_service_pb2_grpc.SourceServiceStub(full.channel)
    hooks = webhook_service_pb2_grpc.WebhookServiceStub(full.channel)
    made = {
        name: (
            sources.CreateSource(
                src.CreateSourceRequest(
                    source=src.Source(collection=name, local_folder=src.LocalFolderSource(path=str(root / f"{name}-files")))
                )
            ),
            hooks.CreateWebhook(wh.CreateWebhookRequest(webhook=wh.Webhook(collection=name, url=PUBLIC_URL))).webhook,
        )
        for name in ("alpha", "beta")
    }
    keys = {role: scoped_key(api.address, role, ["alpha", "later"]) for role in ("client", "reader")}
    yield {
        "full": full,
        "keys": keys,
        "alpha_doc": alpha_doc,
        "beta_doc": beta_doc,
        "sources": {n: s for n, (s, _) in made.items()},
        "hooks": {n: h for n, (_, h) in made.items()},
    }
    full.close()
    workers.close()


def test_every_document_call_meets_beta_as_a_missing_collection_or_document(api, world):
    docs = document_service_pb2_grpc.DocumentServiceStub(keyed_channel(api.address, world["keys"]["client"]))
    full = world["full"]
    beta_id, missing_id = world["beta_doc"].id, str(uuid.uuid4())
    by_name = {
        docs.GetCollection: lambda n: ds.GetCollectionRequest(name=n),
        docs.DeleteCollection: lambda n: ds.DeleteCollectionRequest(name=n, force=True),
        docs.ReindexCollection: lambda n: ds.ReindexCollectionRequest(
            name=n,
            embedder=collection_pb2.EmbedderConfig(
                provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=16
            ),
        ),
        docs.CancelReindex: lambda n: ds.CancelReindexRequest(name=n),
        docs.ListDocuments: lambda n: ds.ListDocumentsRequest(collection=n),
        docs.WatchCollection: lambda n: ds.WatchCollectionRequest(collection=n),
        docs.ExportCollection: lambda n: ds.ExportCollectionRequest(name=n),
        docs.GetDocument: lambda n: ds.GetDocumentRequest(collection=n, source_uri="file:///b.txt"),
        docs.DeleteDocument: lambda n: ds.DeleteDocumentRequest(collection=n, source_uri="file:///b.txt"),
    }
    for call, request in by_name.items():
        same_answer(call, request("beta"), request(MISSING), ("beta", MISSING))
    upload_beta = refusal(docs.UploadDocument, upload_messages("beta", b"planted", "p.txt", "", None, 1024))
    upload_missing = refusal(docs.UploadDocument, upload_messages(MISSING, b"planted", "p.txt", "", None, 1024))
    assert upload_beta.code() == upload_missing.code() == NF
    assert reason_of(upload_beta) == reason_of(upload_missing) == "COLLECTION_NOT_FOUND"
    assert upload_beta.details().replace("beta", MISSING) == upload_missing.details()

    by_id = {
        docs.GetDocument: lambda i: ds.GetDocumentRequest(id=i),
        docs.WatchDocument: lambda i: ds.WatchDocumentRequest(id=i),
        docs.RetryDocument: lambda i: ds.RetryDocumentRequest(id=i),
        docs.ReprocessDocument: lambda i: ds.ReprocessDocumentRequest(id=i),
        docs.DownloadDocument: lambda i: ds.DownloadDocumentRequest(id=i),
        docs.ListChunks: lambda i: ds.ListChunksRequest(document_id=i),
        docs.DeleteDocument: lambda i: ds.DeleteDocumentRequest(id=i),
    }
    for call, request in by_id.items():
        assert same_answer(call, request(beta_id), request(missing_id), (beta_id, missing_id)) == "DOCUMENT_NOT_FOUND"
    beta_chunk = full.docs.ListChunks(ds.ListChunksRequest(document_id=beta_id)).chunks[0].id
    missing_chunk = str(int(beta_chunk) + 10_000)
    update = lambda c: ds.UpdateChunkRequest(chunk_id=c, enabled=False)  # noqa: E731
    assert (
        same_answer(docs.UpdateChunk, update(beta_chunk), update(missing_chunk), (beta_chunk, missing_chunk)) == "CHUNK_NOT_FOUND"
    )

    # Lists hold alpha's things only; the unscoped key of the same tenant sees both.
    assert [c.name for c in docs.ListCollections(ds.ListCollectionsRequest()).collections] == ["alpha"]
    assert [d.id for d in docs.ListDocuments(ds.ListDocumentsRequest()).documents] == [world["alpha_doc"].id]
    assert {c.name for c in full.docs.ListCollections(ds.ListCollectionsRequest()).collections} == {"alpha", "beta"}
    assert len(full.docs.ListDocuments(ds.ListDocumentsRequest()).documents) == 2
    # Inside its scope the key works as before; beta is untouched by all of the above.
    assert docs.GetDocument(ds.GetDocumentRequest(id=world["alpha_doc"].id)).collection == "alpha"
    assert docs.GetCollection(ds.GetCollectionRequest(name="alpha")).document_count == 1
    after = full.get(beta_id)
    assert after.status == D.DOCUMENT_STATUS_READY and after.chunk_count == 1

    # Creating: a name outside the scope is PERMISSION_DENIED (it reveals nothing); a name in it
    # that did not exist yet is created.
    new = lambda n: ds.CreateCollectionRequest(  # noqa: E731
        collection=collection_pb2.Collection(
            name=n,
            embedder=collection_pb2.EmbedderConfig(
                provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=8
            ),
        )
    )
    for name in ("gamma", "beta"):
        err = refusal(docs.CreateCollection, new(name))
        assert err.code() == grpc.StatusCode.PERMISSION_DENIED and reason_of(err) == "COLLECTION_OUT_OF_SCOPE", name
    assert docs.CreateCollection(new("later")).name == "later"
    imported = refusal(
        docs.ImportCollection, iter([ds.ImportCollectionRequest(options=ds.ImportCollectionOptions(name="gamma"))])
    )
    assert imported.code() == grpc.StatusCode.PERMISSION_DENIED and reason_of(imported) == "COLLECTION_OUT_OF_SCOPE"


def test_search_sources_and_webhooks_meet_beta_as_missing(api, world, root, database_url):
    from search_server import RunningSearch

    search = RunningSearch(database_url)
    try:
        scoped = search_service_pb2_grpc.SearchServiceStub(keyed_channel(search.address, world["keys"]["reader"]))
        full = search_service_pb2_grpc.SearchServiceStub(keyed_channel(search.address, auth_keys.KEYS["client"]))
        query = lambda n: ss.SearchRequest(collection=n, query="secret numbers", top_k=5, mode=ss.SEARCH_MODE_KEYWORD)  # noqa: E731
        assert same_answer(scoped.Search, query("beta"), query(MISSING), ("beta", MISSING)) == "COLLECTION_NOT_FOUND"
        assert [h.document_id for h in full.Search(query("beta")).hits] == [world["beta_doc"].id]
        alpha = ss.SearchRequest(collection="alpha", query="notes on leases", top_k=5, mode=ss.SEARCH_MODE_KEYWORD)
        assert [h.document_id for h in scoped.Search(alpha).hits] == [world["alpha_doc"].id]
    finally:
        search.stop()

    channel = keyed_channel(api.address, world["keys"]["client"])
    sources = source_service_pb2_grpc.SourceServiceStub(channel)
    beta_source, missing_source = world["sources"]["beta"], str(uuid.uuid4())
    beta_name, missing_name = beta_source.name, beta_source.name.replace(beta_source.id, missing_source)
    for call, request in (
        (sources.GetSource, src.GetSourceRequest),
        (sources.DeleteSource, src.DeleteSourceRequest),
        (sources.SyncSource, src.SyncSourceRequest),
        (sources.ListSourceRuns, src.ListSourceRunsRequest),
    ):
        reason = same_answer(call, request(name=beta_name), request(name=missing_name), (beta_source.id, missing_source))
        assert reason == "SOURCE_NOT_FOUND"
    assert [s.id for s in sources.ListSources(src.ListSourcesRequest()).sources] == [world["sources"]["alpha"].id]
    same_answer(
        sources.ListSources,
        src.ListSourcesRequest(collection="beta"),
        src.ListSourcesRequest(collection=MISSING),
        ("beta", MISSING),
    )
    folder = lambda n: src.CreateSourceRequest(  # noqa: E731
        source=src.Source(collection=n, local_folder=src.LocalFolderSource(path=str(root / "beta-files")))
    )
    same_answer(sources.CreateSource, folder("beta"), folder(MISSING), ("beta", MISSING))

    hooks = webhook_service_pb2_grpc.WebhookServiceStub(channel)
    beta_hook, missing_hook = world["hooks"]["beta"].id, str(uuid.uuid4())
    for call, request in (
        (hooks.GetWebhook, lambda i: wh.GetWebhookRequest(id=i)),
        (hooks.DeleteWebhook, lambda i: wh.DeleteWebhookRequest(id=i)),
        (hooks.RotateWebhookSecret, lambda i: wh.RotateWebhookSecretRequest(id=i)),
        (hooks.ListWebhookDeliveries, lambda i: wh.ListWebhookDeliveriesRequest(webhook_id=i)),
    ):
        assert same_answer(call, request(beta_hook), request(missing_hook), (beta_hook, missing_hook)) == "WEBHOOK_NOT_FOUND"
    assert [w.id for w in hooks.ListWebhooks(wh.ListWebhooksRequest()).webhooks] == [world["hooks"]["alpha"].id]
    same_answer(
        hooks.ListWebhooks,
        wh.ListWebhooksRequest(collection="beta"),
        wh.ListWebhooksRequest(collection=MISSING),
        ("beta", MISSING),
    )
    create = lambda n: wh.CreateWebhookRequest(webhook=wh.Webhook(collection=n, url=PUBLIC_URL))  # noqa: E731
    same_answer(hooks.CreateWebhook, create("beta"), create(MISSING), ("beta", MISSING))
    # The unscoped key still sees both.
    full_channel = keyed_channel(api.address, auth_keys.KEYS["client"])
    assert len(source_service_pb2_grpc.SourceServiceStub(full_channel).ListSources(src.ListSourcesRequest()).sources) == 2
    assert len(webhook_service_pb2_grpc.WebhookServiceStub(full_channel).ListWebhooks(wh.ListWebhooksRequest()).webhooks) == 2


def test_a_scoped_reader_cannot_write_to_its_own_collection(api, world):
    docs = document_service_pb2_grpc.DocumentServiceStub(keyed_channel(api.address, world["keys"]["reader"]))
    assert docs.GetDocument(ds.GetDocumentRequest(id=world["alpha_doc"].id)).collection == "alpha"
    for call, request in (
        (docs.UploadDocument, upload_messages("alpha", b"written by a reader", "r.txt", "", None, 1024)),
        (docs.DeleteDocument, ds.DeleteDocumentRequest(id=world["alpha_doc"].id)),
        (docs.DeleteCollection, ds.DeleteCollectionRequest(name="alpha", force=True)),
    ):
        err = refusal(call, request)
        assert err.code() == grpc.StatusCode.PERMISSION_DENIED and reason_of(err) == "ROLE_NOT_ALLOWED"
    assert world["full"].get(world["alpha_doc"].id).status == D.DOCUMENT_STATUS_READY


def test_keys_are_scoped_at_creation_only_where_it_means_something(api, world):
    admin = admin_stub(api.address)

    def create(role: str, collections: list[str]) -> grpc.RpcError:
        return refusal(
            admin.CreateApiKey,
            admin_pb2.CreateApiKeyRequest(tenant="default", role=ROLE_PROTO[role], collections=collections),
        )

    for role, collections in (
        ("admin", ["alpha"]),
        ("worker", ["alpha"]),
        ("client", ["Not A Name"]),
        ("reader", [f"c{n}" for n in range(101)]),
    ):
        err = create(role, collections)
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and reason_of(err) == "API_KEY_SCOPE_INVALID", (role, err.details())
    listed = {k.name: list(k.collections) for k in admin.ListApiKeys(admin_pb2.ListApiKeysRequest(tenant="default")).api_keys}
    assert listed["scoped client"] == ["alpha", "later"] and listed["scoped reader"] == ["alpha", "later"]
    assert all(collections == [] for name, collections in listed.items() if not name.startswith("scoped"))
    caller = admin_service_pb2_grpc.AdminServiceStub(keyed_channel(api.address, world["keys"]["client"]))
    me = caller.GetCaller(admin_pb2.GetCallerRequest())
    assert list(me.collections) == ["alpha", "later"] and me.tenant == "default"
    unscoped = admin_service_pb2_grpc.AdminServiceStub(keyed_channel(api.address, auth_keys.KEYS["client"]))
    assert list(unscoped.GetCaller(admin_pb2.GetCallerRequest()).collections) == []


def comparable(response: httpx.Response, replace: tuple[str, str]) -> str:
    """The gateway's error body with the differing name or id put aside; the binary details
    (`value`, base64 of the status, which holds the name's length) left out, their decoded `debug`
    kept."""
    body = json.loads(response.text.replace(*replace))
    for detail in body.get("details", []):
        detail.pop("value", None)
    return json.dumps(body, sort_keys=True)


def test_the_gateway_and_difys_endpoint_honour_the_scope(api, world, database_url):
    from gateway.conftest import RunningGateway
    from search_server import RunningSearch

    search = RunningSearch(database_url)
    gateway = RunningGateway(api.address, search.address)
    try:
        headers = {"Authorization": f"Bearer {world['keys']['client']}"}
        with httpx.Client(base_url=gateway.url, headers=headers, timeout=60) as http:

            def same(method: str, path: str, beta: dict | None, missing: dict | None, replace: tuple[str, str]) -> None:
                a = http.request(method, path, json=beta) if beta is not None else http.request(method, path)
                b = (
                    http.request(method, path.replace(*replace), json=missing)
                    if missing is not None
                    else http.request(method, path.replace(*replace))
                )
                assert a.status_code == b.status_code == 404, (path, a.text, b.text)
                assert comparable(a, replace) == comparable(b, replace), (a.text, b.text)

            same("POST", "/sluice.v1.DocumentService/GetCollection", {"name": "beta"}, {"name": MISSING}, ("beta", MISSING))
            beta_id, missing_id = world["beta_doc"].id, str(uuid.uuid4())
            same("POST", "/sluice.v1.DocumentService/GetDocument", {"id": beta_id}, {"id": missing_id}, (beta_id, missing_id))
            same("GET", f"/v1/documents/{beta_id}/content", None, None, (beta_id, missing_id))
            query = {"query": "secret numbers", "topK": 5, "mode": "SEARCH_MODE_KEYWORD"}
            same(
                "POST",
                "/sluice.v1.SearchService/Search",
                {**query, "collection": "beta"},
                {**query, "collection": MISSING},
                ("beta", MISSING),
            )
            upload_beta = http.post("/v1/collections/beta/documents", params={"filename": "p.txt"}, content=b"planted")
            upload_missing = http.post(f"/v1/collections/{MISSING}/documents", params={"filename": "p.txt"}, content=b"planted")
            assert upload_beta.status_code == upload_missing.status_code == 404
            assert comparable(upload_beta, ("beta", MISSING)) == comparable(upload_missing, ("beta", MISSING))
            listed = http.post("/sluice.v1.DocumentService/ListCollections", json={}).json()
            assert [c["name"] for c in listed["collections"]] == ["alpha"]

            retrieval = {"query": "secret numbers", "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}}
            beta = http.post("/retrieval", json={**retrieval, "knowledge_id": "beta"})
            missing = http.post("/retrieval", json={**retrieval, "knowledge_id": MISSING})
            assert beta.status_code == missing.status_code == 404 and beta.json()["error_code"] == 2001
            assert beta.text.replace("beta", MISSING) == missing.text
            alpha = http.post("/retrieval", json={**retrieval, "query": "notes on leases", "knowledge_id": "alpha"})
            assert alpha.status_code == 200 and len(alpha.json()["records"]) == 1
        with httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {auth_keys.KEYS['client']}"}) as full:
            answer = full.post("/retrieval", json={**retrieval, "knowledge_id": "beta"})
            assert answer.status_code == 200 and len(answer.json()["records"]) == 1
    finally:
        gateway.stop()
        search.stop()


def test_the_cli_makes_a_scoped_key(api, capsys, monkeypatch):
    from sluice_cli.main import run

    monkeypatch.setenv("SLUICE_API_KEY", auth_keys.KEYS["admin"])
    common = ["--ingest-address", api.address, "--json"]
    capsys.readouterr()
    args = ["keys", "create", "--tenant", "default", "--role", "reader", "--collection", "alpha", "--collection", "beta"]
    assert run([*common, *args]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["api_key"]["collections"] == ["alpha", "beta"]
    me = admin_service_pb2_grpc.AdminServiceStub(keyed_channel(api.address, created["secret"]))
    assert list(me.GetCaller(admin_pb2.GetCallerRequest()).collections) == ["alpha", "beta"]
    assert run([*common, "keys", "create", "--tenant", "default", "--role", "worker", "--collection", "alpha"]) != 0
    assert "API_KEY_SCOPE_INVALID" in "".join(capsys.readouterr())


async def test_the_mcp_tools_honour_the_scope(api, world, database_url):
    """`sluice mcp` acts with its one key through the SDK: with a key scoped to alpha, beta and its
    document are missing to every tool, and the lists hold alpha's only."""
    from mcp import Client as McpClient
    from search_server import RunningSearch
    from sluice_cli.mcp import build_server
    from sluice_client import Client

    search = RunningSearch(database_url)
    client = Client(api.address, search_address=search.address, api_key=world["keys"]["client"])
    try:
        async with McpClient(build_server(client)) as session:

            async def answer(tool: str, arguments: dict) -> tuple[str, str]:
                result = await session.call_tool(tool, arguments)
                assert result.is_error, (tool, arguments)
                error = result.structured_content["error"]
                return error["reason"], "\n".join(b.text for b in result.content if b.type == "text")

            beta_id, missing_id = world["beta_doc"].id, str(uuid.uuid4())
            for tool, beta, missing, replace in (
                (
                    "search",
                    {"collection": "beta", "query": "numbers"},
                    {"collection": MISSING, "query": "numbers"},
                    ("beta", MISSING),
                ),
                ("list_documents", {"collection": "beta"}, {"collection": MISSING}, ("beta", MISSING)),
                ("get_document", {"document": beta_id}, {"document": missing_id}, (beta_id, missing_id)),
                ("list_chunks", {"document": beta_id}, {"document": missing_id}, (beta_id, missing_id)),
            ):
                (reason_a, text_a), (reason_b, text_b) = await answer(tool, beta), await answer(tool, missing)
                assert reason_a == reason_b and text_a.replace(*replace) == text_b, (tool, text_a, text_b)
            collections = (await session.call_tool("list_collections")).structured_content["collections"]
            assert [c["name"] for c in collections] == ["alpha"]
            documents = (await session.call_tool("list_documents", {})).structured_content["documents"]
            assert [d["id"] for d in documents] == [world["alpha_doc"].id]
    finally:
        client.close()
        search.stop()
