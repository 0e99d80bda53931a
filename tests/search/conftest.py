"""Fixtures of the search tests: direct SQL seeding (fast) and an in-process search server."""

from __future__ import annotations

import hashlib
import itertools
import uuid

import auth_keys
import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.types.json import Jsonb
from sluice.v1 import search_service_pb2_grpc
from sluice_common import textsearch, vector_index
from sluice_search.main import create_server
from sluice_search.settings import SearchSettings

_content = itertools.count()


class Seeder:
    """Writes collections, documents and chunks straight into the database, as ingest-api's
    commit would leave them (chunks with search_terms from sluice_common.textsearch)."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        register_vector(self.conn)

    def collection(
        self,
        name: str,
        dimensions: int,
        *,
        provider: str = "hashing",
        model: str = "hashing-v1",
        index: bool = True,
        tenant: str = "default",
    ) -> int:
        self.conn.execute("INSERT INTO tenants (name) VALUES (%s) ON CONFLICT DO NOTHING", (tenant,))
        cid = self.conn.execute(
            "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions, chunk_max_characters,"
            " chunk_new_after_n_chars, chunk_overlap, max_attempts)"
            " SELECT t.id, %s, %s, %s, %s, 1500, 1000, 0, 3 FROM tenants t WHERE t.name = %s"
            " RETURNING id",
            (name, provider, model, dimensions, tenant),
        ).fetchone()[0]
        if index:
            self.conn.execute(vector_index.create_index_sql(self.generation(cid), dimensions))
        return cid

    def generation(self, collection_id: int) -> int:
        """The collection's ACTIVE generation (generation 1, made by the collections trigger)."""
        return self.conn.execute(
            "SELECT id FROM collection_generations WHERE collection_id = %s AND state = 'ACTIVE'", (collection_id,)
        ).fetchone()[0]

    def document(
        self,
        collection_id: int,
        filename: str,
        *,
        status: str = "READY",
        metadata: dict | None = None,
        mime_type: str = "text/plain",
    ) -> str:
        sha = hashlib.sha256(f"{filename}-{next(_content)}-{uuid.uuid4()}".encode()).hexdigest()
        error = "failed for a test" if status == "FAILED" else None
        return str(
            self.conn.execute(
                "INSERT INTO documents (tenant_id, collection_id, filename, mime_type, status, content_sha256, size_bytes,"
                " metadata, error_message) SELECT c.tenant_id, c.id, %s, %s, %s, %s, 1, %s, %s FROM collections c"
                " WHERE c.id = %s RETURNING id",
                (filename, mime_type, status, sha, Jsonb(metadata or {}), error, collection_id),
            ).fetchone()[0]
        )

    def chunks(self, collection_id: int, document_id: str, texts: list[str], vectors, *, start_index: int = 0) -> None:
        (tenant_id,) = self.conn.execute("SELECT tenant_id FROM documents WHERE id = %s", (document_id,)).fetchone()
        with self.conn.cursor().copy(
            "COPY chunks (document_id, tenant_id, collection_id, chunk_index, text, page_number, element_type, embedding,"
            " search_terms) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["uuid", "int8", "int8", "int4", "text", "int4", "text", "vector", "text"])
            for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
                copy.write_row(
                    (
                        uuid.UUID(document_id),
                        tenant_id,
                        collection_id,
                        start_index + i,
                        text,
                        1,
                        "NarrativeText",
                        np.asarray(vector, dtype=np.float32),
                        textsearch.search_terms(text),
                    )
                )
        # As ingest-api's commit leaves it (search reads it to plan filtered queries).
        self.conn.execute("UPDATE documents SET chunk_count = chunk_count + %s WHERE id = %s", (len(texts), document_id))

    def set_status(self, document_id: str, status: str) -> None:
        error = "failed for a test" if status == "FAILED" else None
        self.conn.execute("UPDATE documents SET status = %s, error_message = %s WHERE id = %s", (status, error, document_id))

    def delete(self, document_id: str) -> None:
        self.conn.execute("DELETE FROM documents WHERE id = %s", (document_id,))

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def seed(database_url):
    seeder = Seeder(database_url)
    yield seeder
    seeder.close()


def random_unit_vectors(n: int, dimensions: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dimensions)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def embedding_like_vectors(n: int, dimensions: int, seed: int = 0, latent: int = 16) -> np.ndarray:
    """Random unit vectors from a low-dimensional latent space plus noise, as real sentence
    embeddings are (intrinsic dimension ≈ 10-20); the same generator as bench/search_bench.py.
    Isotropic random vectors are the worst case of any graph index (see the bench's --data)."""
    rng = np.random.default_rng(seed)
    basis = np.random.default_rng(12345).standard_normal((latent, dimensions)).astype(np.float32)
    vectors = rng.standard_normal((n, latent)).astype(np.float32) @ basis
    vectors += 0.3 * rng.standard_normal((n, dimensions)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture
def search_settings(search_database_url) -> SearchSettings:
    return SearchSettings(
        search_bind="127.0.0.1:0",
        search_database_url=search_database_url,
        search_collection_cache_seconds=0.5,
        rate_limit_per_second=0.0,
        search_pool_min_size=1,
        search_pool_max_size=4,
        log_json=False,
    )


@pytest.fixture
async def search_stub(search_settings):
    """A SearchService stub talking to a real in-process server over a real channel."""
    server = await create_server(search_settings)
    await server.start()
    channel = auth_keys.aio_channel(f"127.0.0.1:{server.port}")
    try:
        yield search_service_pb2_grpc.SearchServiceStub(channel)
    finally:
        await channel.close()
        await server.stop(0)
