"""The per-collection vector index.

chunks.embedding is an untyped `vector` because collections differ in dimensions. Each
collection gets a partial HNSW index over `embedding::vector(d)` restricted to its own rows,
created by ingest-api with the collection. A query uses the index only when it repeats the
same expression and the same literal predicate, so both are built here, in one place, with
the collection id and dimension as SQL literals (they come from our own table, never from a
client). A bound parameter in their place would defeat the partial index under a generic plan.
"""

from __future__ import annotations

from psycopg import sql


def index_name(collection_id: int) -> str:
    return f"chunks_embedding_c{int(collection_id)}"


def create_index_sql(collection_id: int, dimensions: int) -> sql.Composed:
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name} ON chunks USING hnsw ((embedding::vector({dim})) vector_cosine_ops)"
        " WHERE collection_id = {cid}"
    ).format(name=sql.Identifier(index_name(collection_id)), dim=sql.Literal(int(dimensions)), cid=sql.Literal(int(collection_id)))


def drop_index_sql(collection_id: int) -> sql.Composed:
    return sql.SQL("DROP INDEX IF EXISTS {name}").format(name=sql.Identifier(index_name(collection_id)))


def embedding_expr(dimensions: int) -> sql.Composed:
    """The indexed expression, to be repeated verbatim in ORDER BY."""
    return sql.SQL("c.embedding::vector({dim})").format(dim=sql.Literal(int(dimensions)))


def collection_predicate(collection_id: int) -> sql.Composed:
    """The partial index's predicate, as a literal so the planner can match it."""
    return sql.SQL("c.collection_id = {cid}").format(cid=sql.Literal(int(collection_id)))
