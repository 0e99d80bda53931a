"""SearchRequest.explain (docs/search.md, "Why a hit ranked"), over real PostgreSQL and gRPC.

The collection holds real documents: the 40 manual pages of the committed eval-set sample
(tests/fixtures/evalsets/en), cut into chunks of about 1,000 characters, with hashing vectors;
the queries are their summaries. Explaining changes no hit, score or order in any mode; each
figure is the one the ranking used (the fused score's parts add up to it) or, for the side a
HYBRID hit did not come from, the same figure computed afresh, checked here against BM25 and
cosine similarity computed in Python from the stored words and vectors."""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from auth_keys import search_url
from rerank_server import LocalRerankServer, score
from sluice.v1 import collection_pb2 as C
from sluice.v1 import search_service_pb2 as pb
from sluice_common import textsearch, vector_index
from sluice_common.embedders import HashingEmbedder
from sluice_search.db import open_read_pool
from sluice_search.domain import DocumentFilter, Mode, SearchQuery
from sluice_search.keyword import term_dim
from sluice_search.repository import SearchRepository
from sluice_search.service import SearchService

DIM = 64
K1, B = 1.2, 0.75
SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "evalsets" / "en"
MODES = {"VECTOR": pb.SEARCH_MODE_VECTOR, "KEYWORD": pb.SEARCH_MODE_KEYWORD, "HYBRID": pb.SEARCH_MODE_HYBRID}
EMBEDDER = HashingEmbedder("hashing-v1", DIM)


def chunk(text: str, size: int = 1000) -> list[str]:
    """Paragraphs packed into chunks of at most about `size` characters."""
    chunks, current = [], ""
    for paragraph in (p.strip() for p in text.split("\n\n")):
        if not paragraph:
            continue
        if current and len(current) + len(paragraph) + 2 > size:
            chunks.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        chunks.append(current)
    return chunks


def queries() -> list[str]:
    return [json.loads(line)["query"] for line in (SAMPLE / "queries.jsonl").read_text().splitlines() if line.strip()]


@pytest.fixture
def manpages(seed) -> int:
    cid = seed.collection("man", DIM)
    for path in sorted((SAMPLE / "docs").glob("*.txt")):
        texts = chunk(path.read_text(encoding="utf-8"))
        doc = seed.document(cid, path.name)
        seed.chunks(cid, doc, texts, asyncio.run(EMBEDDER.embed_documents(texts)))
    # Every chunk's BM25 weights again with the final average length (the UPDATE trigger), so that
    # the reference below can use one average.
    seed.conn.execute("UPDATE chunks SET search_terms = search_terms WHERE collection_id = %s", (cid,))
    return cid


async def search(stub, query: str, mode: str, **kwargs) -> pb.SearchResponse:
    kwargs.setdefault("top_k", 10)
    return await stub.Search(pb.SearchRequest(collection="man", query=query, mode=MODES[mode], **kwargs))


def answer(response: pb.SearchResponse) -> list[tuple]:
    """Everything a hit says, but its explanation."""
    return [
        (
            h.chunk_id,
            h.score,
            h.first_stage_score,
            h.rerank_score,
            h.text,
            h.document_id,
            [(s.start, s.end) for s in h.highlights],
        )
        for h in response.hits
    ]


class Reference:
    """BM25 (Lucene's IDF, k1 1.2, b 0.75) and cosine similarity computed here, from the stored
    words (their lexemes, as the index stems them) and vectors of every chunk."""

    def __init__(self, conn, collection_id: int) -> None:
        self.conn = conn
        rows = conn.execute(
            "SELECT c.id, c.embedding, ARRAY(SELECT l.lexeme || ':' || coalesce(array_length(l.positions, 1), 1)"
            " FROM unnest(c.search_tsv) l) FROM chunks c WHERE c.collection_id = %s",
            (collection_id,),
        ).fetchall()
        self.vectors = {cid: np.asarray(v.to_numpy(), dtype=np.float64) for cid, v, _ in rows}
        self.tf = {cid: Counter({t.rsplit(":", 1)[0]: int(t.rsplit(":", 1)[1]) for t in terms}) for cid, _, terms in rows}
        self.length = {cid: sum(tf.values()) for cid, tf in self.tf.items()}
        self.avgdl = sum(self.length.values()) / len(self.length)
        self.df = Counter(term for tf in self.tf.values() for term in tf)

    def query_lexemes(self, query: str) -> list[str]:
        """The query's words as the index stems them, by code point."""
        rows = self.conn.execute(
            "SELECT l.lexeme FROM unnest(to_tsvector('sluice_text', %s)) l ORDER BY l.lexeme COLLATE \"C\"",
            (" ".join(textsearch.query_terms(query)),),
        ).fetchall()
        return [lexeme for (lexeme,) in rows]

    def bm25(self, chunk_id: int, query: str) -> float:
        tf, n = self.tf[chunk_id], len(self.tf)
        total = 0.0
        for term in self.query_lexemes(query):
            if tf[term]:
                idf = math.log(1 + (n - self.df[term] + 0.5) / (self.df[term] + 0.5))
                total += idf * tf[term] * (K1 + 1) / (tf[term] + K1 * (1 - B + B * self.length[chunk_id] / self.avgdl))
        return total

    def cosine(self, chunk_id: int, query: str) -> float:
        q = np.asarray(EMBEDDER.embed_one(query), dtype=np.float64)
        v = self.vectors[chunk_id]
        return float(q @ v / (np.linalg.norm(q) * np.linalg.norm(v)))

    def matched(self, chunk_id: int, query: str) -> list[str]:
        return [term for term in self.query_lexemes(query) if self.tf[int(chunk_id)][term]]


async def test_explain_changes_no_hit_score_or_order_in_any_mode(search_stub, manpages):
    for query in queries():
        for mode in MODES:
            plain = await search(search_stub, query, mode)
            explained = await search(search_stub, query, mode, explain=True)
            assert answer(explained) == answer(plain), (mode, query)
            assert plain.hits, (mode, query)
            assert not any(h.HasField("explanation") for h in plain.hits)
            assert all(h.HasField("explanation") for h in explained.hits)
            assert (explained.generation, explained.embedder_model) == (plain.generation, plain.embedder_model)


async def test_explain_changes_nothing_with_caps_thresholds_and_context(search_stub, manpages, seed):
    reference = Reference(seed.conn, manpages)
    names = sorted(path.name for path in (SAMPLE / "docs").glob("*.txt"))
    cases = (
        {"max_hits_per_document": 1, "neighbor_chunks": 1, "min_score": 0.05},
        {"filter": pb.SearchFilter(filenames=names[::3])},  # KEYWORD joins the documents first then
    )
    for query, options in ((q, o) for q in queries()[:10] for o in cases):
        for mode in MODES:
            plain = await search(search_stub, query, mode, **options)
            explained = await search(search_stub, query, mode, explain=True, **options)
            assert answer(explained) == answer(plain) and [h.context for h in explained.hits] == [h.context for h in plain.hits]
            # The rank before the cap and the threshold: increasing, and skipping the hits they dropped.
            ranks = [h.explanation.first_stage_rank for h in explained.hits]
            assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks) and all(r >= 1 for r in ranks)
            assert all(h.explanation.fused_score == h.first_stage_score for h in explained.hits)
            for hit in explained.hits:
                assert list(hit.explanation.matched_terms) == reference.matched(int(hit.chunk_id), query)


@pytest.mark.parametrize("precision", [vector_index.FLOAT4, vector_index.HALFVEC, vector_index.BINARY])
async def test_an_explained_vector_search_answers_the_same_through_every_plan(search_stub, seed, precision):
    """VECTOR reads the matched words with its rows: the same hits through the graph of each
    precision (binary: re-scored), and through a selective filter's exact plan."""
    cid = seed.collection("man", DIM, index=False)
    seed.conn.execute("UPDATE collection_generations SET vector_precision = %s WHERE id = %s", (precision, seed.generation(cid)))
    names = sorted(path.name for path in (SAMPLE / "docs").glob("*.txt"))
    for name in names:
        texts = chunk((SAMPLE / "docs" / name).read_text(encoding="utf-8"))
        seed.chunks(cid, seed.document(cid, name), texts, [EMBEDDER.embed_one(t) for t in texts])
    seed.conn.execute(vector_index.create_index_sql(seed.generation(cid), DIM, precision=precision))
    reference = Reference(seed.conn, cid)
    for query in queries()[:8]:
        for filter in (None, pb.SearchFilter(filenames=names[:3])):
            kwargs = {"filter": filter} if filter is not None else {}
            plain = await search(search_stub, query, "VECTOR", **kwargs)
            explained = await search(search_stub, query, "VECTOR", explain=True, **kwargs)
            assert answer(explained) == answer(plain) and plain.hits, (precision, query, filter)
            for rank, hit in enumerate(explained.hits, start=1):
                assert (hit.explanation.vector_rank, hit.explanation.vector_similarity) == (rank, hit.score)
                assert list(hit.explanation.matched_terms) == reference.matched(int(hit.chunk_id), query)


async def test_vector_and_keyword_explanations_are_the_mode_s_one_list(search_stub, manpages, seed):
    reference = Reference(seed.conn, manpages)
    for query in queries()[:12]:
        vector = await search(search_stub, query, "VECTOR", explain=True)
        for rank, hit in enumerate(vector.hits, start=1):
            e = hit.explanation
            assert (e.vector_similarity, e.vector_rank, e.first_stage_rank, e.fused_score) == (hit.score, rank, rank, hit.score)
            assert not e.HasField("keyword_score") and not e.HasField("keyword_rank")
            assert not e.HasField("vector_contribution") and not e.HasField("vector_weight")
            assert e.rerank_status == pb.RERANK_STATUS_UNSPECIFIED and not e.HasField("rerank_score")
            assert e.vector_similarity == pytest.approx(reference.cosine(int(hit.chunk_id), query), abs=1e-5)
            assert list(e.matched_terms) == reference.matched(int(hit.chunk_id), query)
        keyword = await search(search_stub, query, "KEYWORD", explain=True)
        for rank, hit in enumerate(keyword.hits, start=1):
            e = hit.explanation
            assert (e.keyword_score, e.keyword_rank, e.first_stage_rank, e.fused_score) == (hit.score, rank, rank, hit.score)
            assert not e.HasField("vector_similarity") and not e.HasField("vector_rank")
            assert e.keyword_score == pytest.approx(reference.bm25(int(hit.chunk_id), query), rel=1e-5)
            # Every keyword hit holds one of the query's words, as the index stems them.
            assert list(e.matched_terms) == reference.matched(int(hit.chunk_id), query) != []


async def test_a_hybrid_explanation_adds_up_and_has_both_scores_for_every_hit(search_stub, manpages, seed):
    reference = Reference(seed.conn, manpages)
    one_sided = {"keyword": 0, "vector": 0}
    for query in queries():
        response = await search(search_stub, query, "HYBRID", explain=True, top_k=20)
        for rank, hit in enumerate(response.hits, start=1):
            e, cid = hit.explanation, int(hit.chunk_id)
            # The parts are fusion's own: their sum is the score the hits were ordered by.
            assert e.keyword_contribution + e.vector_contribution == e.fused_score == hit.score == hit.first_stage_score
            assert (e.vector_weight, e.first_stage_rank) == (0.5, rank)
            assert 0.0 <= e.vector_contribution <= 0.5 and 0.0 <= e.keyword_contribution <= 0.5
            # Both numbers for every hit: the list's own, or computed afresh for a side the hit
            # was not a candidate of (its rank then unset and its part 0).
            assert e.HasField("keyword_score") and e.HasField("vector_similarity")
            assert e.keyword_score == pytest.approx(reference.bm25(cid, query), rel=1e-5, abs=1e-9)
            assert e.vector_similarity == pytest.approx(reference.cosine(cid, query), abs=1e-5)
            for side in ("keyword", "vector"):
                if not e.HasField(f"{side}_rank"):
                    one_sided[side] += 1
                    assert getattr(e, f"{side}_contribution") == 0.0
            assert list(e.matched_terms) == reference.matched(cid, query)
            if not e.matched_terms:
                assert e.keyword_score == 0.0 and not e.HasField("keyword_rank")
        ranks = [h.explanation.keyword_rank for h in response.hits if h.explanation.HasField("keyword_rank")]
        assert len(set(ranks)) == len(ranks)
    # The sample has hits from each side alone, so both fills were exercised.
    assert one_sided["keyword"] > 0 and one_sided["vector"] > 0, one_sided


async def test_a_hybrid_hit_s_list_scores_and_ranks_are_the_lists_own(search_stub, manpages):
    """A HYBRID hit's keyword score and rank are those of the keyword list HYBRID fused: its head
    is KEYWORD's own answer (docs/search.md, "Exact head, approximate tail"). A score computed
    afresh for a hit that was no keyword candidate is the very number KEYWORD gives the chunk."""
    filled = 0
    for query in queries():
        keyword = await search(search_stub, query, "KEYWORD", top_k=100)
        hybrid = await search(search_stub, query, "HYBRID", explain=True, top_k=50)
        head = {h.chunk_id: (rank, h.score) for rank, h in enumerate(keyword.hits[:5], start=1)}
        bm25 = {h.chunk_id: h.score for h in keyword.hits}
        explained = {h.chunk_id: h.explanation for h in hybrid.hits}
        for chunk_id, (rank, first) in head.items():
            if chunk_id in explained:
                assert (explained[chunk_id].keyword_rank, explained[chunk_id].keyword_score) == (rank, first)
        for chunk_id, e in explained.items():
            if chunk_id in bm25:
                assert e.keyword_score == bm25[chunk_id]
                filled += not e.HasField("keyword_rank")
            else:
                assert e.keyword_score <= keyword.hits[-1].score or len(keyword.hits) < 100
    assert filled > 0  # hits the keyword side did not rank, scored afresh, exactly as KEYWORD scores them


def test_the_word_dimension_is_the_database_s(seed):
    words = ["leas", "renew", "worker", "全文检索", "straße", "x" * 200, "42", "é"]
    words += [f"w{i}" for i in range(300)]
    dims = dict(seed.conn.execute("SELECT w, sluice_term_dim(w) FROM unnest(%s::text[]) w", (words,)).fetchall())
    assert {w: term_dim(w) for w in words} == dims


async def test_matched_terms_are_the_stems_the_chunk_holds(search_stub, seed):
    cid = seed.collection("stems", DIM)
    texts = ["The workers renewed their leases while running jobs.", "A lease is renewed by its worker.", "Nothing here."]
    for i, text in enumerate(texts):
        seed.chunks(cid, seed.document(cid, f"{i}.txt"), [text], [EMBEDDER.embed_one(text)])
    response = await search_stub.Search(
        pb.SearchRequest(collection="stems", query="renewing leases of running workers", mode=pb.SEARCH_MODE_HYBRID, explain=True)
    )
    matched = {h.text: list(h.explanation.matched_terms) for h in response.hits}
    # As the index stems them ("leases" and "lease" are one word there), by code point.
    assert matched[texts[0]] == ["leas", "renew", "run", "worker"]
    assert matched[texts[1]] == ["leas", "renew", "worker"]
    assert matched.get(texts[2], []) == []
    # Words no chunk holds: every hit came from the vector side, scores 0 for BM25, holds no word.
    for query in ("qwzxv", "qwzxv leases"):
        unknown = await search_stub.Search(
            pb.SearchRequest(collection="stems", query=query, mode=pb.SEARCH_MODE_HYBRID, explain=True)
        )
        assert unknown.hits
        for hit in unknown.hits:
            e = hit.explanation
            assert e.HasField("vector_rank") and e.vector_contribution + e.keyword_contribution == e.fused_score
            if query == "qwzxv":
                assert (e.keyword_score, list(e.matched_terms), e.HasField("keyword_rank")) == (0.0, [], False)
            else:
                assert list(e.matched_terms) == (["leas"] if "leas" in hit.text.lower() else [])
    # A VECTOR search with a text says which words the hit holds too; one by a vector alone, none.
    vector = await search_stub.Search(
        pb.SearchRequest(collection="stems", query="leases", mode=pb.SEARCH_MODE_VECTOR, explain=True, top_k=3)
    )
    assert {h.text: list(h.explanation.matched_terms) for h in vector.hits}[texts[1]] == ["leas"]
    by_vector = await search_stub.Search(
        pb.SearchRequest(collection="stems", query_vector=EMBEDDER.embed_one("leases"), explain=True, top_k=3)
    )
    assert by_vector.hits and all(not h.explanation.matched_terms for h in by_vector.hits)
    assert all(h.explanation.vector_rank == i for i, h in enumerate(by_vector.hits, start=1))


@pytest.fixture
def rerank_server(monkeypatch, tmp_path):
    server = LocalRerankServer()
    monkeypatch.setenv("SLUICE_RERANK_ALLOWED_URLS", f"{server.url}/")
    monkeypatch.setenv("SLUICE_RERANK_MODEL_DIR", str(tmp_path / "models"))
    yield server
    server.close()


async def test_the_reranker_s_score_and_status_and_the_first_stage_rank(rerank_server, search_stub, manpages):
    query = queries()[0]
    plain = await search(search_stub, query, "HYBRID", top_k=10)
    first = {h.chunk_id: rank for rank, h in enumerate(plain.hits, start=1)}
    tei = C.RerankerConfig(provider=C.RERANKER_PROVIDER_TEI, base_url=rerank_server.url, candidates=10, timeout_ms=30000)
    applied = await search(search_stub, query, "HYBRID", top_k=10, explain=True, rerank=pb.SearchRerank(reranker=tei))
    assert applied.rerank.status == pb.RERANK_STATUS_APPLIED
    assert [h.chunk_id for h in applied.hits] != [h.chunk_id for h in plain.hits]  # the reranker reordered them
    for hit in applied.hits:
        e = hit.explanation
        assert e.rerank_status == pb.RERANK_STATUS_APPLIED
        assert e.rerank_score == hit.rerank_score == hit.score == pytest.approx(score(query, hit.text))
        assert e.first_stage_rank == first[hit.chunk_id] and e.fused_score == hit.first_stage_score
        assert e.keyword_contribution + e.vector_contribution == e.fused_score
    rerank_server.behaviour.delay = 30.0
    late = C.RerankerConfig(provider=C.RERANKER_PROVIDER_TEI, base_url=rerank_server.url, timeout_ms=200)
    timed_out = await search(search_stub, query, "HYBRID", top_k=10, explain=True, rerank=pb.SearchRerank(reranker=late))
    assert timed_out.rerank.status == pb.RERANK_STATUS_TIMED_OUT
    assert answer(timed_out) == answer(plain)
    for rank, hit in enumerate(timed_out.hits, start=1):
        assert hit.explanation.rerank_status == pb.RERANK_STATUS_TIMED_OUT
        assert not hit.explanation.HasField("rerank_score") and hit.explanation.first_stage_rank == rank


async def _service(database_url, **options):
    pool = await open_read_pool(
        search_url(database_url), min_size=1, max_size=4, ef_search=40, max_scan_tuples=20000, statement_timeout_ms=10000
    )
    repository = SearchRepository(pool, collection_cache_seconds=0)
    return pool, SearchService(repository, embedder_factory=lambda _p, _m, d: HashingEmbedder("hashing-v1", d), **options)


def _query(text: str, collection: str = "man", *, explain: bool) -> SearchQuery:
    return SearchQuery(collection, text, None, 10, Mode.HYBRID, DocumentFilter(), explain=explain)


def _plain(hits) -> list[tuple]:
    return [(h.chunk_id, h.score, h.text) for h in hits]


async def test_reciprocal_rank_fusion_explains_its_parts_too(database_url, manpages, seed):
    tenant = seed.conn.execute("SELECT tenant_id FROM collections WHERE id = %s", (manpages,)).fetchone()[0]
    pool, service = await _service(database_url, fusion_method="rrf", rrf_k=60, document_weight=0.0)
    try:
        for query in queries()[:10]:
            plain = await service.search(tenant, _query(query, explain=False))
            hits = await service.search(tenant, _query(query, explain=True))
            assert _plain(hits) == _plain(plain)
            for hit in hits:
                e = hit.explanation
                assert e is not None and e.vector_weight == 0.5
                # Each list's weight (2 x its share: rrf_k keeps its meaning) over (k + rank).
                assert e.vector_contribution == (1.0 / (60 + e.vector_rank) if e.vector_rank else 0.0)
                assert e.keyword_contribution == (1.0 / (60 + e.keyword_rank) if e.keyword_rank else 0.0)
                assert e.vector_contribution + e.keyword_contribution == e.fused_score == hit.score
                # Without document context the vector list's score is the similarity itself.
                assert e.vector_similarity is not None and e.keyword_score is not None
    finally:
        await pool.close()


async def test_a_query_in_another_script_shows_the_vector_list_s_lower_weight(database_url, seed):
    """A Chinese query against an English-only model: the vector list weighs 0.1 (fusion.py)."""
    cid = seed.collection("zh", DIM, provider="sentence_transformers", model="all-MiniLM-L6-v2")
    texts = ["全文检索需要分词。", "向量检索使用余弦距离。", "混合检索融合向量和关键词的结果。"]
    for i, text in enumerate(texts):
        seed.chunks(cid, seed.document(cid, f"{i}.txt"), [text], [EMBEDDER.embed_one(text)])
    tenant = seed.conn.execute("SELECT tenant_id FROM collections WHERE id = %s", (cid,)).fetchone()[0]
    pool, service = await _service(database_url)
    try:
        hits = await service.search(tenant, _query("向量检索", "zh", explain=True))
        assert hits
        for hit in hits:
            e = hit.explanation
            assert e is not None and e.vector_weight == pytest.approx(0.1)
            assert e.vector_contribution <= 0.1 and e.keyword_contribution <= 0.9
            assert e.vector_contribution + e.keyword_contribution == e.fused_score
        english = await service.search(tenant, _query("vector search", "zh", explain=True))
        assert all(h.explanation is not None and h.explanation.vector_weight == 0.5 for h in english)
    finally:
        await pool.close()
