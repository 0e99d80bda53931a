"""HYBRID's document context (docs/search.md, "Document context"), over real PostgreSQL.

`document_vectors` (migration 0026) holds each document's normalised mean chunk vector per
index generation, kept by triggers on `chunks` whatever writes them; the vector side of HYBRID
scores a chunk (1 - w) x its own cosine similarity + w x its document's."""

from __future__ import annotations

import dataclasses

import numpy as np
import psycopg
import pytest
from auth_keys import search_url
from conftest import random_unit_vectors
from pgvector.psycopg import register_vector
from sluice_search.db import open_read_pool
from sluice_search.domain import DocumentFilter, Mode, SearchQuery
from sluice_search.repository import SearchRepository
from sluice_search.service import SearchService

DIMENSIONS = 8


def centroid(vectors) -> np.ndarray:
    mean = np.asarray(vectors, dtype=np.float64).mean(axis=0)
    return mean / np.linalg.norm(mean)


def stored(seed, document_id: str) -> dict[int, np.ndarray]:
    """generation id -> the document's stored vector."""
    rows = seed.conn.execute(
        "SELECT generation_id, embedding FROM document_vectors WHERE document_id = %s", (document_id,)
    ).fetchall()
    return {g: np.asarray(v.to_numpy(), dtype=np.float64) for g, v in rows}


def test_the_document_vector_follows_the_chunks_whatever_writes_them(seed):
    cid = seed.collection("ctx", DIMENSIONS)
    generation = seed.generation(cid)
    doc = seed.document(cid, "a.txt")
    vectors = random_unit_vectors(5, DIMENSIONS, seed=1)
    seed.chunks(cid, doc, ["one", "two", "three"], vectors[:3])
    assert np.allclose(stored(seed, doc)[generation], centroid(vectors[:3]), atol=1e-6)
    # A second statement adds chunks: the vector is computed again from all of them.
    seed.chunks(cid, doc, ["four", "five"], vectors[3:], start_index=3)
    assert np.allclose(stored(seed, doc)[generation], centroid(vectors), atol=1e-6)
    # Another document's chunks leave this one's vector alone.
    other = seed.document(cid, "b.txt")
    seed.chunks(cid, other, ["six"], random_unit_vectors(1, DIMENSIONS, seed=2))
    assert np.allclose(stored(seed, doc)[generation], centroid(vectors), atol=1e-6)
    # A commit replaces the chunks (delete, then insert, in one transaction): the new ones' vector.
    replacement = random_unit_vectors(2, DIMENSIONS, seed=3)
    with seed.conn.transaction():
        seed.conn.execute("DELETE FROM chunks WHERE document_id = %s", (doc,))
        seed.chunks(cid, doc, ["new one", "new two"], replacement)
    assert np.allclose(stored(seed, doc)[generation], centroid(replacement), atol=1e-6)
    # An UPDATE (a migration's) is a removal and an insertion: the vector follows it.
    moved = random_unit_vectors(1, DIMENSIONS, seed=7)[0]
    seed.conn.execute("UPDATE chunks SET embedding = %s WHERE document_id = %s AND chunk_index = 0", (moved, doc))
    assert np.allclose(stored(seed, doc)[generation], centroid([moved, replacement[1]]), atol=1e-6)
    # Chunks deleted: no vector. The document deleted: nothing left of it.
    seed.conn.execute("DELETE FROM chunks WHERE document_id = %s", (doc,))
    assert stored(seed, doc) == {}
    seed.delete(other)
    assert stored(seed, other) == {}
    assert seed.conn.execute("SELECT count(*) FROM document_vectors").fetchone()[0] == 0


def test_each_generation_has_its_own_document_vector(seed):
    cid = seed.collection("gens", DIMENSIONS)
    first = seed.generation(cid)
    doc = seed.document(cid, "a.txt")
    old = random_unit_vectors(2, DIMENSIONS, seed=4)
    seed.chunks(cid, doc, ["one", "two"], old)
    (building,) = seed.conn.execute(
        "INSERT INTO collection_generations (tenant_id, collection_id, number, embedder_provider, embedder_model, dimensions)"
        " SELECT tenant_id, id, 2, embedder_provider, embedder_model, dimensions FROM collections WHERE id = %s RETURNING id",
        (cid,),
    ).fetchone()
    new = random_unit_vectors(2, DIMENSIONS, seed=5)
    for index, vector in enumerate(new):  # one statement each, as two EMBED commits would not, but a bulk load might
        seed.conn.execute(
            "INSERT INTO chunks (document_id, tenant_id, collection_id, generation_id, chunk_index, text, embedding)"
            " SELECT %s, tenant_id, id, %s, %s, 'text', %s FROM collections WHERE id = %s",
            (doc, building, index, vector, cid),
        )
    vectors = stored(seed, doc)
    assert np.allclose(vectors[first], centroid(old), atol=1e-6)
    assert np.allclose(vectors[building], centroid(new), atol=1e-6)
    # Dropping a generation's chunks (a reindex cancelled or retired) drops its vectors alone.
    seed.conn.execute("DELETE FROM chunks WHERE generation_id = %s", (building,))
    assert set(stored(seed, doc)) == {first}


def test_another_tenant_reads_no_document_vector(seed, database_url):
    cid = seed.collection("mine", DIMENSIONS, tenant="acme")
    doc = seed.document(cid, "a.txt")
    seed.chunks(cid, doc, ["one"], random_unit_vectors(1, DIMENSIONS, seed=6))
    (acme,) = seed.conn.execute("SELECT id FROM tenants WHERE name = 'acme'").fetchone()
    seed.conn.execute("INSERT INTO tenants (name) VALUES ('globex') ON CONFLICT DO NOTHING")
    (globex,) = seed.conn.execute("SELECT id FROM tenants WHERE name = 'globex'").fetchone()
    with psycopg.connect(search_url(database_url), autocommit=True) as reader:
        register_vector(reader)
        counts = {}
        for tenant in (acme, globex):
            reader.execute("SELECT set_config('sluice.tenant_id', %s, false)", (str(tenant),))
            counts[tenant] = reader.execute("SELECT count(*) FROM document_vectors").fetchone()[0]
    assert counts == {acme: 1, globex: 0}


def basis(i: int) -> np.ndarray:
    v = np.zeros(DIMENSIONS, dtype=np.float32)
    v[i] = 1.0
    return v


def unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture
def two_documents(seed) -> tuple[int, str, str]:
    """The query is the first axis. `lone.txt`'s one chunk is a little nearer to it than any chunk
    of `about.txt`, but `about.txt` as a whole is about it: each of its three chunks leans to the
    query and away from it in another direction, and their mean points at the query."""
    cid = seed.collection("context", DIMENSIONS)
    lone = seed.document(cid, "lone.txt", metadata={"team": "docs"})
    seed.chunks(cid, lone, ["zzz lone"], [unit(0.78 * basis(0) + 0.6258 * basis(1))])
    about = seed.document(cid, "about.txt", metadata={"team": "docs"})
    seed.chunks(
        cid,
        about,
        ["zzz first", "zzz second", "zzz third"],
        [
            unit(0.77 * basis(0) + 0.64 * basis(2)),
            unit(0.77 * basis(0) + 0.64 * basis(3)),
            unit(0.77 * basis(0) + 0.64 * basis(4)),
        ],
    )
    (tenant,) = seed.conn.execute("SELECT tenant_id FROM collections WHERE id = %s", (cid,)).fetchone()
    return tenant, lone, about


@pytest.mark.parametrize(("weight", "first"), [(0.0, "lone.txt"), (0.2, "about.txt")])
@pytest.mark.parametrize("filtered", [False, True], ids=["whole", "filtered"])
async def test_hybrid_ranks_a_chunk_of_a_document_about_the_query_higher(database_url, two_documents, weight, first, filtered):
    """Unfiltered, four chunks answer through the exact scan after the graph (fewer than the 50
    asked); filtered, through the selective filter's statement: each wrapped as the graph's is."""
    tenant, _, _ = two_documents
    pool = await open_read_pool(
        search_url(database_url), min_size=1, max_size=2, ef_search=40, max_scan_tuples=20000, statement_timeout_ms=10000
    )
    try:
        search = SearchService(SearchRepository(pool, collection_cache_seconds=0), document_weight=weight)
        query = SearchQuery(
            collection="context",
            text="nothing matches",
            vector=list(basis(0)),
            mode=Mode.HYBRID,
            top_k=4,
            filter=DocumentFilter(metadata={"team": "docs"}) if filtered else DocumentFilter(),
        )
        hits = await search.search(tenant, query)
        assert hits[0].filename == first
        assert len(hits) == 4
        # VECTOR stays the chunks' own cosine similarity, whatever the weight.
        vector = await search.search(tenant, dataclasses.replace(query, mode=Mode.VECTOR))
        assert vector[0].filename == "lone.txt" and vector[0].score == pytest.approx(0.78, abs=1e-4)
    finally:
        await pool.close()
