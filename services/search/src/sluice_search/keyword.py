"""BM25 keyword search over a generation's chunks (docs/search.md, "Keyword ranking").

The chunks carry their BM25 document vectors and the generation its statistics (migration
0016); this module turns a query's terms into IDF weights and finds the best chunks.

Scoring every chunk that contains any query term is exact but slow when a query holds a common
word ("list", "file"): on manual pages half the chunks contain "list". So the candidates come
from the query's rarer terms only, as far as that can change no answer (MaxScore, Turtle &
Flood 1995): a chunk's weight for a term never exceeds k1 + 1, so a chunk that contains none
of the candidate terms scores at most Σ idf·(k1 + 1) over the other terms. Once the `limit`-th
best score among the candidates is above that bound, no other chunk can enter the answer.
Otherwise the next rarest terms join the candidates and the query runs again, over the chunks
that hold one of the new terms and none of the earlier ones (those were scored in an earlier
round: their best are kept and merged). Every candidate is scored with all the query's terms, so
the scores are exact BM25.

HYBRID asks for more hits than it answers with (its fusion depth, 50) and needs only the head of
the list exact (its first 5: service.HYBRID_KEYWORD_EXACT): so the bound is checked against the
`exact`-th best score, not the `limit`-th. The first `exact` hits are then exactly BM25's; the
rest are the best of the candidates, each with its exact score (a chunk that holds only the
commonest query words may be missing from that tail). At 100,000 chunks this saves most of the
second rounds, each of which scores thousands more chunks (docs/search.md, "Keyword ranking").
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import psycopg
from pgvector import SparseVector
from psycopg import sql
from psycopg.rows import BaseRowFactory, RowMaker, no_result
from sluice_common import textsearch
from sluice_common.db import one_snapshot

from . import rows

# k1 of migration 0016's document weights: a weight tf·(k1+1)/(tf + …) stays below k1 + 1.
K1 = 1.2
MAX_WEIGHT = K1 + 1
# The first candidate set: the rarest terms whose chunks number at most this many between them
# (always at least the rarest term).
FIRST_CANDIDATES = 1000

# The query's words as the index holds them (stemmed by the same text search configuration,
# migration 0016), each with its document frequency, and the generation's chunk count ('').
STATS_SQL = (
    b"SELECT s.term, sum(s.df)::float8 AS df FROM keyword_stats s"
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


# Without a document filter, the best `limit` x OVERFETCH candidates are ranked on the chunks
# alone, and only they are joined to their documents (READY) and read whole: a query with
# thousands of candidates then reads no text and no document for most of them. If fewer than
# `limit` of them are READY, the query runs again with the join inside.
OVERFETCH = 4


def scoring_query(
    generation_id: int,
    chunk_scope: sql.Composable,
    columns: sql.Composable,
    where: sql.Composable,
    params: dict[str, Any],
    candidates: Sequence[str],
    weights: dict[str, float],
    limit: int,
    *,
    join_first: bool,
    scored: Sequence[str] = (),
) -> tuple[sql.Composed, dict[str, Any]]:
    """Score the chunks holding any `candidates` term, and no `scored` term (an earlier round's),
    with every weighted term.

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
        "kw_match": match_text(candidates, scored),
    }
    head = sql.SQL("WITH q AS ( {vector})").format(
        vector=query_vector_sql(sql.SQL(", to_tsquery('simple', %(kw_match)s) AS match"))
    )
    return _scoring(head, sql.SQL(""), chunk_scope, columns, where, limit, join_first=join_first), params


def term_dim(term: str) -> int:
    """The dimension of a word in the BM25 vectors: migration 0016's sluice_term_dim (29 bits of
    its MD5, from 1), computed here (a test compares the two)."""
    return (int(hashlib.md5(term.encode("utf-8")).hexdigest()[:8], 16) & (textsearch.TERM_DIMENSIONS - 1)) + 1


def term_vector(term: str) -> SparseVector:
    """A word's one-hot BM25 vector: a chunk's BM25 vector times it is below 0 when the chunk
    holds the word (explain.py)."""
    return SparseVector({term_dim(term) - 1: 1.0}, textsearch.TERM_DIMENSIONS)


def query_vector(weights: Mapping[str, float]) -> SparseVector:
    """The query's BM25 vector of these weights, with the very float4 values query_vector_sql
    builds from them in the statement (the weights of words sharing a dimension summed, then
    rounded to float4: pgvector's sparse values are float4), so a chunk scores the same with it."""
    dims: dict[int, float] = {}
    for term, weight in weights.items():
        dim = term_dim(term) - 1
        dims[dim] = dims.get(dim, 0.0) + weight
    return SparseVector({dim: float(np.float32(weight)) for dim, weight in dims.items()}, textsearch.TERM_DIMENSIONS)


def query_vector_sql(more: sql.Composable = sql.SQL("")) -> sql.Composed:
    """A row holding `v`, the query's sparse vector of its terms' weights (%(kw_terms)s and
    %(kw_weights)s: the IDF of each word), then `more` columns: what every scoring round after
    the first scores the chunks with, and what an explanation scores a chunk with (explain.py)."""
    return sql.SQL(
        "SELECT ('{{' || string_agg(dim || ':' || w, ',' ORDER BY dim) || '}}/{dims}')::sparsevec AS v{more}"
        " FROM (SELECT sluice_term_dim(t) AS dim, sum(w)::real AS w"
        " FROM unnest(%(kw_terms)s::text[], %(kw_weights)s::float8[]) AS x(t, w) GROUP BY 1) s"
    ).format(dims=sql.SQL(str(textsearch.TERM_DIMENSIONS)), more=more)


# The first round with the statistics folded in (one round trip instead of two): the query's
# words as the index holds them with their document frequencies (`st`, '' the generation's chunk
# count), their IDF (`w`, Lucene's formula as idf() computes it: the same float8 operations and
# the same C log, so the same weights), the first candidate set chosen as first_candidates()
# chooses it (the rarest words, by df then by code point, while their chunks number at most the
# budget; always the rarest), and the statistics handed back with every row (the last two
# columns) for the rounds that may follow. The words are lexemes of to_tsvector over words of
# letters and digits, so they are letters and digits too: the quoting below is tsquery_text's.
FIRST_ROUND_HEAD = (
    "WITH st AS MATERIALIZED ("
    " SELECT s.term, sum(s.df)::float8 AS df FROM keyword_stats s"
    " WHERE s.generation_id = %(kw_generation)s AND s.term = ANY(ARRAY("
    "SELECT l.lexeme FROM unnest(to_tsvector('sluice_text', %(kw_text)s)) l) || ''::text)"
    " GROUP BY s.term),"
    " n AS (SELECT coalesce(max(st.df) FILTER (WHERE st.term = ''), 0) AS chunks FROM st),"
    " w AS (SELECT st.term, ln(1 + (n.chunks - st.df + 0.5) / (st.df + 0.5)) AS w,"
    ' sum(st.df) OVER (ORDER BY st.df, st.term COLLATE "C" ROWS UNBOUNDED PRECEDING) AS postings,'
    ' row_number() OVER (ORDER BY st.df, st.term COLLATE "C") AS place'
    " FROM st, n WHERE st.term <> '' AND st.df > 0 AND n.chunks > 0),"
    " q AS ("
    " SELECT ('{{' || string_agg(dim || ':' || w, ',' ORDER BY dim) || '}}/{dims}')::sparsevec AS v,"
    " to_tsquery('simple', (SELECT string_agg('''' || w.term || '''', ' | ') FROM w"
    " WHERE w.place = 1 OR w.postings <= %(kw_budget)s)) AS match"
    " FROM (SELECT sluice_term_dim(w.term) AS dim, sum(w.w)::real AS w FROM w GROUP BY 1) s)"
)
FIRST_ROUND_STATS = sql.SQL(
    ", (SELECT array_agg(st.term ORDER BY st.term) FROM st) AS stat_terms,"
    " (SELECT array_agg(st.df ORDER BY st.term) FROM st) AS stat_dfs"
)


def first_round_query(
    generation_id: int,
    text: str,
    chunk_scope: sql.Composable,
    columns: sql.Composable,
    where: sql.Composable,
    params: dict[str, Any],
    limit: int,
    *,
    join_first: bool,
) -> tuple[sql.Composed, dict[str, Any]]:
    """The statistics of the words of `text` and the first round's scoring in one statement: the
    rows of scoring_query over first_candidates(), each followed by the statistics (the query's
    words, and their document frequencies, as STATS_SQL gives them). No row, no statistics."""
    params = {**params, "kw_generation": generation_id, "kw_text": text, "kw_budget": float(FIRST_CANDIDATES)}
    head = sql.SQL(FIRST_ROUND_HEAD).format(dims=sql.SQL(str(textsearch.TERM_DIMENSIONS)))
    return _scoring(head, FIRST_ROUND_STATS, chunk_scope, columns, where, limit, join_first=join_first), params


def _scoring(
    head: sql.Composable,
    extra: sql.Composable,
    chunk_scope: sql.Composable,
    columns: sql.Composable,
    where: sql.Composable,
    limit: int,
    *,
    join_first: bool,
) -> sql.Composed:
    """The scoring statement after `head`, which defines `q` (the query's sparse vector `v` and
    the candidates' tsquery `match`); `extra` are more columns at the end."""
    scores = sql.SQL("sluice_keyword_scores(%(kw_generation)s, q.match, q.v) s")
    if join_first:
        query = sql.SQL(
            "{head} SELECT {columns}, s.score AS rank{extra}"
            " FROM q, {scores} JOIN chunks c ON c.id = s.chunk_id JOIN documents d ON d.id = c.document_id"
            " WHERE {scope} AND d.status = 'READY'{where} ORDER BY rank DESC, c.id LIMIT {limit}"
        )
    else:
        # The column after the score counts the candidates: when there are no more than the
        # overfetch, a short answer holds every READY one.
        query = sql.SQL(
            "{head}, every AS MATERIALIZED (SELECT s.chunk_id AS id, s.score AS rank FROM q, {scores}),"
            " best AS (SELECT id, rank FROM every ORDER BY rank DESC, id LIMIT {overfetch})"
            " SELECT {columns}, best.rank, (SELECT count(*) FROM every) AS candidates{extra}"
            " FROM best JOIN chunks c ON c.id = best.id"
            " JOIN documents d ON d.id = c.document_id"
            " WHERE {scope} AND d.status = 'READY'{where} ORDER BY best.rank DESC, c.id LIMIT {limit}"
        )
    return query.format(
        head=head,
        extra=extra,
        columns=columns,
        scores=scores,
        scope=chunk_scope,
        where=where,
        limit=sql.Literal(int(limit)),
        overfetch=sql.Literal(int(limit) * OVERFETCH),
    )


def match_text(candidates: Sequence[str], scored: Sequence[str] = ()) -> str:
    """The `to_tsquery('simple', …)` text of the chunks holding a `candidates` term and no `scored` one."""
    match = textsearch.tsquery_text(candidates)
    return f"({match}) & !({textsearch.tsquery_text(scored)})" if scored else match


class Ranked(Protocol):
    """What keyword.search needs of the caller's row: the chunk id and its BM25 score, the
    statement's `rank` column after the caller's columns."""

    @property
    def id(self) -> int: ...

    @property
    def rank(self) -> float: ...


R = TypeVar("R", bound=Ranked)


@dataclass(slots=True)
class _Round(Generic[R]):
    """A row of one scoring round: the caller's row, then the columns the round adds after it
    (`candidates` without the join first; the statistics in the first round)."""

    row: R
    candidates: int | None = None
    stat_terms: list[str] | None = None
    stat_dfs: list[float] | None = None


_ROUND_COLUMNS = ("candidates", "stat_terms", "stat_dfs")


def _round_rows(cls: type[R]) -> BaseRowFactory[_Round[R]]:
    """A row factory for a round's rows: `cls` of the caller's columns and `rank` (rows.named),
    the round's own columns by name."""
    expected = rows.fields(cls)
    n = len(expected)

    def factory(cursor: Any) -> RowMaker[_Round[R]]:
        names = rows.column_names(cursor)
        if names is None:
            return no_result
        rows.check_names(names[:n], expected, cls.__name__)
        tail = names[n:]
        rows.check_names(tail, [column for column in _ROUND_COLUMNS if column in tail], "a keyword round's")
        if not tail:
            return lambda values: _Round(cls(*values))
        # Where each of the round's columns is (found by name above): a dict per row, as class_row
        # builds, cost 2-4 us a row, and HYBRID reads 50 rows a side.
        candidates, terms, dfs = (n + tail.index(column) if column in tail else None for column in _ROUND_COLUMNS)
        if terms is None or dfs is None:
            return lambda values: _Round(cls(*values[:n]), values[candidates] if candidates is not None else None)
        return lambda values: _Round(
            cls(*values[:n]), values[candidates] if candidates is not None else None, values[terms], values[dfs]
        )

    return factory


@dataclass(slots=True)
class _TermStat:
    term: str
    df: float


def merge(found: list[R], more: list[R], limit: int) -> list[R]:
    """The best `limit` of two rounds' answers (disjoint chunks), in the statement's order: score
    descending, then the chunk id."""
    if not found:
        return more
    return sorted([*found, *more], key=lambda row: (-float(row.rank), row.id))[:limit]


async def search(
    conn: psycopg.AsyncConnection,
    generation_id: int,
    terms: Sequence[str],
    limit: int,
    chunk_scope: sql.Composable,
    columns: sql.Composable,
    where: sql.Composable,
    params: dict[str, Any],
    row: type[R],
    exact: int | None = None,
    weights_used: dict[str, float] | None = None,
) -> list[R]:
    """The best `limit` READY chunks by BM25, best first, as `row`s of `columns` + the score,
    `rank` (see the module's docstring and scoring_query); the first `exact` of them (all by
    default) are exactly BM25's best. `weights_used`, when given, receives the weight (IDF) of
    each of the query's words the generation holds, as the chunks were scored with (explain.py).

    Every round sees one snapshot (docs/contributing.md, Code): under READ COMMITTED a version
    swap committing between two rounds gave both versions in one answer, or neither. On an
    autocommit session (search's) the rounds run in a REPEATABLE READ, READ ONLY transaction of
    their own, inside a caller's transaction in that one. Two round trips more than the
    statements (BEGIN with the isolation level, COMMIT): starting again in a transaction only when a
    second round proves needed cost more, a first round run twice."""
    exact = limit if exact is None else max(1, min(exact, limit))
    terms = [t for t in dict.fromkeys(terms) if textsearch.tsquery_text([t])]
    if not terms:
        return []
    rounds = _round_rows(row)
    async with one_snapshot(conn):
        # From here on, terms are the index's (stemmed) lexemes, matched with the 'simple'
        # configuration, which keeps them as they are.
        text = " ".join(terms)
        # A filter narrows the documents: then the join comes first (see OVERFETCH).
        join_first = not (isinstance(where, sql.SQL) and not where.as_string(None))
        query, query_params = first_round_query(
            generation_id, text, chunk_scope, columns, where, params, limit, join_first=join_first
        )
        pending: list[_Round[R]] | None = await rows.fetch(conn, query, query_params, rounds)
        if pending:
            first = pending[0]
            stats = list(zip(first.stat_terms or (), first.stat_dfs or (), strict=True))
        else:  # no row, no statistics: ask for them alone
            found_stats = await rows.fetch(conn, STATS_SQL, {"generation": generation_id, "text": text}, rows.named(_TermStat))
            stats = [(stat.term, stat.df) for stat in found_stats]
        dfs = {term: float(df) for term, df in stats if df > 0}
        chunks = dfs.pop("", 0.0)
        if not dfs or chunks <= 0:
            return []
        weights = {t: idf(chunks, df) for t, df in sorted(dfs.items())}
        if weights_used is not None:
            weights_used.update(weights)
        order = candidate_rounds(weights, dfs)
        taken = first_candidates(order, dfs)
        found: list[R] = []
        done = 0  # the terms whose chunks earlier rounds scored
        while True:
            if pending is not None:  # the first round's rows, read with the statistics
                batch, pending = pending, None
            else:
                query, query_params = scoring_query(
                    generation_id,
                    chunk_scope,
                    columns,
                    where,
                    params,
                    order[done:taken],
                    weights,
                    limit,
                    join_first=join_first,
                    scored=order[:done],
                )
                batch = await rows.fetch(conn, query, query_params, rounds)
            if not join_first and len(batch) < limit and (not batch or (batch[0].candidates or 0) > limit * OVERFETCH):
                # Fewer READY chunks among the best than wanted: maybe others further down are.
                join_first = True
                continue
            found = merge(found, [r.row for r in batch], limit)
            threshold = float(found[exact - 1].rank) if len(found) >= exact else 0.0
            needed = enough(order, taken, weights, threshold)
            if needed <= taken:
                return found
            done, taken = taken, needed
