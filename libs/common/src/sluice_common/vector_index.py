"""The per-generation vector index.

chunks.embedding is an untyped `vector` because collections (and the generations of one
collection, when its embedder changes) differ in dimensions. Each index generation of a
collection gets a partial HNSW index over an expression of `embedding` restricted to its own
rows, created by ingest-api with the generation and dropped with it. A query uses the index only
when it repeats the same expression and the same literal predicate, so both are built here,
in one place, with the generation id and dimension as SQL literals (they come from our own
table, never from a client). A bound parameter in their place would defeat the partial index
under a generic plan.

The index's precision (collection_generations.vector_precision, migration 0023; docs/search.md,
"Vector precision") decides the expression; the table always keeps the full float4 vector:

- `float4`: `embedding::vector(d)`, vector_cosine_ops (4 bytes a dimension in the graph);
- `halfvec`: `embedding::halfvec(d)`, halfvec_cosine_ops (2 bytes a dimension);
- `binary`: `binary_quantize(embedding)::bit(d)`, bit_hamming_ops (1 bit a dimension); the
  graph only proposes candidates, which the query re-scores exactly on the float4 vectors.
"""

from __future__ import annotations

import os

from psycopg import sql

INDEX_PREFIX = "chunks_embedding_g"

FLOAT4 = "float4"
HALFVEC = "halfvec"
BINARY = "binary"
PRECISIONS = (FLOAT4, HALFVEC, BINARY)


def index_name(generation_id: int) -> str:
    return f"{INDEX_PREFIX}{int(generation_id)}"


def _check(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"unknown vector precision {precision!r}")
    return precision


def _opclass(precision: str) -> str:
    return {FLOAT4: "vector_cosine_ops", HALFVEC: "halfvec_cosine_ops", BINARY: "bit_hamming_ops"}[_check(precision)]


def create_index_sql(generation_id: int, dimensions: int, *, precision: str = FLOAT4, concurrently: bool = False) -> sql.Composed:
    """`concurrently` (outside a transaction) builds it without blocking writes to chunks."""
    return sql.SQL(
        "CREATE INDEX {how}IF NOT EXISTS {name} ON chunks USING hnsw (({expr}) {ops}) WHERE generation_id = {gid}"
    ).format(
        how=sql.SQL("CONCURRENTLY " if concurrently else ""),
        name=sql.Identifier(index_name(generation_id)),
        expr=index_expr(dimensions, precision, "embedding"),
        ops=sql.SQL(_opclass(precision)),
        gid=sql.Literal(int(generation_id)),
    )


def build_settings_sql(cpus: int | None = None, maintenance_work_mem_mb: int | None = None) -> list[sql.Composed]:
    """Session settings for an index build sized to the machine: pgvector builds HNSW in
    parallel with `max_parallel_maintenance_workers` workers besides the leader (all CPUs but
    the leader's by default; PostgreSQL's max_parallel_workers still caps them), and fastest
    when the whole graph fits in `maintenance_work_mem` (an eighth of the machine's memory by
    default, 64 MB to 4 GB) (docs/search.md, "Vector precision")."""
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    if maintenance_work_mem_mb is None:
        try:
            memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
        except (ValueError, OSError, AttributeError):
            memory_mb = 0
        maintenance_work_mem_mb = min(4096, memory_mb // 8)
    return [
        sql.SQL("SET max_parallel_maintenance_workers = {}").format(sql.Literal(max(0, int(cpus) - 1))),
        sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(f"{max(64, int(maintenance_work_mem_mb))}MB")),
    ]


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


def index_expr(dimensions: int, precision: str, column: str = "c.embedding") -> sql.Composed:
    """The indexed expression of `column` at `precision`."""
    dim = sql.Literal(int(dimensions))
    col = sql.SQL(column)
    if _check(precision) == BINARY:
        return sql.SQL("binary_quantize({col})::bit({dim})").format(col=col, dim=dim)
    return sql.SQL("{col}::{type}({dim})").format(col=col, type=sql.SQL(precision if precision == HALFVEC else "vector"), dim=dim)


def embedding_expr(dimensions: int) -> sql.Composed:
    """The full-precision vector (exact distances), float4 generations' indexed expression."""
    return index_expr(dimensions, FLOAT4)


def index_distance(dimensions: int, precision: str, parameter: str = "v") -> sql.Composed:
    """The distance the generation's index orders by, of the query vector bound as %(parameter)s:
    the indexed expression repeated verbatim, the operator of its operator class."""
    dim = sql.Literal(int(dimensions))
    param = sql.Placeholder(parameter)
    if _check(precision) == BINARY:
        query = sql.SQL("binary_quantize({p}::vector({dim}))::bit({dim})").format(p=param, dim=dim)
        operator = "<~>"
    else:
        query = sql.SQL("{p}::{type}({dim})").format(
            p=param, type=sql.SQL("halfvec" if precision == HALFVEC else "vector"), dim=dim
        )
        operator = "<=>"
    return sql.SQL("{expr} {op} {query}").format(expr=index_expr(dimensions, precision), op=sql.SQL(operator), query=query)


def exact_distance(dimensions: int, parameter: str = "v") -> sql.Composed:
    """The exact cosine distance on the float4 vectors (what every answer's score is)."""
    return sql.SQL("{expr} <=> {p}::vector({dim})").format(
        expr=embedding_expr(dimensions), p=sql.Placeholder(parameter), dim=sql.Literal(int(dimensions))
    )


def generation_predicate(generation_id: int) -> sql.Composed:
    """The partial index's predicate, as a literal so the planner can match it."""
    return sql.SQL("c.generation_id = {gid}").format(gid=sql.Literal(int(generation_id)))
