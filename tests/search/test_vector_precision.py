"""Vector precision per index generation (docs/search.md, "Vector precision"; migration 0023):
float4, halfvec and binary (re-scored exactly) HNSW indexes over the same float4 chunks, each
searched through a real search server. For each precision: recall@10 against exact search, the
partial index used by the very statement search runs (EXPLAIN, generic plan), exact scores,
and neither a non-READY document nor another tenant's chunk ever in an answer."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from conftest import embedding_like_vectors
from sluice.v1 import search_service_pb2 as pb
from sluice_common import vector_index
from sluice_search.domain import Collection, DocumentFilter
from sluice_search.vector_sql import vector_query

DIM = 384  # sentence-embedding size: binary quantization keeps one bit of each
DOCUMENTS = 40
CHUNKS_PER_DOCUMENT = 100  # 4,000 chunks, half of them in documents that are not READY
QUERIES = 50
# Measured on these vectors with search's defaults (ef_search 40, 100 binary candidates):
# recall@10 0.99-1.00 for every precision; the floor leaves room for the graph's randomness
# (pgvector draws each element's level at random) without letting a broken precision through
# (a binary index read without its re-score: 0.73 here, the Hamming top 10 against exact in numpy).
RECALL_FLOOR = 0.95


@pytest.fixture(params=vector_index.PRECISIONS)
def precise(request, seed):
    """A collection "vec" (default tenant) whose generation uses the precision, half of its
    documents not READY; another tenant's collection "vec" holding the very query vectors."""
    precision = request.param
    cid = seed.collection("vec", DIM, index=False)
    gid = seed.generation(cid)
    seed.conn.execute("UPDATE collection_generations SET vector_precision = %s WHERE id = %s", (precision, gid))
    vectors = embedding_like_vectors(DOCUMENTS * CHUNKS_PER_DOCUMENT, DIM, seed=3)
    queries = embedding_like_vectors(QUERIES, DIM, seed=4)
    ready, not_ready = set(), []
    for d in range(DOCUMENTS):
        doc = seed.document(cid, f"doc-{d}.txt")
        rows = slice(d * CHUNKS_PER_DOCUMENT, (d + 1) * CHUNKS_PER_DOCUMENT)
        seed.chunks(cid, doc, [f"chunk {d}/{i}" for i in range(CHUNKS_PER_DOCUMENT)], vectors[rows])
        (ready.add(doc) if d % 2 else not_ready.append(doc))
    # The query vectors themselves, in a non-READY document: the best match of every query if
    # the READY rule broke.
    hidden = seed.document(cid, "hidden.txt")
    seed.chunks(cid, hidden, [f"hidden {i}" for i in range(QUERIES)], queries)
    seed.set_status(hidden, "EMBEDDING")
    for doc in not_ready:
        seed.set_status(doc, "PARSING")
    # And in another tenant's collection of the same name, with the same precision.
    other = seed.collection("vec", DIM, index=False, tenant="other")
    seed.conn.execute(
        "UPDATE collection_generations SET vector_precision = %s WHERE id = %s", (precision, seed.generation(other))
    )
    foreign = seed.document(other, "foreign.txt")
    seed.chunks(other, foreign, [f"foreign {i}" for i in range(QUERIES)], queries)
    for collection_id in (cid, other):
        seed.conn.execute(vector_index.create_index_sql(seed.generation(collection_id), DIM, precision=precision))
    seed.conn.execute("ANALYZE chunks, documents")
    ready_rows = np.array([r for r in range(len(vectors)) if (r // CHUNKS_PER_DOCUMENT) % 2])
    return precision, cid, gid, vectors, queries, ready_rows, ready


async def test_recall_exact_scores_ready_only_and_tenancy_for_each_precision(search_stub, precise):
    precision, _, _, vectors, queries, ready_rows, ready = precise
    recalls = []
    for query in queries:
        response = await search_stub.Search(
            pb.SearchRequest(collection="vec", query_vector=query.tolist(), top_k=10, mode=pb.SEARCH_MODE_VECTOR)
        )
        assert len(response.hits) == 10
        assert {h.document_id for h in response.hits} <= ready  # never the hidden or another tenant's copy
        assert all(h.text.startswith("chunk ") for h in response.hits)
        # Every score is the exact cosine similarity on the float4 vectors, whatever the index.
        for hit in response.hits:
            assert hit.score == pytest.approx(float(vectors[int(hit.chunk_id) - 1] @ query), abs=1e-5)
        assert [h.score for h in response.hits] == sorted((h.score for h in response.hits), reverse=True)
        exact = ready_rows[np.argsort(-(vectors[ready_rows] @ query), kind="stable")[:10]]
        recalls.append(len({int(h.chunk_id) - 1 for h in response.hits} & set(exact.tolist())) / 10)
    recall = float(np.mean(recalls))
    print(f"\n{precision}: recall@10 = {recall:.3f}")
    assert recall >= RECALL_FLOOR


def test_the_statement_uses_the_generations_partial_index_for_each_precision(database_url, precise):
    """search's statement, prepared with a forced generic plan (as its pool prepares it), walks
    the generation's own partial index; the other tenant's generation index is not it."""
    precision, cid, gid, _, queries, _, _ = precise
    collection = Collection(cid, "vec", "hashing", "hashing-v1", DIM, tenant_id=1, generation_id=gid, vector_precision=precision)
    query, _ = vector_query(collection, queries[0], 10, DocumentFilter(), rescore_candidates=100)
    with psycopg.connect(database_url, autocommit=True) as conn:
        (indexdef,) = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (vector_index.index_name(gid),)
        ).fetchone()
        assert {"float4": "vector_cosine_ops", "halfvec": "halfvec_cosine_ops", "binary": "bit_hamming_ops"}[
            precision
        ] in indexdef
        text = query.as_string(conn).replace("%(v)s", "$1")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.execute(f"PREPARE vq(vector) AS {text}")
        vec = "[" + ",".join(f"{x:.6f}" for x in queries[0]) + "]"
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN EXECUTE vq('{vec}')"))
        assert f"Index Scan using {vector_index.index_name(gid)}" in plan, plan
        if precision == vector_index.BINARY:
            assert "Limit" in plan and plan.count("Sort") >= 1, plan  # the re-score's ORDER BY over the candidates
        # The exact fallback never uses it (its ORDER BY is an expression no index serves).
        exact, _ = vector_query(collection, queries[0], 10, DocumentFilter(), exact=True)
        conn.execute(f"PREPARE ex(vector) AS {exact.as_string(conn).replace('%(v)s', '$1')}")
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN EXECUTE ex('{vec}')"))
        assert vector_index.index_name(gid) not in plan, plan


@pytest.mark.parametrize("precise", [vector_index.BINARY], indirect=True)
def test_a_binary_generation_answers_top_k_even_with_fewer_candidates_asked(database_url, precise):
    """rescore_candidates below top_k still yields top_k rows (max of the two), best first."""
    precision, cid, gid, _, queries, _, ready = precise
    collection = Collection(cid, "vec", "hashing", "hashing-v1", DIM, tenant_id=1, generation_id=gid, vector_precision=precision)
    query, params = vector_query(collection, queries[1], 20, DocumentFilter(), rescore_candidates=5)
    with psycopg.connect(database_url, autocommit=True) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        rows = conn.execute(query, params).fetchall()
    assert len(rows) == 20
    distances = [float(r[-1]) for r in rows]
    assert distances == sorted(distances)
    assert {str(r[2]) for r in rows} <= ready
