"""The gateway checks a call's credentials before its body (docs/http.md, "Keys"): a call without
a key is 401 whatever its body holds, and a key or tenant header that cannot be a key (a tab, a
non-ASCII letter: nothing gRPC metadata can carry) is 401 API_KEY_INVALID, never a 500."""

from __future__ import annotations

import httpx
import pytest

GET_COLLECTION = "/sluice.v1.DocumentService/GetCollection"
JSON = {"Content-Type": "application/json"}


def reason_of(response: httpx.Response) -> str:
    return response.json().get("reason", "")


# Header values as raw bytes: an accented letter in UTF-8, a tab. (A DEL or another control
# character never reaches the gateway: the HTTP server refuses the request with 400 first.)
HOSTILE_VALUES = [b"Bearer \xc3\xa9", b"Bearer slk_1\tsecret"]


@pytest.mark.parametrize("value", HOSTILE_VALUES, ids=["utf8", "tab"])
def test_a_key_outside_printable_ascii_is_401_on_every_path(stack, value):
    headers = [(b"authorization", value), (b"content-type", b"application/json")]
    with httpx.Client(base_url=stack.url, timeout=30) as client:
        post = client.post(GET_COLLECTION, content=b'{"name":"x"}', headers=headers)
        get = client.get(GET_COLLECTION, params={"encoding": "json", "message": '{"name":"x"}'}, headers=headers)
        upload = client.post(
            "/v1/collections/x/documents", content=b"hello", headers=[*headers[:1], (b"x-sluice-filename", b"a.txt")]
        )
        stream = client.post(
            "/sluice.v1.DocumentService/WatchCollection",
            content=b"\x00\x00\x00\x00\x0f" + b'{"collection":1}',
            headers=[headers[0], (b"content-type", b"application/connect+json")],
        )
        dify = client.post("/retrieval", content=b'{"knowledge_id":"x","query":"q"}', headers=headers)
    for response in (post, get, upload):
        assert response.status_code == 401, response.text
        assert reason_of(response) == "API_KEY_INVALID"
    # A Connect stream answers 200 and carries its error in the end-of-stream message.
    assert stream.status_code == 200 and b"unauthenticated" in stream.content and b"API_KEY_INVALID" in stream.content
    assert dify.status_code == 403 and dify.json()["error_code"] == 1002


def test_a_tenant_header_outside_printable_ascii_is_401(stack):
    headers = [
        (b"authorization", b"Bearer slk_1_x"),
        (b"x-sluice-tenant", b"caf\xc3\xa9"),
        (b"content-type", b"application/json"),
    ]
    with httpx.Client(base_url=stack.url, timeout=30) as client:
        response = client.post(GET_COLLECTION, content=b'{"name":"x"}', headers=headers)
    assert response.status_code == 401 and reason_of(response) == "API_KEY_INVALID", response.text


def test_without_a_key_a_malformed_body_is_401_not_400(stack):
    with httpx.Client(base_url=stack.url, timeout=30) as client:
        bad_json = client.post(GET_COLLECTION, content=b"{not json", headers=JSON)
        no_filename = client.post("/v1/collections/x/documents", content=b"hello")
        bad_get = client.get(GET_COLLECTION, params={"encoding": "json", "message": "{"})
    for response in (bad_json, no_filename, bad_get):
        assert response.status_code == 401, response.text
        assert reason_of(response) == "API_KEY_MISSING"
