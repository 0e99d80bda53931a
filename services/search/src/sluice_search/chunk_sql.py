"""Statements over chunks already chosen: HYBRID's fused answer read whole (hits_by_id_query) and
the neighbours of a hit for its context (chunk_texts_query, context.py). Both keep every search's
rules: the generation's chunks, the tenant named in the SQL, READY documents only (rule 3 of
docs/architecture.md#the-rules)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql
from sluice_common import vector_index

from . import explain
from .domain import Collection, DocumentFilter
from .explain_sql import explain_columns
from .filter_sql import filter_sql
from .rows import HIT_COLUMNS


def hits_by_id_query(
    collection: Collection, chunk_ids: Sequence[int], filter: DocumentFilter, wanted: explain.Wanted | None
) -> tuple[sql.Composed, dict[str, Any], list[str]]:
    """The hits of these chunks that still pass the filter (rows.HitRow), with what an explanation
    reads of each when `wanted` (rows.ExplainedHitRow); the parameters; the words the
    explanation's `held_words` index."""
    where, params = filter_sql(filter)
    params["ids"] = list(chunk_ids)
    more: sql.Composable = sql.SQL("")
    words: list[str] = []
    if wanted is not None:
        columns, words = explain_columns(collection, wanted, params)
        more = sql.SQL(", ") + columns
    query = sql.SQL(
        "SELECT {cols}{more} FROM chunks c JOIN documents d ON d.id = c.document_id"
        " WHERE c.id = ANY(%(ids)s::bigint[]) AND {pred} AND c.tenant_id = {tid} AND d.status = 'READY'{where}"
    ).format(
        cols=HIT_COLUMNS,
        more=more,
        pred=vector_index.generation_predicate(collection.generation_id),
        tid=sql.Literal(int(collection.tenant_id)),
        where=where,
    )
    return query, params, words


def chunk_texts_query(collection: Collection, windows: Sequence[tuple[str, int, int]]) -> tuple[sql.Composed, dict[str, Any]]:
    """The texts of the chunks in each (document, first, last chunk index) window (rows.ChunkTextRow)."""
    query = sql.SQL(
        "SELECT c.document_id::text AS document_id, c.chunk_index, c.text"
        " FROM unnest(%(documents)s::uuid[], %(firsts)s::int[], %(lasts)s::int[]) AS w(document_id, first, last)"
        " JOIN chunks c ON c.document_id = w.document_id AND c.chunk_index BETWEEN w.first AND w.last"
        " JOIN documents d ON d.id = c.document_id"
        " WHERE {pred} AND c.tenant_id = {tid} AND d.status = 'READY'"
    ).format(pred=vector_index.generation_predicate(collection.generation_id), tid=sql.Literal(int(collection.tenant_id)))
    params = {"documents": [w[0] for w in windows], "firsts": [w[1] for w in windows], "lasts": [w[2] for w in windows]}
    return query, params
