"""KEYWORD is BM25 (docs/search.md): scores, statistics through writes and deletions, any-word
matching, IDF, and writers that never wait on each other's statistics."""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass

import psycopg
import pytest
from conftest import random_unit_vectors
from sluice.v1 import search_service_pb2 as pb
from sluice_common import textsearch

K1, B = 1.2, 0.75

TEXTS = {
    "pg.txt": [
        "PostgreSQL keeps every row version until vacuum removes the dead ones.",
        "Autovacuum runs vacuum and analyze on tables whose rows changed a lot.",
    ],
    "leases.txt": [
        "A worker holds a lease on its job and renews the lease with heartbeats.",
        "An expired lease lets another worker claim the job; the old worker can no longer write.",
        "Lease tokens fence every write: a stale token changes nothing.",
    ],
    "chunking.txt": ["Documents are cut into chunks by title; each chunk is embedded and indexed."],
    "zh.txt": ["全文检索需要分词。向量检索使用余弦距离。", "混合检索融合向量和关键词的结果。"],
}


@dataclass(slots=True)
class TextRow:
    """keyword.search's row for the columns `c.id, c.text`, then its score."""

    id: int
    text: str
    rank: float


def keyword(stub, query: str, top_k: int = 10):
    return stub.Search(pb.SearchRequest(collection="bm25", query=query, mode=pb.SEARCH_MODE_KEYWORD, top_k=top_k))


@pytest.fixture
def corpus(seed):
    cid = seed.collection("bm25", 8)
    docs = {}
    for name, texts in TEXTS.items():
        docs[name] = seed.document(cid, name)
        seed.chunks(cid, docs[name], texts, random_unit_vectors(len(texts), 8, seed=len(docs)))
    # Every chunk's weights recomputed with the final average length (the UPDATE trigger), so that
    # the reference below can use one avgdl.
    seed.conn.execute("UPDATE chunks SET search_terms = search_terms WHERE collection_id = %s", (cid,))
    return cid, docs


def lexemes(conn, text: str) -> list[str]:
    """The words of `text` as the index holds them (segmented, stemmed), with repetitions."""
    rows = conn.execute(
        "SELECT l.lexeme, coalesce(array_length(l.positions, 1), 1) FROM unnest(to_tsvector('sluice_text', %s)) l",
        (textsearch.search_terms(text),),
    ).fetchall()
    return [lexeme for lexeme, tf in rows for _ in range(tf)]


def reference_scores(conn, query: str) -> dict[str, float]:
    """BM25 (Lucene's IDF, k1 1.2, b 0.75) of every chunk text, computed here from the texts."""
    chunks = [text for texts in TEXTS.values() for text in texts]
    tokens = [lexemes(conn, text) for text in chunks]
    avgdl = sum(map(len, tokens)) / len(tokens)
    df = Counter(term for words in tokens for term in set(words))
    scores = {}
    for text, words in zip(chunks, tokens, strict=True):
        tf = Counter(words)
        score = 0.0
        for term in set(lexemes(conn, " ".join(textsearch.query_terms(query)))):
            if tf[term]:
                idf = math.log(1 + (len(chunks) - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf[term] * (K1 + 1) / (tf[term] + K1 * (1 - B + B * len(words) / avgdl))
        if score:
            scores[text] = score
    return scores


@pytest.mark.parametrize("query", ["lease worker job", "vacuum rows", "the old worker", "向量检索", "lease nonexistentword"])
async def test_keyword_scores_are_bm25(search_stub, seed, corpus, query):
    expected = reference_scores(seed.conn, query)
    response = await keyword(search_stub, query)
    got = {hit.text: hit.score for hit in response.hits}
    assert set(got) == set(expected)
    for text, score in expected.items():
        assert got[text] == pytest.approx(score, rel=1e-4), text
    assert [hit.score for hit in response.hits] == sorted(got.values(), reverse=True)


async def test_any_word_matches_and_rare_words_weigh_more(search_stub, corpus):
    # "fence" is in one chunk, "worker" in two: the chunk with the rarer word comes first even
    # though the query's other words are in no chunk at all.
    response = await keyword(search_stub, "fence worker zebra")
    assert response.hits[0].text.startswith("Lease tokens fence")
    assert {hit.filename for hit in response.hits} == {"leases.txt"}


def active_generation(conn, collection_id: int) -> tuple[int, int]:
    """The collection's ACTIVE generation and its tenant."""
    return conn.execute(
        "SELECT g.id, c.tenant_id FROM collection_generations g JOIN collections c ON c.id = g.collection_id"
        " WHERE g.collection_id = %s AND g.state = 'ACTIVE'",
        (collection_id,),
    ).fetchone()


def live_stats(conn, generation_id: int) -> dict[str, int]:
    rows = conn.execute(
        "SELECT term, sum(df) FROM keyword_stats WHERE generation_id = %s GROUP BY term HAVING sum(df) <> 0",
        (generation_id,),
    ).fetchall()
    return {term: int(df) for term, df in rows}


def recomputed_stats(conn, generation_id: int) -> dict[str, int]:
    rows = conn.execute(
        "SELECT l.lexeme, count(*) FROM chunks c, unnest(c.search_tsv) l WHERE c.generation_id = %s GROUP BY 1",
        (generation_id,),
    ).fetchall()
    stats = {term: int(df) for term, df in rows}
    (n,) = conn.execute("SELECT count(*) FROM chunks WHERE generation_id = %s", (generation_id,)).fetchone()
    if n:
        stats[""] = n
    return stats


def test_statistics_follow_inserts_deletions_and_replacements(seed, corpus):
    cid, docs = corpus
    generation = seed.generation(cid)
    conn = seed.conn
    assert live_stats(conn, generation) == recomputed_stats(conn, generation)

    seed.delete(docs["pg.txt"])  # a document deletion cascades to its chunks
    assert "vacuum" not in live_stats(conn, generation)
    assert live_stats(conn, generation) == recomputed_stats(conn, generation)

    # A document's chunks deleted and new ones written in one transaction (as an INGEST commit's
    # round trip deletes whatever the document holds before its COPY).
    with conn.transaction():
        conn.execute("DELETE FROM chunks WHERE document_id = %s", (docs["leases.txt"],))
        seed.chunks(cid, docs["leases.txt"], ["Leases now expire after thirty seconds."], random_unit_vectors(1, 8))
    stats = live_stats(conn, generation)
    assert stats == recomputed_stats(conn, generation)
    assert stats[lexemes(conn, "leases")[0]] == 1  # "lease" and "leases" are one word once stemmed

    (tokens,) = conn.execute(
        "SELECT sum(tokens) FROM keyword_stats WHERE generation_id = %s AND term = ''", (generation,)
    ).fetchone()
    (length,) = conn.execute("SELECT sum(search_length) FROM chunks WHERE generation_id = %s", (generation,)).fetchone()
    assert tokens == length

    # Folding the deltas changes no figure and leaves one row per term.
    (before,) = conn.execute("SELECT count(*) FROM keyword_stats WHERE generation_id = %s", (generation,)).fetchone()
    (removed,) = conn.execute("SELECT sluice_compact_keyword_stats(%s)", (generation,)).fetchone()
    assert removed > 0
    (after,) = conn.execute("SELECT count(*) FROM keyword_stats WHERE generation_id = %s", (generation,)).fetchone()
    assert after == before - removed
    assert (
        after
        == conn.execute("SELECT count(DISTINCT term) FROM keyword_stats WHERE generation_id = %s", (generation,)).fetchone()[0]
    )
    assert live_stats(conn, generation) == recomputed_stats(conn, generation)


def keyword_rows(conn) -> tuple[list[tuple], list[tuple]]:
    """keyword_chunks (migration 0028) beside the chunks' columns it copies."""
    copied = conn.execute(
        "SELECT chunk_id, generation_id, tenant_id, search_bm25::text, terms::text FROM keyword_chunks ORDER BY 1"
    ).fetchall()
    source = conn.execute(
        "SELECT id, generation_id, tenant_id, search_bm25::text, strip(search_tsv)::text FROM chunks ORDER BY 1"
    ).fetchall()
    return copied, source


async def test_keyword_chunks_copy_the_chunks_through_every_write(seed, corpus, search_settings):
    """What KEYWORD scores is the chunks' own columns after an insert, an update of the terms (the
    fixture's), a delete, a cascade from a document, a replacement in one transaction and a
    generation dropped; search's role cannot read the table but through sluice_keyword_scores."""
    cid, docs = corpus
    conn = seed.conn
    copied, source = keyword_rows(conn)
    assert copied == source and len(copied) == sum(map(len, TEXTS.values()))

    seed.delete(docs["pg.txt"])
    with conn.transaction():
        conn.execute("DELETE FROM chunks WHERE document_id = %s", (docs["leases.txt"],))
        seed.chunks(cid, docs["leases.txt"], ["Leases now expire after thirty seconds."], random_unit_vectors(1, 8))
    conn.execute("UPDATE chunks SET search_terms = 'thirty minutes' WHERE document_id = %s", (docs["leases.txt"],))
    copied, source = keyword_rows(conn)
    assert copied == source and any("minut" in row[4] for row in copied)

    conn.execute("DELETE FROM chunks WHERE generation_id = %s", (seed.generation(cid),))
    assert keyword_rows(conn) == ([], [])

    async with await psycopg.AsyncConnection.connect(search_settings.read_database_url, autocommit=True) as reader:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await reader.execute("SELECT count(*) FROM keyword_chunks")


def test_a_retired_generation_keeps_no_statistics(seed, corpus):
    cid, _ = corpus
    generation = seed.generation(cid)
    seed.conn.execute("UPDATE collection_generations SET state = 'RETIRED', ended_at = now() WHERE id = %s", (generation,))
    seed.conn.execute("DELETE FROM chunks WHERE generation_id = %s", (generation,))
    (rows,) = seed.conn.execute("SELECT count(*) FROM keyword_stats WHERE generation_id = %s", (generation,)).fetchone()
    assert rows == 0


def test_concurrent_commits_do_not_wait_on_common_terms(seed, corpus, database_url):
    """Two writers insert chunks sharing every word, each in a transaction left open: the second
    finishes while the first still holds its transaction (statistics are appended, not updated)."""
    cid, _ = corpus
    first_doc, second_doc = seed.document(cid, "a.txt"), seed.document(cid, "b.txt")
    text = "lease worker job vacuum rows chunk"
    holding = threading.Event()
    release = threading.Event()
    errors: list[BaseException] = []

    def first_writer() -> None:
        try:
            with psycopg.connect(database_url) as conn, conn.transaction():
                conn.execute(
                    "INSERT INTO chunks (document_id, tenant_id, collection_id, chunk_index, text, embedding, search_terms)"
                    " SELECT id, tenant_id, collection_id, 0, %s, %s::vector, %s FROM documents WHERE id = %s",
                    (text, str([1.0] + [0.0] * 7), textsearch.search_terms(text), first_doc),
                )
                holding.set()
                release.wait(30)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            holding.set()

    thread = threading.Thread(target=first_writer)
    thread.start()
    try:
        assert holding.wait(30)
        with psycopg.connect(database_url) as conn:
            conn.execute("SET lock_timeout = '3s'")  # a wait on the first writer's rows would fail here
            with conn.transaction():
                conn.execute(
                    "INSERT INTO chunks (document_id, tenant_id, collection_id, chunk_index, text, embedding, search_terms)"
                    " SELECT id, tenant_id, collection_id, 0, %s, %s::vector, %s FROM documents WHERE id = %s",
                    (text, str([0.0, 1.0] + [0.0] * 6), textsearch.search_terms(text), second_doc),
                )
        assert thread.is_alive()  # the first transaction was still open all along
    finally:
        release.set()
        thread.join(30)
    assert not errors
    generation = seed.generation(cid)
    assert live_stats(seed.conn, generation) == recomputed_stats(seed.conn, generation)


# A vocabulary with a Zipf-like spread of document frequencies, so that MaxScore has common words
# to leave out of the candidates and rare ones to start from.
WORDS = [f"w{i:03d}" for i in range(120)]


def zipf_texts(n: int, seed_: int) -> list[str]:
    import random

    rng = random.Random(seed_)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return [" ".join(rng.choices(WORDS, weights, k=rng.randint(5, 40))) for _ in range(n)]


@pytest.mark.parametrize("not_ready", [False, True], ids=["all-ready", "some-not-ready"])
@pytest.mark.parametrize("budget", [1, 40, 10_000])
async def test_pruned_candidates_give_the_exact_bm25_top(seed, database_url, monkeypatch, budget, not_ready):
    """MaxScore (keyword.py) scores only the chunks of the rarer query words as long as no other
    chunk can enter the answer: its first `exact` hits must be exactly BM25's, whatever the first
    candidate budget (1 forces every extra round, 10,000 takes every word at once), also when a
    third of the documents are not READY (counted in the statistics, never in the answer), and
    however the rounds split the candidates (each round scores the chunks of its new words that
    hold none of the earlier rounds' words; the rounds' answers are merged)."""
    from psycopg import sql
    from sluice_common import vector_index
    from sluice_search import keyword as kw

    monkeypatch.setattr(kw, "FIRST_CANDIDATES", budget)
    cid = seed.collection("zipf", 8)
    texts = zipf_texts(400, 7)
    hidden: set[int] = set()
    for d in range(20):
        doc = seed.document(cid, f"z{d}.txt", status="EMBEDDING" if not_ready and d % 3 == 0 else "READY")
        part = texts[d * 20 : (d + 1) * 20]
        seed.chunks(cid, doc, part, random_unit_vectors(len(part), 8, seed=d))
        if not_ready and d % 3 == 0:
            hidden.update(range(d * 20, (d + 1) * 20))
    seed.conn.execute("UPDATE chunks SET search_terms = search_terms WHERE collection_id = %s", (cid,))
    gid, tenant = active_generation(seed.conn, cid)
    tokens = [text.split() for text in texts]
    avgdl = sum(map(len, tokens)) / len(tokens)
    df = Counter(w for words in tokens for w in set(words))

    def bm25(words: list[str], query: list[str]) -> float:
        tf = Counter(words)
        return sum(
            math.log(1 + (len(texts) - df[t] + 0.5) / (df[t] + 0.5))
            * tf[t]
            * (K1 + 1)
            / (tf[t] + K1 * (1 - B + B * len(words) / avgdl))
            for t in set(query)
            if tf[t]
        )

    scope = sql.SQL("{} AND c.tenant_id = {}").format(vector_index.generation_predicate(gid), sql.Literal(tenant))
    columns = sql.SQL("c.id, c.text")
    queries = [["w001", "w050", "w110"], ["w000", "w002"], ["w003", "w004", "w005", "w090"], ["w000", "w119"]]
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        # The tenant search's sessions hold (sluice_keyword_scores reads it, as the policy does).
        await conn.execute("SELECT set_config('sluice.tenant_id', %s, false)", (str(tenant),))
        for query in queries:
            expected = sorted(
                (bm25(words, query) for i, words in enumerate(tokens) if set(words) & set(query) and i not in hidden),
                reverse=True,
            )
            for limit, exact in ((10, None), (30, 5)):
                rows = await kw.search(conn, gid, query, limit, scope, columns, sql.SQL(""), {}, TextRow, exact)
                scores = [float(row.rank) for row in rows]
                head = limit if exact is None else exact
                assert scores[:head] == pytest.approx(expected[:head], rel=1e-4), (query, budget, limit, exact)
                assert scores == sorted(scores, reverse=True)
                # The tail holds real scores of real chunks, never better than the exact ones above.
                assert len(rows) == min(limit, len(expected)) or exact is not None


async def test_ready_chunks_below_a_full_overfetch_of_hidden_ones_are_found(seed, database_url):
    """Of the best limit x OVERFETCH candidates, all but one are in a document that is not READY
    (rule 3: moved out of READY by SQL, chunks kept): one READY row among them is fewer than the
    limit, and the READY chunks further down still make the answer (the query runs again with the
    READY join inside)."""
    from psycopg import sql
    from sluice_common import vector_index
    from sluice_search import keyword as kw

    cid = seed.collection("overfetch", 8)
    limit = 3
    hidden = seed.document(cid, "hidden.txt", status="EMBEDDING")
    loud = ["tidal tidal tidal gate"] * (limit * kw.OVERFETCH - 1)  # each scores above the quiet ones
    seed.chunks(cid, hidden, loud, random_unit_vectors(len(loud), 8, seed=1))
    shown = seed.document(cid, "shown.txt")
    quiet = ["tidal tidal tidal gate"] + [
        f"a tidal note number {n} among many other words of a passage" for n in range(limit - 1)
    ]
    seed.chunks(cid, shown, quiet, random_unit_vectors(len(quiet), 8, seed=2))
    gid, tenant = active_generation(seed.conn, cid)
    scope = sql.SQL("{} AND c.tenant_id = {}").format(vector_index.generation_predicate(gid), sql.Literal(tenant))
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("SELECT set_config('sluice.tenant_id', %s, false)", (str(tenant),))
        rows = await kw.search(conn, gid, ["tidal"], limit, scope, sql.SQL("c.id, c.text"), sql.SQL(""), {}, TextRow)
    assert sorted(row.text for row in rows) == sorted(quiet)


async def test_keyword_candidates_come_from_the_gin_index_under_row_level_security(search_settings, corpus, seed):
    """search's role is held by a tenant policy, and `@@` is not LEAKPROOF: a plain query on
    chunks can then only read every chunk of the table (3.1 s at 94,000 chunks). The candidates
    come from sluice_keyword_scores (migration 0019) instead: the statement, as search runs it,
    never filters chunks by the match itself."""
    from psycopg import sql
    from psycopg.rows import dict_row
    from sluice_common import vector_index
    from sluice_search import keyword as kw
    from sluice_search.rows import HIT_COLUMNS

    cid, _ = corpus
    gid, tenant = active_generation(seed.conn, cid)
    scope = sql.SQL("{} AND c.tenant_id = {}").format(vector_index.generation_predicate(gid), sql.Literal(tenant))
    async with await psycopg.AsyncConnection.connect(search_settings.read_database_url, autocommit=True) as conn:
        await conn.execute("SELECT set_config('sluice.tenant_id', %s, false)", (str(tenant),))
        await conn.execute("SET enable_seqscan = off")
        weights = {"leas": 1.5, "worker": 0.7}
        for join_first in (False, True):
            query, params = kw.scoring_query(
                gid, scope, HIT_COLUMNS, sql.SQL(""), {}, ["leas"], weights, 10, join_first=join_first
            )
            plan = "\n".join(r[0] for r in await (await conn.execute(b"EXPLAIN " + query.as_bytes(conn), params)).fetchall())
            # Under the policy, a match on chunks is a filter over every row of some scan.
            assert "Seq Scan on chunks" not in plan and "search_tsv" not in plan, plan
            assert "Function Scan on sluice_keyword_scores" in plan, plan
            cursor = conn.cursor(row_factory=dict_row)
            rows = await (await cursor.execute(query, params)).fetchall()
            assert {row["filename"] for row in rows} == {"leases.txt"}
        # Without the tenant setting the function shows nothing, as the policy would.
        await conn.execute("SELECT set_config('sluice.tenant_id', '', false)")
        for join_first in (False, True):
            query, params = kw.scoring_query(
                gid, sql.SQL("true"), sql.SQL("c.id"), sql.SQL(""), {}, ["leas"], weights, 10, join_first=join_first
            )
            assert await (await conn.execute(query, params)).fetchall() == []
