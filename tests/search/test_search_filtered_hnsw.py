"""The filtered-HNSW trap (docs/architecture.md#search): most chunks belong to documents that are not READY,
and VECTOR search must still return exactly top_k READY hits with recall@10 ≥ 0.95."""

from __future__ import annotations

import itertools
import os
from urllib.parse import urlsplit

import numpy as np
import psycopg
import pytest
from conftest import Seeder
from conftest import embedding_like_vectors as random_unit_vectors
from pgvector.psycopg import register_vector
from sluice.v1 import search_service_pb2 as pb
from sluice_common import vector_index
from sluice_common.embedded_pg import database_uri, ensure_database
from sluice_search.domain import Collection, DocumentFilter
from sluice_search.vector_sql import vector_query

DIM = 64
DOCUMENTS = 200
CHUNKS_PER_DOCUMENT = 100  # 20,000 chunks
QUERIES = 40
NOT_READY = ["PENDING", "PARSING", "CHUNKING", "EMBEDDING", "INDEXING", "FAILED"]


_copies = itertools.count()


def load(seed: Seeder) -> tuple[int, list[str], np.ndarray]:
    cid = seed.collection("big", DIM, index=False)
    vectors = random_unit_vectors(DOCUMENTS * CHUNKS_PER_DOCUMENT, DIM, seed=7)
    documents = []
    for d in range(DOCUMENTS):
        doc = seed.document(cid, f"doc-{d}.txt")
        rows = slice(d * CHUNKS_PER_DOCUMENT, (d + 1) * CHUNKS_PER_DOCUMENT)
        seed.chunks(cid, doc, [f"chunk {d}/{i}" for i in range(CHUNKS_PER_DOCUMENT)], vectors[rows])
        documents.append(doc)
    seed.conn.execute("SET maintenance_work_mem = '256MB'")
    seed.conn.execute(vector_index.create_index_sql(seed.generation(cid), DIM))  # built over loaded data: faster
    seed.conn.execute("ANALYZE chunks, documents")
    return cid, documents, vectors


def drop_database(admin_uri: str, name: str) -> None:
    with psycopg.connect(admin_uri, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(psycopg.sql.Identifier(name)))


@pytest.fixture(scope="module")
def loaded(pg_admin_uri, template_uri):
    """The 20,000 chunks and their HNSW index, loaded once for the module into a database of their
    own (loading and indexing take half a minute or more); each test gets a copy of it."""
    name = f"hnsw_{os.getpid()}"
    ensure_database(pg_admin_uri, name, template=urlsplit(template_uri).path.lstrip("/"))
    seeder = Seeder(database_uri(pg_admin_uri, name))
    try:
        big = load(seeder)
    finally:
        seeder.close()  # CREATE DATABASE ... TEMPLATE needs the template without connections
    yield name, big
    drop_database(pg_admin_uri, name)


@pytest.fixture
def database_url(pg_admin_uri, loaded):
    """This module's test database: a fresh copy of the loaded one, made and dropped in the test's
    own setup and teardown like tests/conftest.py's `database_url` (see its note)."""
    name = f"t_{os.getpid()}_hnsw_{next(_copies)}"
    ensure_database(pg_admin_uri, name, template=loaded[0])
    yield database_uri(pg_admin_uri, name)
    drop_database(pg_admin_uri, name)


@pytest.fixture
def big(loaded):
    """(collection id, document ids, vectors) of the loaded data; the tests change statuses in
    their own copy only."""
    return loaded[1]


def active_generation(database_url, collection_id):
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT id FROM collection_generations WHERE collection_id = %s AND state = 'ACTIVE'", (collection_id,)
        ).fetchone()[0]


def set_not_ready(seed, documents, fraction):
    """Make the first `fraction` of the documents not READY (every non-READY status used)."""
    count = int(len(documents) * fraction)
    for i, doc in enumerate(documents):
        seed.set_status(doc, NOT_READY[i % len(NOT_READY)] if i < count else "READY")
    return set(documents[count:])


def exact_top(vectors, ready_rows, query, k):
    scores = vectors[ready_rows] @ query
    best = np.argsort(-scores, kind="stable")[:k]
    return [int(ready_rows[i]) for i in best]


@pytest.mark.parametrize("fraction", [0.5, 0.9])
async def test_vector_search_returns_top_k_ready_hits_with_high_recall(search_stub, seed, big, fraction):
    _cid, documents, vectors = big
    ready = set_not_ready(seed, documents, fraction)
    ready_rows = np.array(
        [
            r
            for d, doc in enumerate(documents)
            if doc in ready
            for r in range(d * CHUNKS_PER_DOCUMENT, (d + 1) * CHUNKS_PER_DOCUMENT)
        ]
    )
    queries = random_unit_vectors(QUERIES, DIM, seed=11)
    recalls = []
    for query in queries:
        response = await search_stub.Search(pb.SearchRequest(collection="big", query_vector=query.tolist(), top_k=10))
        assert len(response.hits) == 10
        assert {h.document_id for h in response.hits} <= ready
        # Chunk rows were COPYed in order, so the chunk id is row + 1.
        found = {int(h.chunk_id) - 1 for h in response.hits}
        recalls.append(len(found & set(exact_top(vectors, ready_rows, query, 10))) / 10)
    recall = float(np.mean(recalls))
    print(f"\nnon-READY {fraction:.0%}: recall@10 = {recall:.3f}")
    assert recall >= 0.95

    response = await search_stub.Search(pb.SearchRequest(collection="big", query_vector=queries[0].tolist(), top_k=100))
    assert len(response.hits) == 100 and {h.document_id for h in response.hits} <= ready


async def test_nearly_nothing_ready_still_returns_every_ready_chunk(search_stub, seed, big):
    """99.5% not READY: 100 READY chunks; top_k=100 returns exactly those 100 (exact fallback)."""
    _cid, documents, _vectors = big
    ready = set_not_ready(seed, documents, 0.995)
    query = random_unit_vectors(1, DIM, seed=3)[0]
    response = await search_stub.Search(pb.SearchRequest(collection="big", query_vector=query.tolist(), top_k=100))
    assert len(response.hits) == 100 and {h.document_id for h in response.hits} == ready
    scores = [h.score for h in response.hits]
    assert scores == sorted(scores, reverse=True)


def test_without_iterative_scan_the_filter_starves_results(database_url, seed, big):
    """The trap itself, measured: a plain HNSW scan yields ef_search candidates, and the READY
    join keeps ~10% of them, so LIMIT 10 is not reached. (Why search sets iterative_scan.)"""
    cid, documents, _vectors = big
    set_not_ready(seed, documents, 0.9)
    collection = Collection(
        cid, "big", "hashing", "hashing-v1", DIM, tenant_id=1, generation_id=active_generation(database_url, cid)
    )
    query, params = vector_query(collection, random_unit_vectors(1, DIM, seed=5)[0], 10, DocumentFilter())
    with psycopg.connect(database_url) as conn:
        register_vector(conn)
        conn.execute("SET hnsw.iterative_scan = off")
        conn.execute("SET hnsw.ef_search = 40")
        short = len(conn.execute(query, params).fetchall())
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        full = len(conn.execute(query, params).fetchall())
    assert short < 10 and full == 10


def test_partial_index_survives_a_generic_plan(database_url, big):
    """Collection id and dimension are literals, so even a forced generic plan of a prepared
    statement uses the collection's partial index; with the id as a parameter it could not."""
    cid, _, _ = big
    collection = Collection(
        cid, "big", "hashing", "hashing-v1", DIM, tenant_id=1, generation_id=active_generation(database_url, cid)
    )
    query, _ = vector_query(collection, [0.0] * DIM, 10, DocumentFilter())
    with psycopg.connect(database_url, autocommit=True) as conn:
        text = query.as_string(conn).replace("%(v)s", "$1")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE literal_id(vector) AS {text}")
        vec = "[" + ",".join(["0.1"] * DIM) + "]"
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN EXECUTE literal_id('{vec}')"))
        assert vector_index.index_name(collection.generation_id) in plan, plan

        gid = collection.generation_id
        bound = text.replace(f"c.generation_id = {gid}", "c.generation_id = $2")
        conn.execute(f"PREPARE bound_id(vector, bigint) AS {bound}")
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN EXECUTE bound_id('{vec}', {gid})"))
        assert vector_index.index_name(gid) not in plan
