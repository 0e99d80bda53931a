"""The per-generation vector index.

chunks.embedding is an untyped `vector` because collections (and the generations of one
collection, when its embedder changes) differ in dimensions. Each index generation of a
collection gets a partial HNSW index over `embedding::vector(d)` restricted to its own rows,
created by ingest-api with the generation and dropped with it. A query uses the index only
when it repeats the same expression and the same literal predicate, so both are built here,
in one place, with the generation id and dimension as SQL literals (they come from our own
table, never from a client). A bound parameter in their place would defeat the partial index
under a generic plan.
"""

from __future__ import annotations

from psycopg import sql

INDEX_PREFIX = "chunks_embedding_g"


def index_name(generation_id: int) -> str:
    return f"{INDEX_PREFIX}{int(generation_id)}"


def create_index_sql(generation_id: int, dimensions: int, *, concurrently: bool = False) -> sql.Composed:
    """`concurrently` (outside a transaction) builds it without blocking writes to chunks."""
    return sql.SQL(
        "CREATE INDEX {how}IF NOT EXISTS {name} ON chunks USING hnsw ((embedding::vector({dim})) vector_cosine_ops)"
        " WHERE generation_id = {gid}"
    ).format(how=sql.SQL("CONCURRENTLY " if concurrently else ""), name=sql.Identifier(index_name(generation_id)),
             dim=sql.Literal(int(dimensions)), gid=sql.Literal(int(generation_id)))


def index_state_sql(generation_id: int) -> sql.Composed:
    """One row (indisvalid) when the generation's index exists, none otherwise."""
    return sql.SQL("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass({name})").format(
        name=sql.Literal(index_name(generation_id))
    )


def drop_index_sql(generation_id: int, *, concurrently: bool = False) -> sql.Composed:
    """`concurrently` (outside a transaction) does not block searches of other generations while
    it waits for queries still using the index."""
    return sql.SQL("DROP INDEX {how}IF EXISTS {name}").format(
        how=sql.SQL("CONCURRENTLY " if concurrently else ""), name=sql.Identifier(index_name(generation_id))
    )


def embedding_expr(dimensions: int) -> sql.Composed:
    """The indexed expression, to be repeated verbatim in ORDER BY."""
    return sql.SQL("c.embedding::vector({dim})").format(dim=sql.Literal(int(dimensions)))


def generation_predicate(generation_id: int) -> sql.Composed:
    """The partial index's predicate, as a literal so the planner can match it."""
    return sql.SQL("c.generation_id = {gid}").format(gid=sql.Literal(int(generation_id)))
