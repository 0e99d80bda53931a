"""Server streams through sluice-gateway (docs/http.md, "Server streams"): the Connect protocol's
server streams (`application/connect+json` and `+proto`: enveloped messages, an end-of-stream
message with the error), server-sent events, and a client that goes away cancelling the
backend's stream (no stream left open on ingest-api). Real ingest-api, search, gateway and
sockets."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest
from helpers import wait_for
from sluice.v1 import document_pb2
from sluice.v1 import document_service_pb2 as ds

from gateway.conftest import key_headers
from gateway.test_gateway import TEXT, WATCH_COLLECTION, WATCH_DOCUMENT, create_collection, events, upload

CONNECT_JSON = {"Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"}
CONNECT_PROTO = {"Content-Type": "application/connect+proto", "Connect-Protocol-Version": "1"}


def envelope(payload: bytes, flags: int = 0) -> bytes:
    return bytes((flags,)) + len(payload).to_bytes(4, "big") + payload


def frames(response: httpx.Response):
    """(flags, payload) of each enveloped message, as they arrive."""
    buffer = b""
    for chunk in response.iter_bytes():
        buffer += chunk
        while len(buffer) >= 5 and len(buffer) >= 5 + int.from_bytes(buffer[1:5], "big"):
            length = int.from_bytes(buffer[1:5], "big")
            yield buffer[0], buffer[5 : 5 + length]
            buffer = buffer[5 + length :]
    assert buffer == b"", f"{len(buffer)} bytes after the last whole message"


def connect_stream(http: httpx.Client, path: str, request: dict) -> tuple[list[dict], dict]:
    """The messages of a Connect JSON stream and its end-of-stream message."""
    messages = []
    with http.stream("POST", path, content=envelope(json.dumps(request).encode()), headers=CONNECT_JSON) as response:
        assert response.status_code == 200  # a Connect stream's errors are in its last message
        assert response.headers["content-type"] == "application/connect+json"
        for flags, payload in frames(response):
            if flags == 0x02:
                return messages, json.loads(payload)
            assert flags == 0
            messages.append(json.loads(payload))
    raise AssertionError("the stream ended without an end-of-stream message")


def test_watch_document_as_a_connect_json_stream_to_ready(http):
    create_collection(http)
    document = upload(http, "docs", "leases.txt", TEXT).json()
    messages, end = connect_stream(http, WATCH_DOCUMENT, {"id": document["id"]})
    assert end == {}  # ended well: no error
    statuses = [m["document"]["status"] for m in messages]
    assert statuses[-1] == "DOCUMENT_STATUS_READY", statuses
    assert all(m["document"]["id"] == document["id"] for m in messages)


def test_watch_document_as_a_connect_proto_stream(http):
    create_collection(http)
    document = upload(http, "docs", "leases.txt", TEXT).json()
    request = ds.WatchDocumentRequest(id=document["id"]).SerializeToString()
    with http.stream("POST", WATCH_DOCUMENT, content=envelope(request), headers=CONNECT_PROTO) as response:
        assert response.headers["content-type"] == "application/connect+proto"
        received = list(frames(response))
    *messages, (last_flags, last) = received
    assert last_flags == 0x02 and json.loads(last) == {}
    events_ = [document_pb2.DocumentEvent.FromString(payload) for flags, payload in messages if flags == 0]
    assert events_[-1].document.status == document_pb2.DOCUMENT_STATUS_READY
    assert events_[-1].document.id == document["id"]


def test_connect_stream_errors_are_in_the_end_of_stream_message(stack, http):
    create_collection(http)
    # No such document: the backend's NOT_FOUND, with its reason and details.
    messages, end = connect_stream(http, WATCH_DOCUMENT, {"id": "00000000-0000-0000-0000-000000000000"})
    assert messages == []
    assert end["error"]["code"] == "not_found" and end["error"]["reason"] == "DOCUMENT_NOT_FOUND", end
    assert any(d["type"] == "google.rpc.ErrorInfo" for d in end["error"]["details"])
    # No key: unauthenticated, still a 200 with the error in its last message.
    with httpx.Client(base_url=stack.url, timeout=30) as anonymous:
        _, end = connect_stream(anonymous, WATCH_COLLECTION, {"collection": "docs"})
    assert end["error"]["code"] == "unauthenticated", end
    # A request that is not one enveloped message, or is not the method's JSON.
    for body, reason in (
        (b"{}", "INVALID_ENVELOPE"),
        (envelope(b"{}") + b"x", "INVALID_ENVELOPE"),
        (envelope(b'{"nope": 1}'), "INVALID_JSON"),
        (envelope(b"{}", flags=0x01), "UNSUPPORTED_ENCODING"),
    ):
        response = http.post(WATCH_DOCUMENT, content=body, headers=CONNECT_JSON)
        assert response.status_code == 200
        ((flags, payload),) = list(frames(response))
        assert flags == 0x02 and json.loads(payload)["error"]["reason"] == reason, payload
    # A unary method asked for as a stream.
    response = http.post("/sluice.v1.DocumentService/GetCollection", content=envelope(b'{"name": "docs"}'), headers=CONNECT_JSON)
    ((_, payload),) = list(frames(response))
    assert json.loads(payload)["error"]["code"] == "unimplemented"


def test_sse_with_accept_event_stream(http):
    create_collection(http)
    document = upload(http, "docs", "leases.txt", TEXT).json()
    with http.stream("POST", WATCH_DOCUMENT, json={"id": document["id"]}, headers={"Accept": "text/event-stream"}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        seen = [(event, data) for event, _, data in events(response)]
    assert seen[-1] == ("end", {})
    assert seen[-2][1]["document"]["status"] == "DOCUMENT_STATUS_READY"


def open_watchers() -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("sluice_collection_watchers") or 0.0


def gateway_streams(name: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, {"method": "DocumentService.WatchCollection"}) or 0.0


def raw_watch(url: str, content_type: str, body: bytes) -> socket.socket:
    """A WatchCollection request on a raw socket, its answer's head read: the test decides when
    the client goes away (closing the socket, as a killed curl or a closed browser tab does)."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
    head = (
        f"POST {WATCH_COLLECTION} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: {content_type}\r\n"
        f"Authorization: {key_headers()['Authorization']}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(4096)
    assert received.startswith(b"HTTP/1.1 200"), received
    return sock


@pytest.mark.parametrize("shape", ["sse", "connect"])
def test_a_client_that_goes_away_cancels_the_backend_stream(stack, http, shape):
    create_collection(http)
    upload(http, "docs", "leases.txt", TEXT)
    watchers, cancelled = open_watchers(), gateway_streams("sluice_gateway_streams_cancelled_total")
    request = {"collection": "docs", "startFromOldest": True}
    if shape == "sse":
        sock = raw_watch(stack.url, "application/json", json.dumps(request).encode())
    else:
        sock = raw_watch(stack.url, "application/connect+json", envelope(json.dumps(request).encode()))
    wait_for(lambda: open_watchers() == watchers + 1, 30, what="ingest-api to hold the forwarded watch")
    assert gateway_streams("sluice_gateway_streams_open") == 1
    sock.close()  # the client goes away; the collection stays idle, so nothing else would be written
    wait_for(lambda: open_watchers() == watchers, 30, what="ingest-api's stream to be cancelled")
    assert gateway_streams("sluice_gateway_streams_open") == 0
    assert gateway_streams("sluice_gateway_streams_cancelled_total") == cancelled + 1
