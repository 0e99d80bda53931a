"""Rough edge 1 (issue 13): search's collection cache must not outlive the collection.

Before, a collection deleted (and recreated under the same name) within the cache's 5 s was
still searched by its old id: OK with no hits instead of NOT_FOUND, and the recreated
collection's documents invisible. Now ingest-api's triggers NOTIFY `sluice_collections` on
create, delete and generation switch, search's listener drops the entry, and a short answer is
checked against the database, so the very next query is right."""

from __future__ import annotations

import auth_keys
import grpc
import pytest
from ingest.helpers import Clients, D, vector_for
from search_server import RunningSearch
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import search_service_pb2 as pb
from sluice.v1 import search_service_pb2_grpc
from sluice_common.errors import reason_of


@pytest.fixture
def search(database_url):
    server = RunningSearch(database_url, search_collection_cache_seconds=5.0)  # the production default
    yield search_service_pb2_grpc.SearchServiceStub(auth_keys.channel(server.address))
    server.stop()


def ready(c: Clients, text: str) -> str:
    doc = c.upload(content=text.encode())
    job = c.claim()
    c.run_to_indexing(job)
    assert c.complete(job, [text]).status == D.DOCUMENT_STATUS_READY
    return doc.id


def query(search, name: str = "docs"):
    return search.Search(pb.SearchRequest(collection=name, query_vector=vector_for("anything"), top_k=5))


def test_the_next_query_after_delete_and_recreate_sees_the_new_collection(ingest_api, search):
    c = Clients(ingest_api.address)
    c.create_collection("docs")
    old = ready(c, "old text")
    assert [h.document_id for h in query(search).hits] == [old]  # cached now

    c.docs.DeleteCollection(ds.DeleteCollectionRequest(name="docs", force=True))
    with pytest.raises(grpc.RpcError) as err:
        query(search)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and reason_of(err.value) == "COLLECTION_NOT_FOUND"

    c.create_collection("docs")
    new = ready(c, "new text")
    response = query(search)
    assert [h.document_id for h in response.hits] == [new]
    assert response.generation == 1 and response.embedder_model == "hashing-v1"
