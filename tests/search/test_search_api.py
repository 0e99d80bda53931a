"""Search over gRPC against a real PostgreSQL: modes, hits, filters, READY visibility."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import psycopg
import pytest
from sluice.v1 import search_service_pb2 as pb
from sluice_common.embedders import get_embedder
from sluice_common.errors import error_info

DIM = 256
VECTOR = pb.SEARCH_MODE_VECTOR
KEYWORD = pb.SEARCH_MODE_KEYWORD
HYBRID = pb.SEARCH_MODE_HYBRID


def embed(texts):
    embedder = get_embedder("hashing", "hashing-v1", DIM)
    return [embedder.embed_one(t) for t in texts]


@pytest.fixture
def library(seed):
    """A small collection: two READY documents, one PENDING, one FAILED, with hashing vectors."""
    cid = seed.collection("library", DIM)
    docs = {}
    corpus = {
        "rivers.txt": (
            ["The Rhine flows through Basel and Cologne to the North Sea.", "长江是中国最长的河流，流经上海入海。"],  # noqa: RUF001 - CJK punctuation, meant
            {"topic": "geo", "lang": "mixed"},
        ),
        "pg.md": (
            ["PostgreSQL full text search ranks documents with ts_rank_cd.", "pgvector adds HNSW indexes for cosine distance."],
            {"topic": "db", "lang": "en"},
        ),
        "draft.txt": (["The Rhine draft that is still being ingested."], {"topic": "geo"}),
        "broken.txt": (["The Rhine broken document that failed."], {"topic": "geo"}),
    }
    status = {"draft.txt": "EMBEDDING", "broken.txt": "FAILED"}
    for filename, (texts, meta) in corpus.items():
        mime = "text/markdown" if filename.endswith(".md") else "text/plain"
        doc = seed.document(cid, filename, status=status.get(filename, "READY"), metadata=meta, mime_type=mime)
        seed.chunks(cid, doc, texts, embed(texts))
        docs[filename] = doc
    return docs


async def search(stub, **kwargs):
    kwargs.setdefault("collection", "library")
    return await stub.Search(pb.SearchRequest(**kwargs))


async def test_vector_search_by_text_returns_ready_chunks_with_positions(search_stub, library):
    response = await search(search_stub, query="Rhine Basel Cologne", mode=VECTOR, top_k=10)
    assert response.mode == VECTOR
    assert len(response.hits) == 4  # every READY chunk, nothing else
    top = response.hits[0]
    assert top.filename == "rivers.txt" and top.document_id == library["rivers.txt"]
    assert top.chunk_index == 0 and top.page_number == 1 and top.element_type == "NarrativeText"
    assert top.metadata == {"topic": "geo", "lang": "mixed"}
    assert 0 < top.score <= 1.0
    assert [h.score for h in response.hits] == sorted((h.score for h in response.hits), reverse=True)
    assert {h.filename for h in response.hits} == {"rivers.txt", "pg.md"}


async def test_vector_search_by_query_vector(search_stub, library):
    vector = embed(["pgvector adds HNSW indexes for cosine distance."])[0]
    response = await search(search_stub, query_vector=vector, top_k=1)
    assert response.mode == VECTOR  # unspecified without text
    assert response.hits[0].text.startswith("pgvector") and response.hits[0].score == pytest.approx(1.0, abs=1e-5)


async def test_keyword_search_english_and_chinese_with_highlights(search_stub, library):
    response = await search(search_stub, query="rhine", mode=KEYWORD)
    assert [h.filename for h in response.hits] == ["rivers.txt"]
    hit = response.hits[0]
    assert [hit.text[s.start : s.end] for s in hit.highlights] == ["Rhine"]

    response = await search(search_stub, query="最长的河流", mode=KEYWORD)
    hit = response.hits[0]
    assert hit.filename == "rivers.txt" and hit.chunk_index == 1
    assert [hit.text[s.start : s.end] for s in hit.highlights] == ["最长", "河流"]


async def test_keyword_search_ranks_more_matches_first(search_stub, library):
    response = await search(search_stub, query="postgresql text search ranks", mode=KEYWORD)
    assert response.hits[0].filename == "pg.md" and response.hits[0].chunk_index == 0
    assert response.hits[0].score > 0


async def test_hybrid_is_the_default_with_text(search_stub, library):
    response = await search(search_stub, query="HNSW cosine")
    assert response.mode == HYBRID
    assert response.hits[0].text.startswith("pgvector")
    assert response.hits[0].highlights


async def test_filters(search_stub, library):
    async def filenames(**filter_kwargs):
        response = await search(search_stub, query="the", mode=VECTOR, filter=pb.SearchFilter(**filter_kwargs))
        return sorted({h.filename for h in response.hits})

    assert await filenames(metadata={"topic": "db"}) == ["pg.md"]
    assert await filenames(metadata={"topic": "geo", "lang": "mixed"}) == ["rivers.txt"]
    assert await filenames(metadata={"topic": "geo", "lang": "en"}) == []
    assert await filenames(filenames=["pg.md", "draft.txt"]) == ["pg.md"]
    assert await filenames(mime_types=["text/plain"]) == ["rivers.txt"]
    assert await filenames(document_ids=[library["pg.md"], library["draft.txt"]]) == ["pg.md"]


async def test_not_ready_documents_never_appear_and_leave_at_once(search_stub, library, seed):
    async def visible():
        found = set()
        for mode in (VECTOR, KEYWORD, HYBRID):
            response = await search(search_stub, query="Rhine", mode=mode, top_k=100)
            found |= {h.filename for h in response.hits}
        return found

    assert await visible() == {"rivers.txt", "pg.md"}
    seed.set_status(library["draft.txt"], "READY")
    assert "draft.txt" in await visible()
    seed.set_status(library["rivers.txt"], "PENDING")  # not READY, its chunks kept: rule 3 alone hides it
    assert "rivers.txt" not in await visible()
    seed.delete(library["pg.md"])
    assert await visible() == {"draft.txt"}


async def test_unknown_collection_is_not_found(search_stub, library):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await search(search_stub, collection="nope", query="x")
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert error_info(err.value).reason == "COLLECTION_NOT_FOUND"
    assert "nope" in err.value.details()


@pytest.mark.parametrize(
    ("kwargs", "reason", "words"),
    [
        ({}, "EMPTY_QUERY", "query"),
        ({"query": "   "}, "EMPTY_QUERY", "query"),
        ({"query": "x", "top_k": 101}, "TOP_K_OUT_OF_RANGE", "top_k"),
        ({"query": "x", "top_k": -1}, "TOP_K_OUT_OF_RANGE", "top_k"),
        ({"query_vector": [0.1] * (DIM - 1)}, "VECTOR_DIMENSION_MISMATCH", "dimensions"),
        ({"query_vector": [float("nan")] + [0.1] * (DIM - 1)}, "INVALID_VECTOR", "NaN"),
        ({"query_vector": [0.0] * DIM}, "INVALID_VECTOR", "zeros"),
        ({"query": "x" * 5000}, "QUERY_TOO_LONG", "characters"),
        ({"query": "x", "filter": pb.SearchFilter(metadata={"": "a"})}, "INVALID_FILTER", "empty key"),
        ({"query": "x", "filter": pb.SearchFilter(metadata={f"k{i}": "v" for i in range(17)})}, "INVALID_FILTER", "keys"),
        ({"query": "x", "filter": pb.SearchFilter(document_ids=["not-a-uuid"])}, "INVALID_FILTER", "UUID"),
        ({"query": "x", "filter": pb.SearchFilter(filenames=[""])}, "INVALID_FILTER", "empty"),
        ({"query_vector": [0.1] * DIM, "mode": KEYWORD}, "EMPTY_QUERY", "KEYWORD"),
        ({"query": "x", "mode": 7}, "INVALID_MODE", "mode"),
    ],
)
async def test_invalid_arguments(search_stub, library, kwargs, reason, words):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await search(search_stub, **kwargs)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(err.value).reason == reason
    assert words in err.value.details()


async def test_top_k_zero_means_ten(search_stub, seed):
    cid = seed.collection("many", DIM)
    doc = seed.document(cid, "many.txt")
    seed.chunks(cid, doc, [f"chunk {i}" for i in range(15)], embed([f"chunk {i}" for i in range(15)]))
    response = await search(search_stub, collection="many", query="chunk", mode=VECTOR, top_k=0)
    assert len(response.hits) == 10


@pytest.mark.parametrize(
    "hostile",
    [
        "'; DROP TABLE chunks; --",
        "x') OR 1=1 --",
        '" OR ""="',
        "topic' || (SELECT pg_sleep(5)) || '",
        "$1",
        "%(metadata)s",
    ],
)
async def test_injection_through_filters_is_harmless(search_stub, library, database_url, hostile):
    filters = [
        pb.SearchFilter(metadata={hostile: "geo"}),
        pb.SearchFilter(metadata={"topic": hostile}),
        pb.SearchFilter(filenames=[hostile]),
        pb.SearchFilter(mime_types=[hostile]),
    ]
    for filter in filters:
        for mode in (VECTOR, KEYWORD, HYBRID):
            response = await search(search_stub, query=hostile + " Rhine", mode=mode, filter=filter)
            assert list(response.hits) == []
    # Plain text in the query is just words.
    response = await search(search_stub, query=hostile, mode=KEYWORD)
    assert all(h.filename in {"rivers.txt", "pg.md"} for h in response.hits)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 6


async def test_sessions_are_read_only(search_settings, library):
    from sluice_search.db import open_read_pool

    pool = await open_read_pool(
        search_settings.read_database_url, min_size=1, max_size=1, ef_search=40, max_scan_tuples=20000, statement_timeout_ms=1000
    )
    try:
        async with pool.connection() as conn:
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                await conn.execute("DELETE FROM chunks")
    finally:
        await pool.close()


async def test_concurrent_searches(search_stub, library):
    responses = await asyncio.gather(*(search(search_stub, query="Rhine river", top_k=3) for _ in range(30)))
    assert all(len(r.hits) == 3 for r in responses)
    assert np.all([r.hits[0].chunk_id == responses[0].hits[0].chunk_id for r in responses])


async def test_warm_up_loads_each_local_embedder_the_collections_use(database_url):
    import psycopg
    from auth_keys import search_url
    from sluice_common.embedders import get_embedder
    from sluice_search.db import open_read_pool
    from sluice_search.repository import SearchRepository
    from sluice_search.service import SearchService

    with psycopg.connect(database_url, autocommit=True) as conn:
        for name, provider, model, dims in [
            ("a", "hashing", "hashing-v1", 16),
            ("b", "hashing", "hashing-v1", 16),
            ("c", "openai", "text-embedding-3-small", 8),
        ]:
            conn.execute(
                "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions,"
                " chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts)"
                " VALUES (1, %s, %s, %s, %s, 1000, 800, 0, 3)",
                (name, provider, model, dims),
            )
    loaded = []

    def factory(provider, model, dims):
        loaded.append((provider, model, dims))
        return get_embedder(provider, model, dims)

    pool = await open_read_pool(
        search_url(database_url), min_size=1, max_size=2, ef_search=40, max_scan_tuples=1000, statement_timeout_ms=5000
    )
    try:
        service = SearchService(SearchRepository(pool), embedder_factory=factory)
        assert await service.warm_up() == 1
        assert loaded == [("hashing", "hashing-v1", 16)]
        assert await service.warm_up() == 0  # already loaded: nothing more
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions,"
                " chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts)"
                " VALUES (1, 'd', 'hashing', 'h2', 24, 1000, 800, 0, 3)"
            )
        assert await service.warm_up() == 1  # a collection created later is picked up
        assert loaded[-1] == ("hashing", "h2", 24)
    finally:
        await pool.close()
