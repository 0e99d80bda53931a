"""BM25 keyword search over a generation's chunks (docs/search.md, "Keyword ranking").

The chunks carry their BM25 document vectors and the generation its statistics (migration
0016); this module turns a query's terms into IDF weights and finds the best chunks.

Scoring every chunk that contains any query term is exact but slow when a query holds a common
word ("list", "file"): on manual pages half the chunks contain "list". So the candidates come
from the query's rarer terms only, as far as that can change no answer (MaxScore, Turtle &
Flood 1995): a chunk's weight for a term never exceeds k1 + 1, so a chunk that contains none
of the candidate terms scores at most Σ idf·(k1 + 1) over the other terms. Once the `limit`-th
best score among the candidates is above that bound, no other chunk can enter the answer.
Otherwise the next rarest terms join the candidates and the query runs again. Every candidate is
scored with all the query's terms, so the scores are exact BM25.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import psycopg
from psycopg import sql

from sluice_common import textsearch

# k1 of migration 0016's document weights: a weight tf·(k1+1)/(tf + …) stays below k1 + 1.
K1 = 1.2
MAX_WEIGHT = K1 + 1
# The first candidate set: the rarest terms whose chunks number at most this many between them
# (always at least the rarest term).
FIRST_CANDIDATES = 1000

STATS_SQL = (
    b"SELECT term, sum(df)::float8 FROM keyword_stats WHERE generation_id = %(generation)s"
    b" AND term = ANY(%(terms)s::text[]) GROUP BY term"
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


def scoring_query(
    head: sql.Composable, where: sql.Composable, params: dict, candidates: Sequence[str], weights: dict[str, float],
    limit: int,
) -> tuple[sql.Composed, dict]:
    """Score the chunks holding any `candidates` term with every weighted term. `head` is the
    FROM/WHERE of the caller's chunk query (chunks c, documents d, READY, tenant, generation)."""
    params = {
        **params,
        "kw_terms": list(weights),
        "kw_weights": [weights[t] for t in weights],
        "kw_match": textsearch.tsquery_text(candidates),
    }
    query = sql.SQL(
        "WITH q AS ("
        " SELECT ('{{' || string_agg(dim || ':' || w, ',' ORDER BY dim) || '}}/{dims}')::sparsevec AS v"
        " FROM (SELECT sluice_term_dim(t) AS dim, sum(w)::real AS w"
        " FROM unnest(%(kw_terms)s::text[], %(kw_weights)s::float8[]) AS x(t, w) GROUP BY 1) s"
        ") {head} AND c.search_tsv @@ to_tsquery('simple', %(kw_match)s){where}"
        " ORDER BY rank DESC, c.id LIMIT {limit}"
    ).format(dims=sql.SQL(str(textsearch.TERM_DIMENSIONS)), head=head, where=where, limit=sql.Literal(int(limit)))
    return query, params


async def search(
    conn: psycopg.AsyncConnection, generation_id: int, terms: Sequence[str], limit: int, head: sql.Composable,
    where: sql.Composable, params: dict, score_column: int,
) -> list[tuple]:
    """The best `limit` rows of `head` by BM25, best first (see the module's docstring)."""
    terms = [t for t in dict.fromkeys(terms) if textsearch.tsquery_text([t])]
    if not terms:
        return []
    rows = await (await conn.execute(STATS_SQL, {"generation": generation_id, "terms": ["", *terms]})).fetchall()
    dfs = {term: df for term, df in rows if df > 0}
    chunks = dfs.pop("", 0.0)
    if not dfs or chunks <= 0:
        return []
    weights = {t: idf(chunks, dfs[t]) for t in terms if t in dfs}
    order = candidate_rounds(weights, dfs)
    taken = first_candidates(order, dfs)
    while True:
        query, query_params = scoring_query(head, where, params, order[:taken], weights, limit)
        found = await (await conn.execute(query, query_params)).fetchall()
        threshold = float(found[limit - 1][score_column]) if len(found) >= limit else 0.0
        needed = enough(order, taken, weights, threshold)
        if needed <= taken:
            return found
        taken = needed
