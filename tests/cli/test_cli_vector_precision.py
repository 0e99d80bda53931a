"""`sluice collections create --vector-precision` (docs/search.md, "Vector precision") against the
real ingest-api: the collection and its first generation record it, and its index is that
precision's; an unknown precision is a usage error before any call."""

from __future__ import annotations

import json

import psycopg


def test_create_with_a_vector_precision(sluice, stack):
    result = sluice(
        "--json", "collections", "create", "docs", "--embedder", "hashing", "--vector-precision", "binary", *stack.args
    )
    assert result.code == 0, result.err
    created = json.loads(result.out)
    assert created["vector_precision"] == "VECTOR_PRECISION_BINARY"
    with psycopg.connect(stack.database_url) as conn:
        precision, indexdef = conn.execute(
            "SELECT g.vector_precision, i.indexdef FROM collection_generations g"
            " JOIN pg_indexes i ON i.indexname = 'chunks_embedding_g' || g.id"
        ).fetchone()
    assert precision == "binary" and "bit_hamming_ops" in indexdef

    plain = sluice("--json", "collections", "create", "plain", "--embedder", "hashing", *stack.args)
    assert plain.code == 0, plain.err
    assert json.loads(plain.out)["vector_precision"] == "VECTOR_PRECISION_HALFVEC"


def test_an_unknown_vector_precision_is_a_usage_error(sluice, stack):
    result = sluice("collections", "create", "docs", "--embedder", "hashing", "--vector-precision", "int8", *stack.args)
    assert result.code == 2
    assert "int8" in result.err and "Traceback" not in result.err
