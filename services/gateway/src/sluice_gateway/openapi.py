"""The OpenAPI 3 document of the gateway, generated from the proto descriptors at start (so it
lists every RPC the gateway serves, with schemas in the protobuf JSON mapping)."""

from __future__ import annotations

from typing import Any

from google.api import field_behavior_pb2
from google.protobuf import descriptor

from .connect import PROTO_TYPE
from .methods import UPLOAD, Method, all_methods

FD = descriptor.FieldDescriptor
INTEGER32 = {FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32, FD.TYPE_UINT32, FD.TYPE_FIXED32}
INTEGER64 = {FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64, FD.TYPE_UINT64, FD.TYPE_FIXED64}
# Well-known types have their own JSON forms.
WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "example": "1.5s"},
    "google.protobuf.FieldMask": {"type": "string"},
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array", "items": {}},
    "google.protobuf.Any": {"type": "object", "properties": {"@type": {"type": "string"}}},
    "google.protobuf.Empty": {"type": "object"},
    "google.protobuf.StringValue": {"type": "string"},
    "google.protobuf.BoolValue": {"type": "boolean"},
    "google.protobuf.DoubleValue": {"type": "number"},
    "google.protobuf.FloatValue": {"type": "number"},
    "google.protobuf.Int32Value": {"type": "integer", "format": "int32"},
    "google.protobuf.UInt32Value": {"type": "integer", "format": "int32"},
    "google.protobuf.Int64Value": {"type": "string", "format": "int64"},
    "google.protobuf.UInt64Value": {"type": "string", "format": "int64"},
    "google.protobuf.BytesValue": {"type": "string", "format": "byte"},
}
CONNECT_ERROR = {
    "type": "object",
    "description": "A Connect error: code (lowercase gRPC code), message, details (google.rpc detail messages, "
    "each with type, base64 value and its JSON as debug), and reason (the ErrorInfo reason).",
    "properties": {
        "code": {"type": "string", "example": "not_found"},
        "message": {"type": "string"},
        "reason": {"type": "string", "example": "COLLECTION_NOT_FOUND"},
        "details": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string"},
                    "value": {"type": "string", "format": "byte"},
                    "debug": {"type": "object"},
                },
            },
        },
    },
    "required": ["code"],
}


def is_required(field: descriptor.FieldDescriptor) -> bool:
    """Whether the proto marks the field `(google.api.field_behavior) = REQUIRED` (AIP-203): the
    server refuses a request without it (docs/http.md, "OpenAPI")."""
    behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
    return field_behavior_pb2.FieldBehavior.REQUIRED in behaviors


class SchemaBuilder:
    def __init__(self) -> None:
        self.schemas: dict[str, dict[str, Any]] = {}

    def ref(self, message: descriptor.Descriptor) -> dict[str, Any]:
        if message.full_name in WELL_KNOWN:
            return dict(WELL_KNOWN[message.full_name])
        if message.full_name not in self.schemas:
            self.schemas[message.full_name] = {}  # placeholder: recursive messages end here
            self.schemas[message.full_name] = self.message_schema(message)
        return {"$ref": f"#/components/schemas/{message.full_name}"}

    def message_schema(self, message: descriptor.Descriptor) -> dict[str, Any]:
        properties = {field.json_name: self.field_schema(field) for field in message.fields}
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        required = [field.json_name for field in message.fields if is_required(field)]
        if required:
            schema["required"] = required
        oneofs = [o for o in message.oneofs if not o.name.startswith("_")]
        if oneofs:
            schema["description"] = "; ".join(f"at most one of {', '.join(f.json_name for f in o.fields)}" for o in oneofs)
        return schema

    def field_schema(self, field: descriptor.FieldDescriptor) -> dict[str, Any]:
        entry = field.message_type  # None unless the field is a message (a map is one of entries)
        if field.type == FD.TYPE_MESSAGE and entry is not None and entry.GetOptions().map_entry:
            value = entry.fields_by_name["value"]
            return {"type": "object", "additionalProperties": self.single(value)}
        single = self.single(field)
        if field.is_repeated:
            return {"type": "array", "items": single}
        return single

    def single(self, field: descriptor.FieldDescriptor) -> dict[str, Any]:
        kind = field.type
        if kind == FD.TYPE_MESSAGE and field.message_type is not None:
            return self.ref(field.message_type)
        if kind == FD.TYPE_ENUM and field.enum_type is not None:
            return {"type": "string", "enum": [v.name for v in field.enum_type.values]}
        if kind in (FD.TYPE_DOUBLE, FD.TYPE_FLOAT):
            return {"type": "number"}
        if kind in INTEGER32:
            return {"type": "integer", "format": "int32"}
        if kind in INTEGER64:
            return {"type": "string", "format": "int64"}
        if kind == FD.TYPE_BOOL:
            return {"type": "boolean"}
        if kind == FD.TYPE_BYTES:
            return {"type": "string", "format": "byte"}
        return {"type": "string"}


def _operation(method: Method, builder: SchemaBuilder) -> dict[str, Any]:
    service = method.descriptor.containing_service.name
    output = builder.ref(method.descriptor.output_type)
    operation: dict[str, Any] = {
        "operationId": f"{service}.{method.descriptor.name}",
        "tags": [service],
        "x-grpc-method": method.path,
        "responses": {
            "default": {
                "description": "a Connect error",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ConnectError"}}},
            }
        },
    }
    if method != UPLOAD:
        request = builder.ref(method.descriptor.input_type)
        operation["requestBody"] = {
            # An empty body is the empty message, every field at its default (the Connect protocol).
            "required": False,
            "description": f"a {method.descriptor.input_type.full_name}: JSON, or binary protobuf as application/proto",
            "content": {
                "application/json": {"schema": request},
                PROTO_TYPE: {"schema": {"type": "string", "format": "binary"}, "x-message": request},
            },
        }
    if method.kind == "server_stream":
        name = method.descriptor.output_type.full_name
        operation["summary"] = f"{method.descriptor.name}: a server stream, as server-sent events or a Connect stream"
        operation["description"] = (
            "POST the request as JSON (`Accept: text/event-stream` optional) for server-sent events; a WatchCollection "
            "resumes after the `Last-Event-ID` header's cursor. Or POST it as one enveloped message with Content-Type "
            "`application/connect+json` (or `+proto`) for a Connect server stream (docs/http.md, Server streams)."
        )
        operation["requestBody"]["content"]["application/connect+json"] = {
            "schema": {"type": "string", "format": "binary"},
            "x-message": builder.ref(method.descriptor.input_type),
        }
        operation["parameters"] = [
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": "server-sent events: resume a WatchCollection after this cursor (the last event's `id`)",
            }
        ]
        operation["responses"]["200"] = {
            "description": f"text/event-stream: `event: message` with one {name} in JSON per message (`id:` its cursor, "
            "if any), then `event: end`; `event: error` with a ConnectError. application/connect+json: "
            f"enveloped messages (a flags byte, a 4-byte big-endian length, one {name} in JSON), the last "
            'one (flags 0x02) `{}` or `{"error": ConnectError}`; a Connect stream\'s errors are always '
            "in that last message, with HTTP 200.",
            "content": {
                "text/event-stream": {"schema": {"type": "string"}, "x-message": output},
                "application/connect+json": {"schema": {"type": "string", "format": "binary"}, "x-message": output},
            },
        }
    else:
        operation["responses"]["200"] = {
            "description": f"{method.descriptor.output_type.full_name}, in the request's encoding",
            "content": {
                "application/json": {"schema": output},
                PROTO_TYPE: {"schema": {"type": "string", "format": "binary"}, "x-message": output},
            },
        }
    return operation


def _get_operation(method: Method, builder: SchemaBuilder) -> dict[str, Any]:
    """The Connect GET of a method marked NO_SIDE_EFFECTS (docs/http.md, "GET requests")."""
    operation = _operation(method, builder)
    del operation["requestBody"]
    # encoding=proto answers binary protobuf (application/proto), encoding=json JSON.
    operation["operationId"] += "ByGet"
    operation["summary"] = f"{method.descriptor.name} as a Connect GET, which caches may keep (it changes nothing)"

    def query(name: str, required: bool, description: str, enum: list[str] | None = None) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string", **({"enum": enum} if enum else {})}
        return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}

    operation["parameters"] = [
        query(
            "encoding", True, "how `message` is encoded: json (the answer is JSON) or proto (binary protobuf)", ["json", "proto"]
        ),
        query(
            "message",
            True,
            f"the {method.descriptor.input_type.full_name}: its JSON, percent-encoded, or with "
            "base64=1 its bytes in URL-safe base64",
        ),
        query("base64", False, "1: `message` is base64", ["1"]),
        query("connect", False, "the Connect protocol version", ["v1"]),
        query("compression", False, "only identity is accepted", ["identity"]),
    ]
    return operation


def _upload(builder: SchemaBuilder) -> dict[str, Any]:
    operation = _operation(UPLOAD, builder)
    operation["summary"] = "UploadDocument: the file as the raw body; the gateway streams it with size and SHA-256"

    def query(name: str, description: str) -> dict[str, Any]:
        return {
            "name": name,
            "in": "query",
            "required": name == "filename",
            "schema": {"type": "string"},
            "description": description,
        }

    operation["parameters"] = [
        {"name": "collection", "in": "path", "required": True, "schema": {"type": "string"}},
        query("filename", "the file's name (or header X-Sluice-Filename)"),
        query("sha256", "the file's SHA-256 as 64 hex digits (or header X-Sluice-SHA256); refused on mismatch"),
        query("request_id", "idempotency key (or header Idempotency-Key)"),
        query("mime_type", "the media type (else Content-Type, else detected)"),
        query("typed_metadata", "a JSON map of MetadataValue (or header X-Sluice-Typed-Metadata)"),
        {
            "name": "metadata",
            "in": "query",
            "style": "deepObject",
            "explode": True,
            "schema": {"type": "object", "additionalProperties": {"type": "string"}},
            "description": "string metadata as metadata.KEY=VALUE",
        },
    ]
    operation["requestBody"] = {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
    return operation


DIFY_REQUEST = {
    "type": "object",
    "required": ["knowledge_id", "query"],
    "properties": {
        "knowledge_id": {"type": "string", "description": "the collection's name"},
        "query": {"type": "string"},
        "retrieval_setting": {
            "type": "object",
            "properties": {"top_k": {"type": "integer"}, "score_threshold": {"type": "number"}},
        },
        "metadata_condition": {
            "type": "object",
            "properties": {
                "logical_operator": {"type": "string", "enum": ["and", "or"]},
                "conditions": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "comparison_operator": {"type": "string"}, "value": {}},
                    },
                },
            },
        },
    },
}
DIFY_RESPONSE = {
    "type": "object",
    "properties": {
        "records": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "score": {"type": "number"},
                    "title": {"type": "string"},
                    "metadata": {"type": "object"},
                },
            },
        }
    },
}
DIFY_ERROR = {"type": "object", "properties": {"error_code": {"type": "integer"}, "error_msg": {"type": "string"}}}


def build_openapi(server_url: str = "") -> dict[str, Any]:
    builder = SchemaBuilder()
    paths: dict[str, Any] = {}
    for method in all_methods():
        if method == UPLOAD:
            paths["/v1/collections/{collection}/documents"] = {"post": _upload(builder)}
        elif method.kind in ("client_stream", "bidi"):
            continue  # gRPC only: the gateway answers 501 (ImportCollection)
        else:
            paths[method.path] = {"post": _operation(method, builder)}
            if method.takes_get:
                paths[method.path]["get"] = _get_operation(method, builder)
    paths["/retrieval"] = {
        "post": {
            "operationId": "Dify.Retrieval",
            "tags": ["Dify"],
            "summary": "Dify's External Knowledge API",
            "requestBody": {"required": True, "content": {"application/json": {"schema": DIFY_REQUEST}}},
            "responses": {
                "200": {"description": "records", "content": {"application/json": {"schema": DIFY_RESPONSE}}},
                "default": {
                    "description": "a Dify error (1001, 1002, 2001)",
                    "content": {"application/json": {"schema": DIFY_ERROR}},
                },
            },
        }
    }
    paths["/v1/documents/{id}/content"] = {
        "get": {
            "operationId": "DocumentService.DownloadDocument.Content",
            "tags": ["DocumentService"],
            "summary": "The document's original bytes, always as an attachment (sandboxed, never sniffed); "
            "ETag and X-Content-SHA256 carry its SHA-256",
            "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}, "description": "the document's id"}
            ],
            "responses": {
                "200": {
                    "description": "the bytes, with the stored media type",
                    "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
                },
                "default": {
                    "description": "a Connect error",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ConnectError"}}},
                },
            },
        }
    }
    paths["/v1/collections/{collection}/bundle"] = {
        "get": {
            "operationId": "DocumentService.ExportCollection.Bundle",
            "tags": ["DocumentService"],
            "summary": "The collection as a bundle (docs/bundles.md), an uncompressed tar streamed as it is read; "
            "a stream that fails or does not match its SHA-256 ends without its last chunk. Import it with the "
            "CLI or an SDK (a POST here answers 501)",
            "parameters": [
                {"name": "collection", "in": "path", "required": True, "schema": {"type": "string"}, "description": "its name"}
            ],
            "responses": {
                "200": {
                    "description": "the bundle",
                    "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}},
                },
                "default": {
                    "description": "a Connect error",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ConnectError"}}},
                },
            },
        }
    }
    paths["/healthz"] = {
        "get": {
            "operationId": "Gateway.Health",
            "security": [],
            "responses": {
                "200": {"description": "the gateway and both backends are SERVING"},
                "503": {"description": "a backend is not"},
            },
        }
    }
    paths["/openapi.json"] = {
        "get": {"operationId": "Gateway.OpenAPI", "security": [], "responses": {"200": {"description": "this document"}}}
    }
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "Sluice HTTP/JSON API",
            "version": "v1",
            "description": "Every public RPC of Sluice in the Connect protocol's unary shape (POST /<service>/<method>, "
            "protobuf JSON mapping), the read-only ones (marked NO_SIDE_EFFECTS) also as a Connect GET, server streams "
            "as server-sent events, uploads as a raw body. "
            "Authenticate with `Authorization: Bearer <Sluice API key>`.",
        },
        "paths": paths,
        "components": {
            "schemas": {**builder.schemas, "ConnectError": CONNECT_ERROR},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "a Sluice API key"}},
        },
        "security": [{"bearer": []}],
    }
    if server_url:
        document["servers"] = [{"url": server_url}]
    return document
