"""Every unary and server-streaming method of the public services, called with requests built
from its own descriptor and filled with hostile values (paths, SQL, format strings, NUL, 5,000
characters, emoji, NaN, infinities, unknown enum numbers, extreme integers, broken URLs, cron
lines, other tenants' ids), by each role, against real servers (docs/contributing.md, Tests).

No answer may be INTERNAL or UNKNOWN: a request the server cannot take is the client's error, with
its status and a readable message. What the answers say is scanned for server internals as in
every test (tests/client_messages.py). The generator is seeded: a failure names the method and
the request, and comes back the same way."""

from __future__ import annotations

import itertools
import math
import random

import auth_keys
import grpc
import pytest
from google.protobuf import descriptor
from ingest.helpers import Clients
from search_server import RunningSearch
from sluice.v1 import (
    admin_service_pb2,
    document_service_pb2,
    search_service_pb2,
    source_service_pb2,
    webhook_service_pb2,
)

HOSTILE = [
    "",
    "docs",
    "../../../etc/passwd",
    "/etc/passwd",
    "a" * 5000,
    "\x00nul",
    "'; DROP TABLE chunks; --",
    "%s%s%n{0}{}",
    "file:///etc/passwd",
    "http://[::1",
    "ext::sh -c touch% /tmp/pwned",
    "s3://bucket/../../x",
    "00000000-0000-0000-0000-000000000000",
    "not-a-uuid",
    "collections/docs/documents/x",
    '{"$gt": 1}',
    "😀" * 300,
    "-1",
    "1e309",
    "*/5 * * * *",
    "http://127.0.0.1:1/hook",
    "https://example.invalid/x",
    "git@github.com:x/y.git",
    "C:\\Windows\\system32",
    "~/.ssh/id_rsa",
    "slk_aaaaaaaaaaaa_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
]
INTEGERS = [-1, 0, 1, 2**31 - 1, -(2**31)]
FLOATS = [-1.0, 0.5, math.nan, math.inf, -math.inf, 1e300]
SERVICES = [
    (document_service_pb2, "DocumentService"),
    (search_service_pb2, "SearchService"),
    (webhook_service_pb2, "WebhookService"),
    (source_service_pb2, "SourceService"),
    (admin_service_pb2, "AdminService"),
]
CALLS_PER_METHOD = 40
F = descriptor.FieldDescriptor
UNSIGNED = {F.TYPE_UINT32, F.TYPE_UINT64, F.TYPE_FIXED32, F.TYPE_FIXED64}


def fill(message, rnd: random.Random, depth: int = 0) -> None:
    """Set about two thirds of `message`'s fields, nested messages to depth 3, to hostile values."""
    for field in message.DESCRIPTOR.fields:
        if rnd.random() < 0.3:
            continue
        current = getattr(message, field.name)
        if field.message_type is not None:
            if field.message_type.GetOptions().map_entry:
                if field.message_type.fields_by_name["value"].type == F.TYPE_STRING:
                    current[rnd.choice(HOSTILE) or "key"] = rnd.choice(HOSTILE)
            elif depth < 3 and not field.message_type.full_name.startswith("google.protobuf."):
                nested = current.add() if hasattr(current, "add") else current
                fill(nested, rnd, depth + 1)
                if not hasattr(current, "add"):
                    nested.SetInParent()
            continue
        value = scalar(field, rnd)
        if hasattr(current, "append"):
            current.append(value)
        else:
            setattr(message, field.name, value)


def scalar(field, rnd: random.Random):
    if field.type == F.TYPE_STRING:
        return rnd.choice(HOSTILE)
    if field.type == F.TYPE_BYTES:
        return rnd.choice([b"", b"\x00" * 10, b"junk"])
    if field.type == F.TYPE_BOOL:
        return rnd.random() < 0.5
    if field.type == F.TYPE_ENUM:
        return rnd.choice([*(v.number for v in field.enum_type.values), 999])
    if field.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        return rnd.choice(FLOATS)
    value = rnd.choice(INTEGERS)
    return abs(value) if field.type in UNSIGNED else value


def message_class(message_descriptor):
    module = message_descriptor.file.name.rsplit("/", 1)[-1].replace(".proto", "_pb2")
    return getattr(__import__(f"sluice.v1.{module}", fromlist=["_"]), message_descriptor.name)


@pytest.fixture
def servers(ingest_api, database_url):
    search = RunningSearch(database_url)
    try:
        Clients(ingest_api.address).create_collection("docs")  # a collection some requests name
        yield {"SearchService": search.address, "other": ingest_api.address}
    finally:
        search.stop()


def test_hostile_requests_to_every_public_method_get_a_clients_error_never_an_internal_one(servers):
    rnd = random.Random(21)
    internal, codes = [], {}
    for module, service in SERVICES:
        address = servers.get(service, servers["other"])
        with grpc.insecure_channel(address) as channel:
            for method in module.DESCRIPTOR.services_by_name[service].methods:
                if method.client_streaming:
                    continue  # UploadDocument: its own tests (tests/ingest/test_upload_integrity.py)
                request_class, response_class = message_class(method.input_type), message_class(method.output_type)
                call = (channel.unary_stream if method.server_streaming else channel.unary_unary)(
                    f"/sluice.v1.{service}/{method.name}",
                    request_serializer=request_class.SerializeToString,
                    response_deserializer=response_class.FromString,
                )
                for _ in range(CALLS_PER_METHOD):
                    request = request_class()
                    fill(request, rnd)
                    role = rnd.choice(["admin", "client", "reader"])
                    try:
                        answer = call(request, metadata=auth_keys.metadata(role), timeout=5)
                        if method.server_streaming:
                            list(itertools.islice(answer, 3))
                        code = "OK"
                    except grpc.RpcError as error:
                        code = error.code().name
                        if error.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN) or not error.details():
                            internal.append(f"{service}.{method.name} as {role}: {code} {error.details()!r} for {request}"[:600])
                    codes[code] = codes.get(code, 0) + 1
    print("answers:", codes)
    assert not internal, "\n".join(internal)
    assert codes.get("INVALID_ARGUMENT", 0) > 100 and codes.get("OK", 0) > 0, codes
