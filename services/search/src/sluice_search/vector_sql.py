"""The VECTOR statements: through the partial HNSW index, exact, a `binary` generation's re-score,
a selective filter's exact plan, and HYBRID's document similarity around any of them.

Every statement joins `documents` and keeps `d.status = 'READY'` in its WHERE clause (rule 3 of
docs/architecture.md#the-rules). Generation id, dimension and LIMIT are SQL literals (they come
from our own table and from a validated integer), so the planner can match the per-generation
partial HNSW index (sluice_common.vector_index); everything a client sends is a bound parameter.
Because the index's predicate is a literal in the text, a prepared statement's generic plan still
matches the partial index (tests/search: test_partial_index_survives_a_generic_plan), so
statements are prepared after a few runs: planning is a fifth of a 3 ms query at 100k x 384.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import sql
from sluice_common import vector_index
from sluice_common.vector_index import FLOAT4

from .domain import Collection, DocumentFilter
from .filter_sql import filter_sql
from .rows import HIT_COLUMNS

# A filtered VECTOR search scores the filter's chunks exactly while they number at most
# max(SLUICE_SEARCH_EXACT_FILTER_MAX_CHUNKS, sqrt(walk cost x ef_search x the generation's chunks)),
# capped at the ceiling (selective_vector_query). The walk cost is where the two plans crossed
# in bench/search_bench.py's filter sweep (docs/search.md, "Filters"): about 5,500 filtered chunks
# of 100,000 and 7,200 of 300,000 at ef_search 40, i.e. 7.6 and 4.3; 5 lies between. Near the
# crossing the two plans cost about the same, so the constant need not be exact.
EXACT_FILTER_WALK_COST = 5.0
EXACT_FILTER_CEILING = 100_000

# The vector side of HYBRID with document context also reads the similarity of each candidate's
# document to the query: the document's vector (migration 0026) in the candidate's generation, by
# primary key, NULL for a document without one. It wraps the vector statement (whichever plan
# answers), so that it is computed for the rows returned only: as a column of the statement
# itself, PostgreSQL computed it for every row an exact scan sorts (16,000 at 94,000 chunks, 3x
# the scan's time).
_WITH_DOCUMENT_SIMILARITY = sql.SQL(
    "SELECT q.*, (SELECT 1 - (v.embedding <=> %(v)s) FROM document_vectors v"
    " WHERE v.generation_id = {gid} AND v.tenant_id = {tid} AND v.document_id = q.document_id) AS document_similarity"
    " FROM ({query}) q"
)


def with_document_similarity(collection: Collection, query: sql.Composed) -> sql.Composed:
    """`query` (whose columns name `document_id`) and one more column, `document_similarity`."""
    return _WITH_DOCUMENT_SIMILARITY.format(
        gid=sql.Literal(int(collection.generation_id)), tid=sql.Literal(int(collection.tenant_id)), query=query
    )


def selective_vector_query(
    collection: Collection,
    vector: Sequence[float],
    limit: int,
    filter: DocumentFilter,
    max_chunks: int,
    *,
    walk_cost: float = 0.0,
    columns: sql.Composable = HIT_COLUMNS,
) -> tuple[sql.Composed, dict[str, Any]]:
    """One statement for a filtered VECTOR search: the READY documents the filter selects (at
    most cap + 1 of them) and, when they hold at most `cap` chunks, the `limit` nearest of those
    chunks, scored exactly. Every row starts with (documents, chunks, cap) (rows.FilteredRow);
    when there are too many, one row of NULL hits says so and the caller walks the graph.

    The cap is max_chunks, or more in a large generation: sqrt(walk_cost x ef_search x the
    generation's chunks), read from its keyword statistics in the same statement. A graph walk
    that keeps a share s of the chunks visits about ef_search / s of them, so an exact scan of the
    filter's n chunks is the cheaper plan while n^2 < walk_cost x ef_search x chunks
    (docs/search.md, "Filters": walk_cost measured at 100,000 and 300,000 chunks). walk_cost 0
    keeps the cap at max_chunks."""
    where, params = filter_sql(filter)
    params["v"] = np.asarray(vector, dtype=np.float32)
    distance = vector_index.exact_distance(collection.dimensions)
    query = sql.SQL(
        "WITH n AS MATERIALIZED ("
        " SELECT greatest({floor}::float8, least({ceiling}::float8, floor(sqrt({walk_cost}::float8"
        " * coalesce(nullif(current_setting('hnsw.ef_search', true), ''), '40')::float8"
        " * coalesce(sum(s.df), 0)))))::bigint AS cap"
        " FROM keyword_stats s WHERE s.generation_id = {gid} AND s.term = ''"
        "), m AS MATERIALIZED ("
        " SELECT d.id, d.chunk_count FROM documents d"
        " WHERE d.collection_id = {cid} AND d.tenant_id = {tid} AND d.status = 'READY'{where}"
        " LIMIT (SELECT n.cap + 1 FROM n)"
        "), t AS (SELECT count(*) AS documents, coalesce(sum(m.chunk_count), 0) AS chunks, (SELECT n.cap FROM n) AS cap FROM m)"
        " SELECT t.documents, t.chunks, t.cap, h.* FROM t LEFT JOIN LATERAL ("
        " SELECT {cols}, {distance} AS distance FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE t.documents <= t.cap AND t.chunks <= t.cap AND c.document_id = ANY(ARRAY(SELECT m.id FROM m))"
        " AND {pred} AND c.tenant_id = {tid} AND d.status = 'READY'{where}"
        " ORDER BY ({distance}) + 0, c.id LIMIT {limit}"
        ") h ON true"
    ).format(
        cid=sql.Literal(int(collection.id)),
        tid=sql.Literal(int(collection.tenant_id)),
        where=where,
        floor=sql.Literal(int(max_chunks)),
        ceiling=sql.Literal(int(max(max_chunks, EXACT_FILTER_CEILING))),
        walk_cost=sql.Literal(float(walk_cost)),
        gid=sql.Literal(int(collection.generation_id)),
        cols=columns,
        distance=distance,
        pred=vector_index.generation_predicate(collection.generation_id),
        limit=sql.Literal(int(limit)),
    )
    return query, params


def vector_query(
    collection: Collection,
    vector: Sequence[float],
    limit: int,
    filter: DocumentFilter,
    *,
    exact: bool = False,
    columns: sql.Composable = HIT_COLUMNS,
    rescore_candidates: int = 0,
) -> tuple[sql.Composed, dict[str, Any]]:
    """The vector query and its parameters: through the partial HNSW index, or exact; its
    columns are `columns`, then `distance`.

    The ORDER BY repeats the generation's indexed expression (vector_index.index_distance, at
    the generation's precision) so the planner uses its partial index; the distance returned is
    always the exact one on the float4 vectors. A `binary` generation's graph only proposes
    candidates: the nearest max(limit, `rescore_candidates`) by Hamming distance, re-scored
    exactly, of which the best `limit` are the answer (docs/search.md, "Vector precision")."""
    where, params = filter_sql(filter)
    params["v"] = np.asarray(vector, dtype=np.float32)
    distance = vector_index.exact_distance(collection.dimensions)
    precision = FLOAT4 if exact else collection.vector_precision
    # Exact: `+ 0` makes the sort key an expression no index serves.
    order = (
        sql.SQL("({distance}) + 0, c.id").format(distance=distance)
        if exact
        else vector_index.index_distance(collection.dimensions, precision)
    )
    body = sql.SQL(
        "SELECT {cols}, {distance} AS distance"
        " FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE {pred} AND c.tenant_id = {tid} AND d.status = 'READY'{where}"
        " ORDER BY {order} LIMIT {limit}"
    )
    fields = {
        "cols": columns,
        "distance": distance,
        "pred": vector_index.generation_predicate(collection.generation_id),
        "tid": sql.Literal(int(collection.tenant_id)),
        "where": where,
        "order": order,
    }
    if precision == vector_index.BINARY:
        inner = body.format(**fields, limit=sql.Literal(max(int(limit), int(rescore_candidates))))
        query = sql.SQL("SELECT * FROM ({inner}) r ORDER BY r.distance LIMIT {limit}").format(
            inner=inner, limit=sql.Literal(int(limit))
        )
        return query, params
    return body.format(**fields, limit=sql.Literal(int(limit))), params
