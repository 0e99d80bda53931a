"""A collection's default reranker: checked and stored by CreateCollection, shown with its
defaults by GetCollection and ListCollections, and used by search unless a request says
otherwise (ingest-api, search and a local rerank server, real gRPC and HTTP)."""

from __future__ import annotations

import sys
from pathlib import Path

import auth_keys
import grpc
import pytest
from search_server import RunningSearch
from sluice.v1 import collection_pb2 as C
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import search_service_pb2 as sp
from sluice.v1 import search_service_pb2_grpc
from sluice_common.errors import error_info

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "search"))
from rerank_server import LocalRerankServer


@pytest.fixture
def server(monkeypatch):
    server = LocalRerankServer()
    monkeypatch.setenv("SLUICE_RERANK_ALLOWED_URLS", f"https://api.cohere.com/,{server.url}/")
    yield server
    server.close()


def test_the_default_reranker_is_stored_with_its_defaults(c, server):
    created = c.create_collection("ranked", reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_COHERE))
    expected = C.RerankerConfig(
        provider=C.RERANKER_PROVIDER_COHERE,
        model="rerank-v3.5",
        base_url="https://api.cohere.com",
        api_key_env="SLUICE_RERANK_COHERE_API_KEY",
        candidates=50,
        timeout_ms=1000,
    )
    assert created.reranker == expected
    assert c.docs.GetCollection(ds.GetCollectionRequest(name="ranked")).reranker == expected
    listed = {col.name: col for col in c.docs.ListCollections(ds.ListCollectionsRequest()).collections}
    assert listed["ranked"].reranker == expected and not listed["docs"].HasField("reranker")
    tei = c.create_collection(
        "tei",
        reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_TEI, base_url=server.url + "/", candidates=20, timeout_ms=250),
    )
    assert tei.reranker == C.RerankerConfig(provider=C.RERANKER_PROVIDER_TEI, base_url=server.url, candidates=20, timeout_ms=250)


@pytest.mark.parametrize(
    "config, words",
    [
        (C.RerankerConfig(provider=C.RERANKER_PROVIDER_TEI, base_url="http://10.0.0.1:8080"), "is not allowed"),
        (C.RerankerConfig(provider=C.RERANKER_PROVIDER_TEI), "needs a base_url"),
        (C.RerankerConfig(provider=C.RERANKER_PROVIDER_COHERE, api_key_env="sk-live-abcdef"), "not the key itself"),
        (C.RerankerConfig(provider=C.RERANKER_PROVIDER_CROSS_ENCODER, model="a/b"), "no path"),
        (C.RerankerConfig(provider=C.RERANKER_PROVIDER_COHERE, candidates=500), "candidates must be between 1 and 200"),
        (C.RerankerConfig(model="x"), "provider is required"),
    ],
)
def test_a_bad_default_reranker_is_refused(c, server, config, words):
    with pytest.raises(grpc.RpcError) as err:
        c.create_collection("bad", reranker=config)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and error_info(err.value).reason == "INVALID_RERANKER"
    assert words in err.value.details() and "sk-live" not in err.value.details()
    with pytest.raises(grpc.RpcError):
        c.docs.GetCollection(ds.GetCollectionRequest(name="bad"))


def test_search_uses_the_collections_reranker(c, server, database_url):
    c.create_collection(
        "ranked", reranker=C.RerankerConfig(provider=C.RERANKER_PROVIDER_TEI, base_url=server.url, timeout_ms=30000)
    )
    for text in ("A lamp.", "The keeper lit the lamp at the lighthouse.", "Rivers and mills."):
        c.upload(collection="ranked", content=text.encode())
        job = c.claim()
        c.run_to_indexing(job)
        c.complete(job, [text])
    search = RunningSearch(database_url)
    channel = auth_keys.channel(search.address)
    try:
        stub = search_service_pb2_grpc.SearchServiceStub(channel)
        response = stub.Search(sp.SearchRequest(collection="ranked", query="lighthouse keeper lamp", mode=sp.SEARCH_MODE_VECTOR))
        assert response.rerank.status == sp.RERANK_STATUS_APPLIED and response.rerank.provider == C.RERANKER_PROVIDER_TEI
        assert response.hits[0].text == "The keeper lit the lamp at the lighthouse."
        assert server.requests[-1].path == "/rerank"
        off = stub.Search(
            sp.SearchRequest(
                collection="ranked", query="lighthouse", mode=sp.SEARCH_MODE_VECTOR, rerank=sp.SearchRerank(disabled=True)
            )
        )
        assert off.rerank.status == sp.RERANK_STATUS_UNSPECIFIED
    finally:
        channel.close()
        search.stop()
