"""The schema migrates on a real PostgreSQL with pgvector and holds its invariants."""

import psycopg
import pytest


def test_pgvector_and_tables(database_url):
    with psycopg.connect(database_url) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert version is not None
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        assert {
            "collections",
            "documents",
            "document_contents",
            "ingestion_jobs",
            "job_attempts",
            "chunk_snapshots",
            "chunks",
        } <= tables


def test_failed_document_requires_message(database_url):
    with psycopg.connect(database_url) as conn:
        cid = conn.execute(
            "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions, chunk_max_characters,"
            " chunk_new_after_n_chars, chunk_overlap, max_attempts) VALUES (1, 'c', 'hashing', 'h', 8, 1000, 800, 0, 3)"
            " RETURNING id"
        ).fetchone()[0]
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(
                "INSERT INTO documents (tenant_id, collection_id, filename, mime_type, status, content_sha256, size_bytes)"
                " VALUES (1, %s, 'a.txt', 'text/plain', 'FAILED', repeat('a', 64), 1)",
                (cid,),
            )


def test_search_reader_role_can_read_but_not_write(database_url):
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'search_login') THEN"
            " CREATE ROLE search_login LOGIN IN ROLE sluice_search_reader; END IF; END $$"
        )
        conn.execute("SET ROLE search_login")
        assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT count(*) FROM document_contents")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM documents")
