"""A collection's export and import (docs/bundles.md): the statements,
each named here, and the two units of work.

The export reads one snapshot (REPEATABLE READ, READ ONLY) by binary COPY; the import writes
everything in one transaction, by binary COPY, so an import that fails or is killed at any
moment leaves nothing behind. The import's writes go through the tables' own triggers: the
keyword statistics, `keyword_chunks` and the documents' vectors follow the chunks, and the
documents' events follow the documents (docs/architecture.md, "The rules"). The HNSW index of the
new generation is built last, in bulk. Statuses, states and kinds come from the domain's enums
(literals.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb
from sluice_common import vector_index
from sluice_common.db import one_snapshot
from sluice_common.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from sluice_common.reasons import Reason

from ..domain import GenerationState, JobPriority
from .common import COPY_SIGNATURE, COPY_TRAILER, StoreBase, check_quota, lookup_collection, one_row
from .generations import with_generations
from .literals import compose
from .rows import CollectionRow, NewCollection

# --- export ---------------------------------------------------------------------------------

SCHEMA_HEAD_SQL = "SELECT version_num FROM alembic_version"
GENERATIONS_SQL = compose(
    "SELECT id, number, state::text AS state, embedder_provider, embedder_model, dimensions, vector_precision,"
    " created_at, activated_at, ended_at, eval_set, eval_min_ratio"
    " FROM collection_generations WHERE collection_id = %s AND dropped_at IS NULL ORDER BY number"
)
DOCUMENT_COUNTS_SQL = compose(
    "SELECT count(*) AS documents, count(*) FILTER (WHERE status = {doc_ready}) AS ready,"
    " coalesce(sum(size_bytes), 0) AS original_bytes FROM documents WHERE collection_id = %s"
)
CHUNK_COUNTS_SQL = (
    "SELECT (SELECT count(*) FROM chunks WHERE generation_id = %(g)s) AS chunks,"
    " (SELECT count(*) FROM disabled_chunks WHERE generation_id = %(g)s) AS disabled_chunks,"
    " (SELECT count(*) FROM chunks WHERE generation_id = %(g)s AND original_text IS NOT NULL)"
    " + (SELECT count(*) FROM disabled_chunks WHERE generation_id = %(g)s AND original_text IS NOT NULL) AS edited_chunks"
)
# Each COPY's columns are the bundle schema's, in its order (bundle_format.py).
EXPORT_DOCUMENTS_SQL = (
    "COPY (SELECT id::text, filename, mime_type, status::text, error_code, error_message, content_sha256, size_bytes,"
    " metadata::text, chunk_count, created_at, updated_at, source_uri, version, version_role"
    " FROM documents WHERE collection_id = {collection} ORDER BY created_at, id) TO STDOUT (FORMAT BINARY)"
)
EXPORT_DOCUMENT_TYPES = [
    "text", "text", "text", "text", "text", "text", "text", "int8", "text", "int4", "timestamptz", "timestamptz",
    "text", "int4", "text",
]  # fmt: skip
EXPORT_VERSIONS_SQL = (
    "COPY (SELECT source_uri, version, document_id::text, content_sha256, created_at, serving_at, ended_at, outcome,"
    " error_message FROM document_versions WHERE collection_id = {collection} ORDER BY source_uri, version)"
    " TO STDOUT (FORMAT BINARY)"
)
EXPORT_VERSION_TYPES = ["text", "int4", "text", "text", "timestamptz", "timestamptz", "timestamptz", "text", "text"]
# The chunks of one generation, from either table, in the same columns; a disabled chunk has no
# BM25 vector (it gets one computed when it is enabled).
EXPORT_CHUNKS_SQL = (
    "COPY (SELECT document_id::text, chunk_index, text, page_number, element_type, element_types, section_title,"
    " text_as_html, vector_send(embedding), search_terms, search_length, sparsevec_send(search_bm25), text_source,"
    " ocr_confidence, boxes::text, original_text, revision, updated_at FROM chunks WHERE generation_id = {generation}"
    " ORDER BY document_id, chunk_index) TO STDOUT (FORMAT BINARY)"
)
EXPORT_DISABLED_CHUNKS_SQL = (
    "COPY (SELECT document_id::text, chunk_index, text, page_number, element_type, element_types, section_title,"
    " text_as_html, vector_send(embedding), search_terms, search_length, NULL::bytea, text_source,"
    " ocr_confidence, boxes::text, original_text, revision, updated_at FROM disabled_chunks"
    " WHERE generation_id = {generation} ORDER BY document_id, chunk_index) TO STDOUT (FORMAT BINARY)"
)
EXPORT_CHUNK_TYPES = [
    "text", "int4", "text", "int4", "text", "text[]", "text", "text", "bytea", "text", "int4", "bytea", "text",
    "float4", "text", "text", "int4", "timestamptz",
]  # fmt: skip
# Each distinct original once (documents with the same bytes share it), then its bytes in pieces.
ORIGINALS_SQL = (
    "SELECT DISTINCT ON (content_sha256) id, content_sha256, size_bytes FROM documents"
    " WHERE collection_id = %s ORDER BY content_sha256, id"
)
ORIGINAL_SLICE_SQL = "SELECT substring(content FROM %s FOR %s) FROM document_contents WHERE document_id = %s"

# --- import ---------------------------------------------------------------------------------

INSERT_COLLECTION_SQL = """
    INSERT INTO collections (tenant_id, name, description, embedder_provider, embedder_model, dimensions,
        chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts, reranker, vector_precision)
    VALUES (%(tenant_id)s, %(name)s, %(description)s, %(embedder_provider)s, %(embedder_model)s, %(dimensions)s,
        %(chunk_max_characters)s, %(chunk_new_after_n_chars)s, %(chunk_overlap)s, %(max_attempts)s, %(reranker)s,
        %(vector_precision)s)
    ON CONFLICT (tenant_id, name) DO NOTHING
    RETURNING id
"""
# Generation 1 (ACTIVE) is made by the collections trigger (migration 0009).
ACTIVE_GENERATION_SQL = compose("SELECT id FROM collection_generations WHERE collection_id = %s AND state = {gen_active}")
SET_EVAL_SET_SQL = "UPDATE collection_generations SET eval_set = %s, eval_min_ratio = %s WHERE id = %s"
IMPORT_DOCUMENTS_SQL = (
    "COPY documents (id, tenant_id, collection_id, filename, mime_type, status, error_code, error_message,"
    " content_sha256, size_bytes, metadata, chunk_count, created_at, updated_at, source_uri, version, version_role)"
    " FROM STDIN (FORMAT BINARY)"
)
# jsonb's binary form is a version byte and the text: `metadata` goes as bytes (json_binary).
IMPORT_DOCUMENT_TYPES = [
    "uuid", "int8", "int8", "text", "text", "text", "text", "text", "text", "int8", "bytea", "int4", "timestamptz",
    "timestamptz", "text", "int4", "text",
]  # fmt: skip
# Rule 5: every document with its INGEST job, in the same transaction; a READY one's job
# SUCCEEDED, any other's PENDING, for the workers to claim.
# An import is bulk work: documents it queues for embedding wait behind interactive uploads
# (docs/tenancy.md, "Priorities").
INSERT_JOBS_SQL = compose(
    "INSERT INTO ingestion_jobs (document_id, max_attempts, status, priority)"
    " SELECT id, %s, CASE WHEN status = {doc_ready} THEN {job_succeeded} ELSE {job_pending} END::job_status, {bulk}"
    " FROM documents WHERE collection_id = %s",
    bulk=sql.Literal(int(JobPriority.BULK)),
)
IMPORT_VERSIONS_SQL = (
    "COPY document_versions (collection_id, tenant_id, source_uri, version, document_id, content_sha256, created_at,"
    " serving_at, ended_at, outcome, error_message) FROM STDIN (FORMAT BINARY)"
)
IMPORT_VERSION_TYPES = [
    "int8", "int8", "text", "int4", "uuid", "text", "timestamptz", "timestamptz", "timestamptz", "text", "text",
]  # fmt: skip
# search_bm25 is kept as the bundle carries it (migration 0031); search_length, search_tsv and
# keyword_chunks are computed from search_terms by the table's triggers.
IMPORT_CHUNKS_SQL = (
    "COPY chunks (document_id, tenant_id, collection_id, generation_id, chunk_index, text, page_number, element_type,"
    " element_types, section_title, text_as_html, embedding, search_terms, search_bm25, text_source, ocr_confidence,"
    " boxes, original_text, revision, updated_at) FROM STDIN (FORMAT BINARY)"
)
IMPORT_CHUNK_TYPES = [
    "uuid", "int8", "int8", "int8", "int4", "text", "int4", "text", "text[]", "text", "text", "bytea", "text", "bytea",
    "text", "float4", "bytea", "text", "int4", "timestamptz",
]  # fmt: skip
# A disabled chunk keeps an id from the chunks' sequence (it takes it back when enabled).
CHUNK_IDS_SQL = "SELECT nextval(pg_get_serial_sequence('chunks', 'id')) FROM generate_series(1, %s)"
IMPORT_DISABLED_SQL = (
    "COPY disabled_chunks (id, document_id, tenant_id, collection_id, generation_id, chunk_index, text, page_number,"
    " element_type, element_types, section_title, text_as_html, embedding, search_terms, search_length, text_source,"
    " ocr_confidence, boxes, original_text, revision, updated_at) FROM STDIN (FORMAT BINARY)"
)
IMPORT_DISABLED_TYPES = [
    "int8", "uuid", "int8", "int8", "int8", "int4", "text", "int4", "text", "text[]", "text", "text", "bytea", "text",
    "int4", "text", "float4", "bytea", "text", "int4", "timestamptz",
]  # fmt: skip
DOCUMENTS_WITH_CONTENT_SQL = "SELECT id FROM documents WHERE collection_id = %s AND content_sha256 = %s ORDER BY id"
COPY_CONTENT_SQL = "COPY document_contents (document_id, content) FROM STDIN (FORMAT BINARY)"
SHARE_CONTENT_SQL = (
    "INSERT INTO document_contents (document_id, content) SELECT %s, content FROM document_contents WHERE document_id = %s"
)
# What the bundle must hold whole: every document's original, and each READY document's chunks
# (rule 1, counting the disabled ones).
MISSING_ORIGINALS_SQL = (
    "SELECT d.id::text, d.filename, d.content_sha256 FROM documents d WHERE d.collection_id = %s"
    " AND NOT EXISTS (SELECT 1 FROM document_contents k WHERE k.document_id = d.id) ORDER BY d.id LIMIT 5"
)
# One pass over the generation's chunks, grouped by document: counts correlated per document
# scanned the whole generation for each one, the new rows having no statistics yet
# (docs/bundles.md, "Performance").
INCOMPLETE_READY_SQL = compose(
    "WITH held AS (SELECT document_id, count(*) AS n FROM (SELECT document_id FROM chunks WHERE generation_id = %(g)s"
    " UNION ALL SELECT document_id FROM disabled_chunks WHERE generation_id = %(g)s) c GROUP BY document_id)"
    " SELECT d.id::text, d.filename, d.chunk_count, coalesce(h.n, 0) AS held"
    " FROM documents d LEFT JOIN held h ON h.document_id = d.id"
    " WHERE d.collection_id = %(c)s AND d.status = {doc_ready} AND d.chunk_count <> coalesce(h.n, 0)"
    " ORDER BY d.id LIMIT 5"
)
RESET_BUILD_SETTINGS = ("RESET max_parallel_maintenance_workers", "RESET maintenance_work_mem")
CHUNKS_WITHOUT_READY_DOCUMENT_SQL = compose(
    "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id"
    " WHERE c.generation_id = %(g)s AND d.status <> {doc_ready}"
)


@dataclass(frozen=True)
class GenerationRecord:
    id: int
    number: int
    state: str
    embedder_provider: str
    embedder_model: str
    dimensions: int
    vector_precision: str
    created_at: Any
    activated_at: Any
    ended_at: Any
    eval_set: list[dict[str, Any]] | None
    eval_min_ratio: float | None


@dataclass(frozen=True)
class ExportCounts:
    documents: int
    ready: int
    original_bytes: int
    chunks: int
    disabled_chunks: int
    edited_chunks: int


def json_binary(text: str) -> bytes:
    """A JSON text as jsonb's binary COPY form (version 1, then the text)."""
    return b"\x01" + text.encode()


class BundleExport:
    """The reads of one export, in one snapshot."""

    def __init__(
        self, conn: psycopg.AsyncConnection[Any], collection: CollectionRow, generations: list[GenerationRecord]
    ) -> None:
        self.conn = conn
        self.collection = collection
        self.generations = generations
        self.active = next(g for g in generations if g.state == GenerationState.ACTIVE)

    async def schema_head(self) -> str:
        (head,) = await one_row(self.conn, SCHEMA_HEAD_SQL)
        return str(head)

    async def counts(self) -> ExportCounts:
        docs = await one_row(self.conn, DOCUMENT_COUNTS_SQL, (self.collection.id,))
        chunks = await one_row(self.conn, CHUNK_COUNTS_SQL, {"g": self.active.id})
        return ExportCounts(int(docs[0]), int(docs[1]), int(docs[2]), int(chunks[0]), int(chunks[1]), int(chunks[2]))

    async def _copy_rows(self, statement: str, types: list[str], batch: int, **ids: int) -> AsyncIterator[list[tuple[Any, ...]]]:
        query = statement.format(**{k: int(v) for k, v in ids.items()})
        rows: list[tuple[Any, ...]] = []
        async with self.conn.cursor().copy(query) as copy:
            copy.set_types(types)
            async for row in copy.rows():
                rows.append(row)
                if len(rows) >= batch:
                    yield rows
                    rows = []
        if rows:
            yield rows

    def documents(self, batch: int) -> AsyncIterator[list[tuple[Any, ...]]]:
        return self._copy_rows(EXPORT_DOCUMENTS_SQL, EXPORT_DOCUMENT_TYPES, batch, collection=self.collection.id)

    def versions(self, batch: int) -> AsyncIterator[list[tuple[Any, ...]]]:
        return self._copy_rows(EXPORT_VERSIONS_SQL, EXPORT_VERSION_TYPES, batch, collection=self.collection.id)

    def chunks(self, batch: int, *, disabled: bool) -> AsyncIterator[list[tuple[Any, ...]]]:
        statement = EXPORT_DISABLED_CHUNKS_SQL if disabled else EXPORT_CHUNKS_SQL
        return self._copy_rows(statement, EXPORT_CHUNK_TYPES, batch, generation=self.active.id)

    async def originals(self) -> list[tuple[uuid.UUID, str, int]]:
        """(a document holding it, SHA-256, size) of each distinct original."""
        cur = await self.conn.execute(ORIGINALS_SQL, (self.collection.id,))
        return [(r[0], r[1], int(r[2])) for r in await cur.fetchall()]

    async def original_pieces(self, document_id: uuid.UUID, size: int, piece: int) -> AsyncIterator[bytes]:
        offset = 1
        while offset <= size:
            row = await one_row(self.conn, ORIGINAL_SLICE_SQL, (offset, piece, document_id))
            data = bytes(row[0] or b"")
            if not data:
                break
            yield data
            offset += len(data)


class BundleImport:
    """The writes of one import, in one transaction (the store's `importing`)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self.collection_id = 0
        self.generation_id = 0
        self.tenant_id = 0

    async def create_collection(self, new: NewCollection, *, documents: int, stored_bytes: int) -> int:
        """The collection (refused when its name is taken or a quota would be exceeded); its
        ACTIVE generation's id."""
        await check_quota(self.conn, new.tenant_id, collections=1, documents=documents, stored_bytes=stored_bytes)
        try:
            row = await (
                await self.conn.execute(
                    INSERT_COLLECTION_SQL, {**new.__dict__, "reranker": Jsonb(new.reranker) if new.reranker else None}
                )
            ).fetchone()
        except psycopg.errors.CheckViolation as exc:
            raise InvalidArgument(f"the bundle's collection settings are invalid here: {exc.diag.constraint_name}") from None
        if row is None:
            raise AlreadyExists(f"collection {new.name!r} already exists", reason=Reason.COLLECTION_EXISTS, collection=new.name)
        self.collection_id, self.tenant_id = int(row[0]), new.tenant_id
        (generation,) = await one_row(self.conn, ACTIVE_GENERATION_SQL, (self.collection_id,))
        self.generation_id = int(generation)
        return self.generation_id

    async def set_eval_set(self, eval_set: list[dict[str, Any]], min_ratio: float) -> None:
        await self.conn.execute(SET_EVAL_SET_SQL, (Jsonb(eval_set), min_ratio, self.generation_id))

    async def _copy(self, statement: str, types: list[str], batches: AsyncIterator[Sequence[tuple[Any, ...]]]) -> int:
        count = 0
        async with self.conn.cursor().copy(statement) as copy:
            copy.set_types(types)
            async for batch in batches:
                for row in batch:
                    await copy.write_row(row)
                count += len(batch)
        return count

    async def copy_documents(self, batches: AsyncIterator[Sequence[tuple[Any, ...]]], max_attempts: int) -> int:
        """Rows of IMPORT_DOCUMENTS_SQL without tenant and collection (added here); then their jobs."""
        tenant, collection = self.tenant_id, self.collection_id

        async def framed() -> AsyncIterator[list[tuple[Any, ...]]]:
            async for batch in batches:
                yield [(r[0], tenant, collection, *r[1:]) for r in batch]

        count = await self._copy(IMPORT_DOCUMENTS_SQL, IMPORT_DOCUMENT_TYPES, framed())
        await self.conn.execute(INSERT_JOBS_SQL, (max_attempts, collection))
        return count

    async def copy_versions(self, batches: AsyncIterator[Sequence[tuple[Any, ...]]]) -> int:
        tenant, collection = self.tenant_id, self.collection_id

        async def framed() -> AsyncIterator[list[tuple[Any, ...]]]:
            async for batch in batches:
                yield [(collection, tenant, *r) for r in batch]

        return await self._copy(IMPORT_VERSIONS_SQL, IMPORT_VERSION_TYPES, framed())

    async def copy_chunks(self, batches: AsyncIterator[Sequence[tuple[Any, ...]]]) -> int:
        """Rows of IMPORT_CHUNKS_SQL from chunk_index on, each after its document's id."""
        ids = (self.tenant_id, self.collection_id, self.generation_id)

        async def framed() -> AsyncIterator[list[tuple[Any, ...]]]:
            async for batch in batches:
                yield [(r[0], *ids, *r[1:]) for r in batch]

        return await self._copy(IMPORT_CHUNKS_SQL, IMPORT_CHUNK_TYPES, framed())

    async def copy_disabled_chunks(self, batches: AsyncIterator[Sequence[tuple[Any, ...]]]) -> int:
        """Like copy_chunks, one COPY per batch: each batch first takes its ids from the chunks' sequence."""
        ids = (self.tenant_id, self.collection_id, self.generation_id)
        count = 0
        async for batch in batches:
            cur = await self.conn.execute(CHUNK_IDS_SQL, (len(batch),))
            rows = [(cid, r[0], *ids, *r[1:]) for (cid,), r in zip(await cur.fetchall(), batch, strict=True)]
            async with self.conn.cursor().copy(IMPORT_DISABLED_SQL) as copy:
                copy.set_types(IMPORT_DISABLED_TYPES)
                for row in rows:
                    await copy.write_row(row)
            count += len(rows)
        return count

    async def documents_with_content(self, sha256: str) -> list[uuid.UUID]:
        cur = await self.conn.execute(DOCUMENTS_WITH_CONTENT_SQL, (self.collection_id, sha256))
        return [r[0] for r in await cur.fetchall()]

    async def copy_content(self, document_ids: list[uuid.UUID], size: int, pieces: AsyncIterator[bytes]) -> None:
        """One original, streamed into the first document's row (binary COPY written by hand, as
        the upload's commit does), then shared with the others in the database."""
        first, *others = document_ids
        async with self.conn.cursor().copy(COPY_CONTENT_SQL) as copy:
            await copy.write(
                COPY_SIGNATURE + (2).to_bytes(2, "big") + (16).to_bytes(4, "big") + first.bytes + size.to_bytes(4, "big")
            )
            async for piece in pieces:
                await copy.write(piece)
            await copy.write(COPY_TRAILER)
        for other in others:
            await self.conn.execute(SHARE_CONTENT_SQL, (other, first))

    async def problems(self) -> list[str]:
        """What would break a rule if this import committed, each said for a person."""
        found = []
        cur = await self.conn.execute(MISSING_ORIGINALS_SQL, (self.collection_id,))
        for doc_id, filename, sha in await cur.fetchall():
            found.append(f"document {doc_id} ({filename}) has no original (member originals/{sha} is missing)")
        cur = await self.conn.execute(INCOMPLETE_READY_SQL, {"g": self.generation_id, "c": self.collection_id})
        for doc_id, filename, expected, held in await cur.fetchall():
            found.append(f"READY document {doc_id} ({filename}) has {held} chunks in the bundle, not its {expected}")
        (stray,) = await one_row(self.conn, CHUNKS_WITHOUT_READY_DOCUMENT_SQL, {"g": self.generation_id})
        if stray:
            found.append(f"{stray} chunks belong to documents that are not READY")
        return found

    async def build_index(self, dimensions: int, precision: str) -> None:
        """The generation's HNSW index over every imported chunk at once, sized to the machine
        (the settings last for the build only)."""
        for setting in vector_index.build_settings_sql():
            await self.conn.execute(setting)
        await self.conn.execute(vector_index.create_index_sql(self.generation_id, dimensions, precision=precision))
        for reset in RESET_BUILD_SETTINGS:
            await self.conn.execute(reset)


class BundleStore(StoreBase):
    @asynccontextmanager
    async def exporting(self, tenant_id: int, name: str) -> AsyncIterator[BundleExport]:
        """The collection in one snapshot; FAILED_PRECONDITION while a reindex builds a generation
        (the bundle holds the ACTIVE one, and the BUILDING one would be lost)."""
        async with self.pool.connection() as conn, one_snapshot(conn):
            collection = await lookup_collection(conn, tenant_id, name)
            cur = conn.cursor(row_factory=class_row(GenerationRecord))
            await cur.execute(GENERATIONS_SQL, (collection.id,))
            generations = await cur.fetchall()
            if any(g.state == GenerationState.BUILDING for g in generations):
                raise FailedPrecondition(
                    f"collection {name!r} is being reindexed; export it when the reindex has finished or was cancelled",
                    reason=Reason.REINDEX_IN_PROGRESS,
                    collection=name,
                )
            yield BundleExport(conn, collection, generations)

    @asynccontextmanager
    async def importing(self) -> AsyncIterator[BundleImport]:
        """One transaction: committed when the block ends, rolled back on any error or cancellation."""
        async with self.pool.connection() as conn, conn.transaction():
            yield BundleImport(conn)

    async def collection(self, tenant_id: int, name: str) -> CollectionRow:
        async with self.pool.connection() as conn, one_snapshot(conn):
            return await with_generations(conn, await lookup_collection(conn, tenant_id, name))


__all__ = ["BundleExport", "BundleImport", "BundleStore", "ExportCounts", "GenerationRecord", "json_binary"]
