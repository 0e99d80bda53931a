"""BM25 keyword search over a generation's chunks (docs/search.md, "Keyword ranking").

The chunks carry their BM25 document vectors and the generation its statistics (migration
0016); this module turns a query's terms into IDF weights and finds the best chunks.

Scoring every chunk that contains any query term is exact but slow when a query holds a common
word ("list", "file"): on manual pages half the chunks contain "list". So the candidates come
from the query's rarer ("essential") terms only, as far as that can change no answer (MaxScore,
Turtle & Flood 1995): a chunk's weight for a term never exceeds k1 + 1, so a chunk that contains
none of the essential terms scores at most Σ idf·(k1 + 1) over the other terms. Once the
`limit`-th best score is above that bound, no other chunk can enter the answer. Otherwise the
next rarest terms become essential and the query runs again.

Without a document filter the essential terms' chunks come from posting lists (migration 0020:
one row per term and chunk with the chunk's weight, read by an index-only scan), which give each
of them its partial score over the essential terms; only the best `scored` of those are read and
scored exactly with every term, from their chunk rows. A candidate left unscored scores at most
its partial score plus what the other terms can add, so it is checked against the same
threshold, and `scored` grows when it could still win. Before, every candidate was read and
scored: a heap page of a wide chunk row each, thousands per query. With a filter, the candidates
are joined to their documents first and all scored (`scoring_query`, through the GIN index and
`sluice_keyword_scores`, migration 0019): a selective filter would leave most of the best
partial scores out of the answer.

Every chunk in an answer is scored with all the query's terms, so the scores are exact BM25.

HYBRID asks for more hits than it answers with (its fusion depth, 50) but only its first top_k
(10) can reach the answer on the strength of keyword alone: so the bound is checked against the
`exact`-th best score, not the `limit`-th. The first `exact` hits are then exactly BM25's; the
rest are the best of the candidates, each with its exact score (a chunk that holds only the
commonest query words may be missing from that tail). At 100,000 chunks this saves most of the
second rounds, each of which scores thousands more chunks (docs/search.md, "Keyword ranking").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import sql

from sluice_common import textsearch

# k1 of migration 0016's document weights: a weight tf·(k1+1)/(tf + …) stays below k1 + 1.
K1 = 1.2
MAX_WEIGHT = K1 + 1
# The first candidate set: the rarest terms whose chunks number at most this many between them
# (always at least the rarest term).
FIRST_CANDIDATES = 1000

# The query's words as the index holds them (stemmed by the same text search configuration,
# migration 0016), each with its document frequency, and the generation's chunk count ('').
STATS_SQL = (
    b"SELECT s.term, sum(s.df)::float8 FROM keyword_stats s"
    b" WHERE s.generation_id = %(generation)s AND s.term = ANY(ARRAY("
    b"SELECT l.lexeme FROM unnest(to_tsvector('sluice_text', %(text)s)) l) || ''::text)"
    b" GROUP BY s.term"
)


def idf(chunks: float, df: float) -> float:
    """Lucene's BM25 IDF (never negative)."""
    return math.log(1 + (chunks - df + 0.5) / (df + 0.5))


def candidate_rounds(weights: dict[str, float], dfs: dict[str, float]) -> list[str]:
    """The query's terms, rarest first (the order in which they join the candidates)."""
    return sorted(weights, key=lambda t: (dfs[t], t))


def first_candidates(order: Sequence[str], dfs: dict[str, float], budget: int | None = None) -> int:
    """How many of the rarest terms make the first candidate set."""
    budget = FIRST_CANDIDATES if budget is None else budget
    taken, postings = 0, 0.0
    for term in order:
        if taken and postings + dfs[term] > budget:
            break
        taken += 1
        postings += dfs[term]
    return taken


def enough(order: Sequence[str], taken: int, weights: dict[str, float], threshold: float) -> int:
    """How many terms must be candidates so that a chunk with none of them scores below
    `threshold` (the limit-th best score so far; 0 when fewer than limit were found)."""
    rest = sum(weights[t] * MAX_WEIGHT for t in order[taken:])
    while taken < len(order) and rest >= threshold:
        rest -= weights[order[taken]] * MAX_WEIGHT
        taken += 1
    return taken


# Without a document filter, the first round scores exactly the `limit` × OVERFETCH candidates
# with the best partial scores (candidates_query): enough READY ones among them for the answer
# when up to three documents in four are not READY; a round that proves too few scores four
# times as many.
OVERFETCH = 4


def scoring_query(
    generation_id: int, chunk_scope: sql.Composable, columns: sql.Composable, where: sql.Composable,
    params: dict[str, Any], candidates: Sequence[str], weights: dict[str, float], limit: int, *, join_first: bool,
) -> tuple[sql.Composed, dict[str, Any]]:
    """Score the chunks holding any `candidates` term with every weighted term.

    The candidates and their scores come from `sluice_keyword_scores` (migration 0019), which
    reaches them through the GIN index whatever row-level security does to the query's plan.
    `chunk_scope` restricts `chunks c` (generation, tenant) where the hits are read; `columns`
    are the hit's columns over `c` and `d`; `where` the filter's predicates on `documents d`
    (empty for none)."""
    params = {
        **params,
        "kw_generation": generation_id,
        "kw_terms": list(weights),
        "kw_weights": [weights[t] for t in weights],
        "kw_match": textsearch.tsquery_text(candidates),
    }
    vector = sql.SQL(
        "WITH q AS ("
        " SELECT ('{{' || string_agg(dim || ':' || w, ',' ORDER BY dim) || '}}/{dims}')::sparsevec AS v"
        " FROM (SELECT sluice_term_dim(t) AS dim, sum(w)::real AS w"
        " FROM unnest(%(kw_terms)s::text[], %(kw_weights)s::float8[]) AS x(t, w) GROUP BY 1) s)"
    ).format(dims=sql.SQL(str(textsearch.TERM_DIMENSIONS)))
    scores = sql.SQL("sluice_keyword_scores(%(kw_generation)s, to_tsquery('simple', %(kw_match)s), q.v) s")
    if join_first:
        query = sql.SQL(
            "{vector} SELECT {columns}, s.score AS rank"
            " FROM q, {scores} JOIN chunks c ON c.id = s.chunk_id JOIN documents d ON d.id = c.document_id"
            " WHERE {scope} AND d.status = 'READY'{where} ORDER BY rank DESC, c.id LIMIT {limit}"
        )
    else:
        query = sql.SQL(
            "{vector}, best AS ("
            " SELECT s.chunk_id AS id, s.score AS rank FROM q, {scores}"
            " ORDER BY rank DESC, s.chunk_id LIMIT {overfetch})"
            " SELECT {columns}, best.rank FROM best JOIN chunks c ON c.id = best.id"
            " JOIN documents d ON d.id = c.document_id"
            " WHERE {scope} AND d.status = 'READY'{where} ORDER BY best.rank DESC, c.id LIMIT {limit}"
        )
    return query.format(vector=vector, columns=columns, scores=scores, scope=chunk_scope, where=where,
                        limit=sql.Literal(int(limit)), overfetch=sql.Literal(int(limit) * OVERFETCH)), params


def candidates_query(
    generation_id: int, chunk_scope: sql.Composable, columns: sql.Composable, candidates: Sequence[str],
    weights: dict[str, float], limit: int, scored: int,
) -> tuple[sql.Composed, dict[str, Any]]:
    """Without a document filter: the `scored` chunks with the best partial score over the
    `candidates` terms (from the posting lists, `sluice_keyword_candidates`, migration 0020), each
    scored exactly with every weighted term from its chunk row, READY ones only, best first.

    Every row starts with (how many chunks the posting lists gave, the lowest partial score among
    them); when none of them is READY one row of NULL hits says so. Chunks the posting lists did
    not give score at most the lowest partial score plus what the other terms can add."""
    params = {
        "kw_terms": list(weights),
        "kw_weights": [weights[t] for t in weights],
        "kw_generation": generation_id,
        "kw_candidates": list(candidates),
        "kw_candidate_weights": [weights[t] for t in candidates],
    }
    query = sql.SQL(
        "{vector}, cand AS MATERIALIZED ("
        " SELECT * FROM sluice_keyword_candidates(%(kw_generation)s, %(kw_candidates)s::text[],"
        " %(kw_candidate_weights)s::float8[], {scored}))"
        " SELECT t.found, t.lowest, h.* FROM (SELECT count(*) AS found, min(partial) AS lowest FROM cand) t"
        " LEFT JOIN LATERAL ("
        " SELECT {columns}, -(c.search_bm25 <#> q.v) AS rank"
        " FROM q, cand JOIN chunks c ON c.id = cand.chunk_id JOIN documents d ON d.id = c.document_id"
        " WHERE {scope} AND d.status = 'READY' ORDER BY rank DESC, c.id LIMIT {limit}) h ON true"
    )
    return query.format(vector=_query_vector(), columns=columns, scope=chunk_scope, limit=sql.Literal(int(limit)),
                        scored=sql.Literal(int(scored))), params


def _query_vector() -> sql.Composed:
    """`q.v`: the query's IDF weights as a sparse vector (from %(kw_terms)s and %(kw_weights)s)."""
    return sql.SQL(
        "WITH q AS ("
        " SELECT ('{{' || string_agg(dim || ':' || w, ',' ORDER BY dim) || '}}/{dims}')::sparsevec AS v"
        " FROM (SELECT sluice_term_dim(t) AS dim, sum(w)::real AS w"
        " FROM unnest(%(kw_terms)s::text[], %(kw_weights)s::float8[]) AS x(t, w) GROUP BY 1) s)"
    ).format(dims=sql.SQL(str(textsearch.TERM_DIMENSIONS)))


# Partial scores are summed in double precision, exact ones by pgvector in single precision: a
# bound must beat the threshold by more than their rounding to prove anything.
SLACK = 1e-5


async def search(
    conn: psycopg.AsyncConnection, generation_id: int, terms: Sequence[str], limit: int, chunk_scope: sql.Composable,
    columns: sql.Composable, where: sql.Composable, params: dict[str, Any], score_column: int, exact: int | None = None,
) -> list[tuple[Any, ...]]:
    """The best `limit` READY chunks by BM25, best first, as rows of `columns` + the score (see
    the module's docstring and scoring_query); the first `exact` of them (all by default) are
    exactly BM25's best."""
    exact = limit if exact is None else max(1, min(exact, limit))
    terms = [t for t in dict.fromkeys(terms) if textsearch.tsquery_text([t])]
    if not terms:
        return []
    # From here on, terms are the index's (stemmed) lexemes, matched with the 'simple'
    # configuration, which keeps them as they are.
    rows = await (await conn.execute(STATS_SQL, {"generation": generation_id, "text": " ".join(terms)})).fetchall()
    dfs = {term: df for term, df in rows if df > 0}
    chunks = dfs.pop("", 0.0)
    if not dfs or chunks <= 0:
        return []
    weights = {t: idf(chunks, df) for t, df in sorted(dfs.items())}
    order = candidate_rounds(weights, dfs)
    taken = first_candidates(order, dfs)
    if isinstance(where, sql.SQL) and not where.as_string(None):
        return await _search_postings(conn, generation_id, order, taken, weights, limit, exact, chunk_scope, columns,
                                      score_column)
    # A filter narrows the documents: every candidate is joined to its document first.
    while True:
        query, query_params = scoring_query(generation_id, chunk_scope, columns, where, params, order[:taken], weights,
                                            limit, join_first=True)
        found = await (await conn.execute(query, query_params)).fetchall()
        threshold = float(found[exact - 1][score_column]) if len(found) >= exact else 0.0
        needed = enough(order, taken, weights, threshold)
        if needed <= taken:
            return found
        taken = needed


async def _search_postings(
    conn: psycopg.AsyncConnection, generation_id: int, order: Sequence[str], taken: int, weights: dict[str, float],
    limit: int, exact: int, chunk_scope: sql.Composable, columns: sql.Composable, score_column: int,
) -> list[tuple[Any, ...]]:
    """MaxScore over the posting lists (candidates_query): the essential terms' postings give
    every chunk holding one of them a partial score; only the best `scored` of those are read and
    scored exactly. The answer's first `exact` hits are BM25's once the `exact`-th score beats
    both what a chunk without an essential term can score (the other terms at k1 + 1 each) and
    what an unscored candidate can (its partial score, at most the lowest scored one's, plus the
    same). Otherwise more terms become essential, or more candidates are scored, and it runs again."""
    scored = limit * OVERFETCH
    while True:
        query, query_params = candidates_query(generation_id, chunk_scope, columns, order[:taken], weights, limit,
                                               scored)
        rows = await (await conn.execute(query, query_params)).fetchall()
        candidates, lowest = int(rows[0][0]), float(rows[0][1] or 0.0)
        found = [row[2:] for row in rows if row[2] is not None]
        threshold = float(found[exact - 1][score_column]) if len(found) >= exact else 0.0
        rest = sum(weights[t] * MAX_WEIGHT for t in order[taken:])
        unscored = lowest + rest if candidates >= scored else 0.0
        if max(rest, unscored) == 0.0 or threshold > max(rest, unscored) * (1 + SLACK):
            return found
        if rest > 0 and rest * (1 + SLACK) >= threshold:
            taken = max(taken + 1, enough(order, taken, weights, threshold * (1 - SLACK)))
        if unscored * (1 + SLACK) >= threshold and candidates >= scored:
            scored *= 4
