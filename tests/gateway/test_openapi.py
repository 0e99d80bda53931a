"""/openapi.json: generated from the proto descriptors, it parses as OpenAPI 3 and lists every
public RPC (JobService, the workers' internal API, excepted)."""

from __future__ import annotations

import auth_keys
from openapi_spec_validator import validate
from sluice.v1 import admin_service_pb2, document_service_pb2, search_service_pb2, source_service_pb2, webhook_service_pb2


def test_openapi_lists_every_rpc_with_resolvable_schemas(http):
    response = http.get("/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.")
    validate(document)  # the OpenAPI 3.1 schema, checked by openapi-spec-validator

    operations = {op["operationId"]: (path, verb) for path, item in document["paths"].items() for verb, op in item.items()}
    services = [
        document_service_pb2.DESCRIPTOR.services_by_name["DocumentService"],
        search_service_pb2.DESCRIPTOR.services_by_name["SearchService"],
        webhook_service_pb2.DESCRIPTOR.services_by_name["WebhookService"],
        admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"],
        source_service_pb2.DESCRIPTOR.services_by_name["SourceService"],
    ]
    # A client stream is one operation only when the gateway serves it (UploadDocument, as a raw body).
    expected = {f"{s.name}.{m.name}" for s in services for m in s.methods if not m.client_streaming} | {
        "DocumentService.UploadDocument"
    }
    assert len(expected) >= 32  # 14 DocumentService, 1 SearchService, 6 WebhookService, 5 AdminService, 6 SourceService
    assert expected <= operations.keys(), expected - operations.keys()
    assert "DocumentService.ImportCollection" not in operations
    assert operations["SearchService.Search"] == ("/sluice.v1.SearchService/Search", "post")
    # The unary reads are marked NO_SIDE_EFFECTS: each takes a Connect GET too, at its POST's path;
    # nothing else does (not the writes, not the streams that read: WatchDocument, WatchCollection).
    reads = [
        "AdminService.GetCaller",
        "AdminService.ListApiKeys",
        "AdminService.ListTenants",
        "DocumentService.GetCollection",
        "DocumentService.GetDocument",
        "DocumentService.ListChunks",
        "DocumentService.ListCollections",
        "DocumentService.ListDocuments",
        "SearchService.Search",
        "SourceService.GetSource",
        "SourceService.ListSourceRuns",
        "SourceService.ListSources",
        "WebhookService.GetWebhook",
        "WebhookService.ListWebhookDeliveries",
        "WebhookService.ListWebhooks",
    ]
    assert sorted(
        (name, where) for name, where in operations.items() if where[1] == "get" and where[0].startswith("/sluice.")
    ) == [(f"{read}ByGet", ("/sluice.v1." + read.replace(".", "/"), "get")) for read in reads]
    for read in reads:
        get = document["paths"]["/sluice.v1." + read.replace(".", "/")]["get"]
        assert [p["name"] for p in get["parameters"] if p["required"]] == ["encoding", "message"]
        assert "requestBody" not in get and "200" in get["responses"]
    assert operations["DocumentService.UploadDocument"] == ("/v1/collections/{collection}/documents", "post")
    assert operations["DocumentService.DownloadDocument.Content"] == ("/v1/documents/{id}/content", "get")
    assert "Dify.Retrieval" in operations
    assert (
        "text/event-stream"
        in document["paths"]["/sluice.v1.DocumentService/WatchDocument"]["post"]["responses"]["200"]["content"]
    )
    watch = document["paths"]["/sluice.v1.DocumentService/WatchCollection"]["post"]
    assert "application/connect+json" in watch["responses"]["200"]["content"]
    assert "application/connect+json" in watch["requestBody"]["content"]
    assert [p["name"] for p in watch["parameters"]] == ["Last-Event-ID"]

    # Every $ref points at a schema of the document.
    schemas = document["components"]["schemas"]

    def refs(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref":
                    yield value
                else:
                    yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    for ref in refs(document):
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref
    hit = schemas["sluice.v1.SearchHit"]["properties"]
    assert hit["chunkIndex"] == {"type": "integer", "format": "int32"}
    assert schemas["sluice.v1.Document"]["properties"]["sizeBytes"] == {"type": "string", "format": "int64"}
    assert schemas["sluice.v1.SearchRequest"]["properties"]["mode"]["enum"][0] == "SEARCH_MODE_UNSPECIFIED"


def test_the_document_says_what_the_gateway_does(stack, http):
    """Issue 37, defect 5: the 405 Allow header names GET where a method takes it; binary protobuf
    (application/proto, encoding=proto) is listed beside JSON; a request body is optional, as an
    empty one is accepted as the empty message."""
    document = http.get("/openapi.json").json()
    get_collection = document["paths"]["/sluice.v1.DocumentService/GetCollection"]
    body = get_collection["post"]["requestBody"]
    assert body["required"] is False and set(body["content"]) == {"application/json", "application/proto"}
    assert set(get_collection["post"]["responses"]["200"]["content"]) == {"application/json", "application/proto"}
    assert "application/proto" in get_collection["get"]["responses"]["200"]["content"]
    # An empty body is the empty message (ListCollections with every field at its default).
    empty = http.post("/sluice.v1.DocumentService/ListCollections", content=b"", headers={"Content-Type": "application/json"})
    assert empty.status_code == 200, empty.text
    # A verb the path does not take: 405, and Allow names every verb it does take.
    for path, allowed in (
        ("/sluice.v1.DocumentService/GetCollection", "GET, POST"),
        ("/sluice.v1.DocumentService/DeleteCollection", "POST"),
    ):
        refused = http.put(path, json={"name": "docs"})
        assert refused.status_code == 405 and refused.headers["allow"] == allowed, (path, refused.headers)
        for verb in allowed.split(", "):
            assert verb.lower() in document["paths"][path]


def test_request_schemas_list_the_fields_the_protos_mark_required(http):
    """Issue 37, defect 5: a request schema's `required` names the fields marked
    `(google.api.field_behavior) = REQUIRED` (docs/http.md, "OpenAPI"), nested messages too; a
    field needed only in some combinations stays optional."""
    schemas = http.get("/openapi.json").json()["components"]["schemas"]

    def required(name: str) -> list[str]:
        return list(schemas[f"sluice.v1.{name}"].get("required", []))

    assert required("CreateCollectionRequest") == ["collection"]
    assert required("Collection") == ["name"]  # CreateCollectionRequest.collection.name
    assert required("GetCollectionRequest") == ["name"]
    assert required("DeleteCollectionRequest") == ["name"]
    assert required("ReindexCollectionRequest") == ["name"]
    assert required("EvalQuery") == ["query", "relevant"]
    assert required("ListChunksRequest") == ["documentId"]  # the JSON name, as in `properties`
    assert required("UpdateChunkRequest") == ["chunkId"]
    assert required("SearchRequest") == ["collection"]  # a query or a queryVector: neither alone
    assert required("CreateWebhookRequest") == ["webhook"] and required("Webhook") == ["collection"]
    assert required("SyncSourceRequest") == ["name"] and required("Source") == ["collection"]
    # An id, or a collection with a source_uri: no one field is required.
    assert required("GetDocumentRequest") == [] and required("DeleteDocumentRequest") == []
    assert required("ListDocumentsRequest") == [] and required("ListCollectionsRequest") == []
    for name, schema in schemas.items():
        assert set(schema.get("required", [])) <= set(schema.get("properties", {})), name


def test_a_request_without_a_required_field_is_refused_with_400_saying_so(http):
    """Every unary operation whose request schema has `required` fields refuses the empty message
    with 400 invalid_argument: the schema promises no more than the server enforces (docs/http.md,
    "OpenAPI"). With the other fields given, the message names the missing one."""
    document = http.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    checked = []
    for path, item in sorted(document["paths"].items()):
        operation = item.get("post", {})
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        unary = "application/json" in operation.get("responses", {}).get("200", {}).get("content", {})
        if not path.startswith("/sluice.v1.") or body is None or not unary:
            continue  # the streams answer in their own framing (test_streams.py)
        if not schemas[body["schema"]["$ref"].rsplit("/", 1)[1]].get("required"):
            continue
        admin = {"Authorization": f"Bearer {auth_keys.KEYS['admin']}"} if ".AdminService/" in path else None
        refused = http.post(path, json={}, headers=admin)
        assert refused.status_code == 400, (path, refused.status_code, refused.text)
        assert refused.json()["code"] == "invalid_argument" and refused.json()["message"], (path, refused.text)
        checked.append(path.rsplit("/", 1)[1])
    assert {
        "CreateCollection",
        "GetCollection",
        "ListChunks",
        "UpdateChunk",
        "Search",
        "GetWebhook",
        "SyncSource",
        "UpdateTenant",
    } <= set(checked), checked

    for path, request, reason, message in (
        ("DocumentService/GetCollection", {}, "MISSING_COLLECTION", "collection name is required"),
        (
            "DocumentService/CreateCollection",
            {"collection": {"description": "no name"}},
            "INVALID_COLLECTION_NAME",
            "collection name",
        ),
        ("DocumentService/ListChunks", {"pageSize": 5}, "MISSING_ID", "document id is required"),
        ("DocumentService/UpdateChunk", {"enabled": False}, "MISSING_ID", "chunk id is required"),
        ("SearchService/Search", {"query": "anything"}, "COLLECTION_REQUIRED", "collection is required"),
        ("SourceService/SyncSource", {"allowMassDelete": True}, "MISSING_ID", "source id is required"),
    ):
        refused = http.post(f"/sluice.v1.{path}", json=request)
        assert refused.status_code == 400, (path, refused.text)
        error = refused.json()
        assert error["reason"] == reason and error["message"].startswith(message), (path, error)


def test_a_client_stream_the_gateway_does_not_serve_is_501_saying_so(http):
    """ImportCollection is a client stream (docs/bundles.md): one HTTP body cannot carry it, so the
    gateway says to call it over gRPC instead of failing with a 500 (docs/http.md, "OpenAPI")."""
    refused = http.post("/sluice.v1.DocumentService/ImportCollection", json={})
    assert refused.status_code == 501, refused.text
    error = refused.json()
    assert error["code"] == "unimplemented" and error["reason"] == "CLIENT_STREAM_NOT_SERVED", error
    assert error["message"].startswith("DocumentService.ImportCollection is a client stream"), error
