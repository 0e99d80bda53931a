"""The columns an explanation reads of a chunk, beside its hit's (docs/search.md, "Why a hit
ranked"; explain.py): rows.ExplainedHitRow's last three."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from psycopg import sql
from sluice_common import vector_index

from . import explain, keyword
from .domain import Collection


def explain_columns(collection: Collection, wanted: explain.Wanted, params: dict[str, Any]) -> tuple[sql.Composable, list[str]]:
    """The columns an explanation reads of a chunk of `c` (`held_words`, `keyword_score`,
    `vector_distance`: rows.ExplainedHitRow), and the words `held_words` indexes (from 1) name;
    their parameters are added to `params`:

    - which of the query's words the keyword side weighed (the only ones a chunk can hold: the
      generation holds no other) the chunk holds, by their indexes, in code point order. A word
      is held when the chunk's BM25 vector has a weight at the word's dimension (a weight is
      never 0 for a word the chunk holds): one sparse product per word, a tenth of the time of
      reading the chunk's tsvector (its lexemes unnested, or converted to an array), measured
      over 500 chunks of ~1,000 characters. It shares the BM25 vector's one imprecision: two
      words whose dimensions collide (docs/search.md, "Keyword ranking").
    - with `wanted.keyword_scores`, the chunk's BM25 score: its BM25 vector times the query's of
      those weights, built as the ranking builds it (keyword.query_vector: the same float4
      values), so a chunk the ranking scored gets the same score (0 without the query's words);
    - with `wanted.vector`, the chunk's exact cosine distance to it (the expression every vector
      score comes from)."""
    words = sorted(wanted.keyword_weights)
    params["kw_words"] = [keyword.term_vector(word) for word in words]
    if wanted.keyword_scores and words:
        params["kw_query"] = keyword.query_vector(wanted.keyword_weights)
    if wanted.vector is not None:
        params["v"] = np.asarray(wanted.vector, dtype=np.float32)
    scores = "weights" if wanted.keyword_scores and words else "zero" if wanted.keyword_scores else "none"
    return _columns(collection.dimensions, scores, wanted.vector is not None), words


@functools.lru_cache(maxsize=256)
def _columns(dimensions: int, scores: str, similarity: bool) -> sql.SQL:
    """explain_columns' columns, composed once per shape: BM25 scores by %(kw_query)s (`weights`),
    0 (`zero`: none of the query's words is in the generation) or none; the cosine distance or not."""
    bm25 = {"weights": "coalesce(-(c.search_bm25 <#> %(kw_query)s::sparsevec), 0)", "zero": "0::float8"}.get(
        scores, "NULL::float8"
    )
    columns = sql.SQL(
        "ARRAY(SELECT i FROM generate_subscripts(%(kw_words)s::sparsevec[], 1) AS i"
        " WHERE (c.search_bm25 <#> (%(kw_words)s::sparsevec[])[i]) < 0 ORDER BY i) AS held_words,"
        " {bm25} AS keyword_score, {distance} AS vector_distance"
    ).format(bm25=sql.SQL(bm25), distance=vector_index.exact_distance(dimensions) if similarity else sql.SQL("NULL::float8"))
    return sql.SQL(columns.as_string(None))
