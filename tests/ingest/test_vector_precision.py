"""A collection's vector precision through ingest-api (docs/search.md, "Vector precision";
migration 0023): CreateCollection records it on the collection and its first generation and
builds that precision's index; a reindex keeps it, or switches it (even with the same
embedder), and the generation records what its index is; a reindex bulk-loads its chunks and
builds its index once complete. Real PostgreSQL and gRPC; the worker played through JobService."""

from __future__ import annotations

import time

import grpc
import psycopg
from helpers import expect_error, wait_for
from sluice.v1 import collection_pb2
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js
from sluice_common import vector_index

from .helpers import Clients, D

G = collection_pb2
FAST = {"generation_sweep_seconds": 0.05, "retired_generation_grace_seconds": 0.3}
OPCLASS = {"float4": "vector_cosine_ops", "halfvec": "halfvec_cosine_ops", "binary": "bit_hamming_ops"}


def generations(url: str) -> list[tuple[int, str, str, str]]:
    """(number, state, vector_precision, the operator class of its index or "") of each generation."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT g.number, g.state::text, g.vector_precision, coalesce(i.indexdef, '') FROM collection_generations g"
            " LEFT JOIN pg_indexes i ON i.indexname = 'chunks_embedding_g' || g.id ORDER BY g.number"
        ).fetchall()
    return [(n, state, precision, next((op for op in OPCLASS.values() if op in d), "")) for n, state, precision, d in rows]


def reindex(c: Clients, precision: int, model: str = "hashing-v1", dimensions: int = 8) -> collection_pb2.Collection:
    embedder = G.EmbedderConfig(provider=G.EMBEDDER_PROVIDER_HASHING, model=model, dimensions=dimensions)
    return c.docs.ReindexCollection(ds.ReindexCollectionRequest(name="docs", embedder=embedder, vector_precision=precision))


def test_create_with_a_precision_then_reindex_to_another_with_the_same_embedder(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory(**FAST).address)
    created = c.create_collection("docs", vector_precision=G.VECTOR_PRECISION_HALFVEC)
    assert created.vector_precision == G.VECTOR_PRECISION_HALFVEC
    assert created.generations[0].vector_precision == G.VECTOR_PRECISION_HALFVEC
    assert generations(database_url) == [(1, "ACTIVE", "halfvec", "halfvec_cosine_ops")]

    # The same embedder and precision: nothing to do.
    expect_error(lambda: reindex(c, G.VECTOR_PRECISION_UNSPECIFIED), grpc.StatusCode.FAILED_PRECONDITION, "EMBEDDER_UNCHANGED")
    # The same embedder, another precision: a new generation with a binary index; with no
    # READY document it switches at once, and the collection takes the new precision.
    switched = reindex(c, G.VECTOR_PRECISION_BINARY)
    wait_for(
        lambda: c.docs.GetCollection(ds.GetCollectionRequest(name="docs")).generations[-1].state == G.GENERATION_STATE_ACTIVE
    )
    switched = c.docs.GetCollection(ds.GetCollectionRequest(name="docs"))
    assert switched.vector_precision == G.VECTOR_PRECISION_BINARY
    assert [(g.number, g.vector_precision) for g in switched.generations] == [
        (1, G.VECTOR_PRECISION_HALFVEC),
        (2, G.VECTOR_PRECISION_BINARY),
    ]
    assert generations(database_url)[1] == (2, "ACTIVE", "binary", "bit_hamming_ops")

    # A reindex to another embedder without a precision keeps the collection's (binary).
    reindex(c, G.VECTOR_PRECISION_UNSPECIFIED, model="hashing-v2", dimensions=16)
    wait_for(lambda: generations(database_url)[-1][:2] == (3, "ACTIVE"))
    assert generations(database_url)[-1] == (3, "ACTIVE", "binary", "bit_hamming_ops")


def test_a_collection_without_a_precision_is_halfvec_and_an_unknown_one_is_refused(ingest_api_factory, database_url):
    c = Clients(ingest_api_factory().address)
    created = c.create_collection("docs")
    assert created.vector_precision == G.VECTOR_PRECISION_HALFVEC
    assert generations(database_url) == [(1, "ACTIVE", "halfvec", "halfvec_cosine_ops")]
    expect_error(
        lambda: c.create_collection("other", vector_precision=7), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_VECTOR_PRECISION"
    )
    expect_error(lambda: reindex(c, 9), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_VECTOR_PRECISION")


def ready_document(c: Clients, text: str) -> str:
    doc = c.upload(content=text.encode())
    job = c.claim()
    c.run_to_indexing(job)
    assert c.complete(job, [text, text + " again"]).status == D.DOCUMENT_STATUS_READY
    return doc.id


def test_a_reindex_bulk_loads_its_chunks_then_builds_its_index_once_complete(ingest_api_factory, database_url):
    """No HNSW index while EMBED jobs insert the new generation's chunks; the last one's commit
    builds it (with the generation's precision) over all of them, then switches."""
    c = Clients(ingest_api_factory(**FAST).address)
    c.create_collection("docs")
    ready_document(c, "alpha text")
    ready_document(c, "beta text")
    reindex(c, G.VECTOR_PRECISION_HALFVEC, model="hashing-v2", dimensions=16)
    assert generations(database_url)[1] == (2, "BUILDING", "halfvec", "")
    first, second = c.claim(), c.claim()
    assert first.kind == js.JOB_KIND_EMBED and second.kind == js.JOB_KIND_EMBED
    c.complete(first, ["alpha text new"], dimensions=16)
    time.sleep(3 * FAST["generation_sweep_seconds"])  # sweeps pass: still no index, one job open
    assert generations(database_url)[1] == (2, "BUILDING", "halfvec", "")
    c.complete(second, ["beta text new"], dimensions=16)
    wait_for(lambda: generations(database_url)[1][:2] == (2, "ACTIVE"))
    assert generations(database_url)[1] == (2, "ACTIVE", "halfvec", "halfvec_cosine_ops")
    with psycopg.connect(database_url) as conn:
        (valid,) = conn.execute(vector_index.index_state_sql(generation_id(database_url, 2))).fetchone()
    assert valid


def generation_id(url: str, number: int) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT id FROM collection_generations WHERE number = %s", (number,)).fetchone()[0]
