"""Keys (stored as hashes, revoked everywhere within a second), quotas and the rate limit."""

from __future__ import annotations

import itertools
import time

import auth_keys
import grpc
import psycopg
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from ingest.helpers import Clients
from sluice.v1 import admin_service_pb2 as admin_pb2
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import document_service_pb2_grpc, search_service_pb2_grpc
from sluice.v1 import search_service_pb2 as ss
from sluice_common.auth import RateLimiter, describe_wait, parse_key
from sluice_common.channels import keyed_channel
from sluice_common.errors import reason_of

from .conftest import admin_stub, create_key, create_tenant


def counts(database_url: str) -> tuple[int, int, int]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM collections), (SELECT count(*) FROM documents),"
            " (SELECT count(*) FROM document_contents)"
        ).fetchone()


def test_the_keys_table_holds_no_usable_key(ingest_api, database_url):
    secrets = [create_key(ingest_api.address, "default", role) for role in ("admin", "client", "reader", "worker")]
    with psycopg.connect(database_url) as conn:
        dump = "\n".join(str(row) for row in conn.execute("SELECT * FROM api_keys"))
        dump += "\n".join(str(row) for row in conn.execute("SELECT encode(secret_sha256, 'hex') FROM api_keys"))
    for secret in [*secrets, *auth_keys.KEYS.values()]:
        key_id, key_secret = parse_key(secret)
        assert key_id in dump  # the public id is there…
        assert key_secret not in dump and secret not in dump  # …the secret is not
    listed = admin_stub(ingest_api.address).ListApiKeys(admin_pb2.ListApiKeysRequest(tenant="default")).api_keys
    assert all(k.prefix == f"slk_{k.id}_" for k in listed)
    assert not any(parse_key(s)[1] in str(listed) for s in secrets)


def test_a_revoked_key_is_refused_by_every_process_within_a_second(ingest_api_factory, database_url, search_server_address):
    first, second = ingest_api_factory(), ingest_api_factory()  # two ingest-api processes' worth
    key = create_key(first.address, "default", "client")
    ingest_stubs = [document_service_pb2_grpc.DocumentServiceStub(keyed_channel(s.address, key)) for s in (first, second)]
    search = search_service_pb2_grpc.SearchServiceStub(keyed_channel(search_server_address, key))
    Clients(first.address).create_collection("docs")
    query = ss.SearchRequest(collection="docs", query="anything", mode=ss.SEARCH_MODE_KEYWORD)
    for stub in ingest_stubs:  # every cache holds the key as valid now
        stub.ListCollections(ds.ListCollectionsRequest(), timeout=5)
    search.Search(query, timeout=5)
    admin_stub(first.address).RevokeApiKey(admin_pb2.RevokeApiKeyRequest(id=parse_key(key)[0]))
    with pytest.raises(grpc.RpcError) as err:  # the revoking process: at once
        ingest_stubs[0].ListCollections(ds.ListCollectionsRequest(), timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    time.sleep(1.0)  # the promise: refused everywhere within one second
    calls = [
        lambda: ingest_stubs[1].ListCollections(ds.ListCollectionsRequest(), timeout=5),
        lambda: search.Search(query, timeout=5),
    ]
    for call in calls:
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED and reason_of(err.value) == "API_KEY_INVALID"
        assert parse_key(key)[1] not in (err.value.details() or "")


def test_quotas_refuse_with_resource_exhausted_and_write_nothing(ingest_api, database_url):
    create_tenant(ingest_api.address, "small", max_documents=2, max_stored_bytes=1000, max_collections=1)
    key = create_key(ingest_api.address, "small", "client")
    small = Clients(ingest_api.address)
    small.channel = keyed_channel(ingest_api.address, key)
    small.docs = document_service_pb2_grpc.DocumentServiceStub(small.channel)
    small.create_collection("one")
    before = counts(database_url)
    with pytest.raises(grpc.RpcError) as err:
        small.create_collection("two")
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and reason_of(err.value) == "QUOTA_EXCEEDED"
    assert counts(database_url) == before
    small.upload("one", b"x" * 600)
    before = counts(database_url)
    with pytest.raises(grpc.RpcError) as err:  # 600 + 600 > 1000 stored bytes
        small.upload("one", b"y" * 600)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "stored bytes" in err.value.details()
    assert counts(database_url) == before
    small.upload("one", b"z" * 100)
    with pytest.raises(grpc.RpcError) as err:  # a third document
        small.upload("one", b"w" * 10)
    assert reason_of(err.value) == "QUOTA_EXCEEDED" and "2 documents" in err.value.details()
    tenants = {t.name: t for t in admin_stub(ingest_api.address).ListTenants(admin_pb2.ListTenantsRequest()).tenants}
    assert tenants["small"].usage.documents == 2 and tenants["small"].usage.stored_bytes == 700
    # Another tenant is not bound by small's quota.
    Clients(ingest_api.address).create_collection("plenty")


def test_the_rate_limit_answers_resource_exhausted_with_retry_info_and_writes_nothing(ingest_api_factory, database_url):
    server = ingest_api_factory(rate_limit_per_second=0.5, rate_limit_burst=3)
    clients = Clients(server.address)
    clients.create_collection("docs")  # 1
    clients.upload("docs", b"first")  # 2
    clients.docs.ListCollections(ds.ListCollectionsRequest())  # 3: the burst is spent
    before = counts(database_url)
    with pytest.raises(grpc.RpcError) as err:
        clients.upload("docs", b"second")
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and reason_of(err.value) == "RATE_LIMITED"
    status = rpc_status.from_call(err.value)
    retry = error_details_pb2.RetryInfo()
    assert any(d.Unpack(retry) for d in status.details)
    wait = retry.retry_delay.ToTimedelta().total_seconds()
    assert 0 < wait <= 2.0
    # The message names the same wait, readably, and the limit; ErrorInfo carries the limit.
    assert f"retry in {describe_wait(wait)}" in err.value.details() and "0.00" not in err.value.details()
    assert "limit 0.5 a second" in err.value.details()
    assert counts(database_url) == before
    # The limit is per key: another key of the same tenant is not limited by this one.
    other = document_service_pb2_grpc.DocumentServiceStub(
        keyed_channel(server.address, create_key(server.address, "default", "reader"))
    )
    other.ListCollections(ds.ListCollectionsRequest())


def test_token_bucket_refills_at_its_rate():
    now = [0.0]
    limiter = RateLimiter(2.0, 2.0, clock=lambda: now[0])
    assert limiter.take("k") == 0 and limiter.take("k") == 0
    assert limiter.take("k") == pytest.approx(0.5)
    now[0] += 0.5
    assert limiter.take("k") == 0
    assert limiter.take("other") == 0
    assert RateLimiter(0, 0).take("k") == 0  # disabled


def test_calls_refused_together_are_told_different_waits_one_token_apart():
    """The wait is never ~0 (the old hint said "retry in 0.00 s" when the next token was almost
    there) and a crowd refused at once is spread over the rate, not sent back all together."""
    now = [0.0]
    limiter = RateLimiter(100.0, 10.0, clock=lambda: now[0])
    assert all(limiter.take("k") == 0 for _ in range(10))
    now[0] += 0.0099  # 0.99 of a token: the next one is 0.1 ms away
    waits = [limiter.take("k") for _ in range(5)]
    assert waits[0] == pytest.approx(0.01)  # at least one token interval (10 ms), not 0.1 ms
    assert all(b - a == pytest.approx(0.01) for a, b in itertools.pairwise(waits))
    # Coming back when told, each gets a token in turn.
    now[0] += waits[0]
    assert limiter.take("k") == 0
    # A wait is capped at refilling the whole bucket (10 tokens: 100 ms), however many were refused.
    assert max(limiter.take("k") for _ in range(50)) == pytest.approx(0.1)
    # A slow limit names the time to the next token (2 s at 0.5 a second).
    slow = RateLimiter(0.5, 1.0, clock=lambda: now[0])
    assert slow.take("k") == 0 and slow.take("k") == pytest.approx(2.0)


def test_waits_read_as_people_read_them():
    assert describe_wait(0.0001) == "1 ms" and describe_wait(0.04) == "40 ms" and describe_wait(1.5) == "1.5 s"
