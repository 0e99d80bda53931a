"""SearchRequest.generation (docs/search.md, "Searching another generation"): the BUILDING
generation of a real reindex in progress, beside the ACTIVE one, through real ingest-api (the
worker played by hand through JobService, as tests/ingest/test_generations.py does) and the real
search service with the production cache lifetime. The BUILDING generation's query is embedded
with its own embedder and answers only with the READY documents embedded into it so far; the
cached ACTIVE generation and the prepared statements never mix the two; a generation that is
gone, retired or cancelled, or another tenant's collection, is refused with a reason."""

from __future__ import annotations

import auth_keys
import grpc
import numpy as np
import pytest
from helpers import expect_error, wait_for
from ingest.helpers import Clients, D, vector_for
from search_server import RunningSearch
from sluice.v1 import collection_pb2 as C
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js
from sluice.v1 import search_service_pb2 as pb
from sluice.v1 import search_service_pb2_grpc
from sluice_common.embedders import HashingEmbedder

FAST = {"generation_sweep_seconds": 0.05, "retired_generation_grace_seconds": 30.0}
MODES = (pb.SEARCH_MODE_VECTOR, pb.SEARCH_MODE_KEYWORD, pb.SEARCH_MODE_HYBRID)
TEXTS = {
    "alpha.txt": ["alpha river lock keeper", "alpha mill on the river"],
    "beta.txt": ["beta river bridge", "beta castle by the river"],
}
QUERY = "river"


@pytest.fixture
def search(database_url):
    server = RunningSearch(database_url, search_collection_cache_seconds=5.0)  # the production default
    yield search_service_pb2_grpc.SearchServiceStub(auth_keys.channel(server.address))
    server.stop()


def hashing(model: str, dimensions: int) -> C.EmbedderConfig:
    return C.EmbedderConfig(provider=C.EMBEDDER_PROVIDER_HASHING, model=model, dimensions=dimensions)


def ready_document(c: Clients, filename: str) -> str:
    doc = c.upload(content="\n\n".join(TEXTS[filename]).encode(), filename=filename)
    job = c.claim()
    c.run_to_indexing(job)
    assert c.complete(job, TEXTS[filename]).status == D.DOCUMENT_STATUS_READY
    return doc.id


def ask(search, generation: int = 0, mode=pb.SEARCH_MODE_HYBRID, name: str = "docs", **kwargs) -> pb.SearchResponse:
    return search.Search(pb.SearchRequest(collection=name, query=QUERY, mode=mode, top_k=10, generation=generation, **kwargs))


def files(response: pb.SearchResponse) -> set[str]:
    return {h.filename for h in response.hits}


def states(c: Clients) -> list[tuple[int, int]]:
    return [(g.number, g.state) for g in c.docs.GetCollection(ds.GetCollectionRequest(name="docs")).generations]


def test_the_building_generation_of_a_reindex_in_progress_beside_the_active_one(ingest_api_factory, search, seed):
    c = Clients(ingest_api_factory(**FAST).address)
    c.create_collection("docs")  # hashing-v1, 8 dimensions
    documents = {name: ready_document(c, name) for name in TEXTS}
    c.docs.ReindexCollection(ds.ReindexCollectionRequest(name="docs", embedder=hashing("hashing-v2", 16)))
    # One of the two EMBED jobs completes: the new generation is partial, and stays BUILDING.
    job = c.claim()
    assert job.kind == js.JOB_KIND_EMBED and job.generation == 2
    embedded = next(name for name, doc in documents.items() if doc == job.document_id)
    left = next(name for name in TEXTS if name != embedded)
    c.complete(job, TEXTS[embedded], dimensions=16)
    assert states(c) == [(1, C.GENERATION_STATE_ACTIVE), (2, C.GENERATION_STATE_BUILDING)]

    for mode in MODES:
        active = ask(search, 0, mode)
        assert (active.generation, active.embedder_model, files(active)) == (1, "hashing-v1", set(TEXTS)), mode
        assert files(ask(search, 1, mode)) == set(TEXTS)
        building = ask(search, 2, mode)
        # Only the READY documents embedded into it so far: a reindex may be partial.
        assert (building.generation, building.embedder_model, files(building)) == (2, "hashing-v2", {embedded}), mode
        assert len(building.hits) == 2
    # The BUILDING generation's query is embedded with its own embedder (16 dimensions, hashing-v2):
    # every score is the cosine similarity of that vector to the stored one.
    query = np.asarray(HashingEmbedder("hashing-v2", 16).embed_one(QUERY))
    for hit in ask(search, 2, pb.SEARCH_MODE_VECTOR).hits:
        stored = np.asarray(vector_for(hit.text, 16))
        assert hit.score == pytest.approx(float(query @ stored / np.linalg.norm(query) / np.linalg.norm(stored)), abs=1e-6)
    # Explanations come from the generation searched.
    for hit in ask(search, 2, explain=True).hits:
        assert hit.explanation.keyword_score > 0 and hit.explanation.matched_terms == ["river"]

    # Neither the cached ACTIVE generation nor the prepared statements (after five runs) mix the
    # two: each answer is its own generation's, whichever was asked first and however often.
    for _ in range(7):
        for generation, expected in ((2, {embedded}), (0, set(TEXTS)), (2, {embedded}), (1, set(TEXTS))):
            for mode in MODES:
                response = ask(search, generation, mode)
                assert files(response) == expected and response.generation == (generation or 1)

    # No such generation, a bad number, another tenant's collection, a collection that is not there.
    error = expect_error(lambda: ask(search, 3), grpc.StatusCode.NOT_FOUND, "GENERATION_NOT_FOUND")
    assert "no generation 3" in error.details()
    error = expect_error(lambda: ask(search, -1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_GENERATION")
    assert "generation must be" in error.details() and "-1" in error.details()
    seed.collection("theirs", 8, tenant="another")
    for generation in (0, 1):
        expect_error(lambda g=generation: ask(search, g, name="theirs"), grpc.StatusCode.NOT_FOUND, "COLLECTION_NOT_FOUND")
        expect_error(lambda g=generation: ask(search, g, name="nowhere"), grpc.StatusCode.NOT_FOUND, "COLLECTION_NOT_FOUND")

    # The last EMBED job: the switch. Generation 2 is then the ACTIVE one, and 1 RETIRED (its
    # chunks still there for the grace period) is no longer searchable.
    last = c.claim()
    assert last.kind == js.JOB_KIND_EMBED and last.document_id == documents[left]
    c.complete(last, TEXTS[left], dimensions=16)
    wait_for(lambda: states(c) == [(1, C.GENERATION_STATE_RETIRED), (2, C.GENERATION_STATE_ACTIVE)], what="the switch")
    wait_for(lambda: ask(search, 0).generation == 2, what="search on generation 2")
    assert files(ask(search, 2)) == files(ask(search, 0)) == set(TEXTS)
    error = expect_error(lambda: ask(search, 1), grpc.StatusCode.FAILED_PRECONDITION, "GENERATION_NOT_SEARCHABLE")
    assert "RETIRED" in error.details()

    # A cancelled reindex's generation is refused too.
    c.docs.ReindexCollection(ds.ReindexCollectionRequest(name="docs", embedder=hashing("hashing-v3", 8)))
    assert ask(search, 3).generation == 3  # BUILDING, with nothing embedded yet: no hits
    assert ask(search, 3).hits == []
    c.docs.CancelReindex(ds.CancelReindexRequest(name="docs"))
    error = expect_error(lambda: ask(search, 3), grpc.StatusCode.FAILED_PRECONDITION, "GENERATION_NOT_SEARCHABLE")
    assert "CANCELLED" in error.details()
    assert ask(search, 0).generation == 2
    c.close()
