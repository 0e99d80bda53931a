"""A document's chunks as users see and change them (docs/chunks.md): ListChunks' pages,
UpdateChunk's disable, enable and edit, and DownloadDocument's reads of the original bytes.

A disabled chunk is a row of `disabled_chunks`, not of `chunks` (migration 0029): moving it out
is what takes it out of every search mode, the HNSW graphs, the BM25 statistics and
`keyword_chunks`, by their own triggers. Every statement of a client's call names the caller's
tenant; what a reindex's EMBED job does with them (edited_snapshot, keep_disabled) runs in a
worker's calls, under its lease."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import psycopg
from psycopg import sql
from psycopg.rows import args_row
from sluice_common.db import one_snapshot
from sluice_common.errors import Aborted, FailedPrecondition, NotFound
from sluice_common.reasons import Reason

from ..domain import DocumentStatus, JobStatus
from .common import StoreBase, lookup_document, named_row, named_rows, one_row
from .job_kinds import add_embed_job
from .literals import compose
from .rows import DocumentRow, as_members

# What a page shows of a chunk, from either table (`enabled` says which), in DocumentChunkRow's order.
# The generation's number comes in as a parameter (%(number)s): the row is built once, as is. Most
# chunks have no boxes (only PDFs and images do): NULL then, rather than '[]' parsed 1,000 times a page.
CHUNK_COLUMNS = """
    c.id, c.document_id, c.chunk_index, c.text, c.page_number, c.element_type, c.element_types, c.section_title,
    c.text_as_html, CASE WHEN c.boxes = '[]'::jsonb THEN NULL ELSE c.boxes END AS boxes, c.search_length,
    c.text_source, c.ocr_confidence, c.original_text, c.revision, c.updated_at, %(number)s::integer AS generation
"""

# Both tables have a unique index on (document_id, generation_id, chunk_index): the page is a
# merge of two index scans, whatever the document's size.
LIST_SQL = f"""
    SELECT * FROM (
        SELECT {CHUNK_COLUMNS}, true AS enabled FROM chunks c
         WHERE c.document_id = %(document)s AND c.generation_id = %(generation)s AND c.tenant_id = %(tenant)s
           AND c.chunk_index > %(after)s
        UNION ALL
        SELECT {CHUNK_COLUMNS}, false AS enabled FROM disabled_chunks c
         WHERE c.document_id = %(document)s AND c.generation_id = %(generation)s AND c.tenant_id = %(tenant)s
           AND c.chunk_index > %(after)s
    ) c ORDER BY c.chunk_index LIMIT %(limit)s
"""

COUNT_SQL = """
    SELECT (SELECT count(*) FROM chunks c
             WHERE c.document_id = %(document)s AND c.generation_id = %(generation)s AND c.tenant_id = %(tenant)s)
         + (SELECT count(*) FROM disabled_chunks c
             WHERE c.document_id = %(document)s AND c.generation_id = %(generation)s AND c.tenant_id = %(tenant)s)
"""

# The columns a row keeps when it moves between the tables (the generated and trigger-computed
# ones are computed again on the way into `chunks`).
MOVED_COLUMNS = (
    "id, document_id, tenant_id, collection_id, generation_id, chunk_index, text, page_number, element_type,"
    " section_title, text_as_html, embedding, search_terms, text_source, ocr_confidence, boxes, original_text,"
    " element_types"
)

DISABLE_SQL = f"""
    WITH moved AS (
        DELETE FROM chunks WHERE id = %(id)s AND revision = %(revision)s AND tenant_id = %(tenant)s
        RETURNING {MOVED_COLUMNS}, search_length, revision
    )
    INSERT INTO disabled_chunks ({MOVED_COLUMNS}, search_length, revision, updated_at)
    SELECT {MOVED_COLUMNS}, search_length, revision + 1, now() FROM moved
    RETURNING id
"""

ENABLE_SQL = f"""
    WITH moved AS (
        DELETE FROM disabled_chunks WHERE id = %(id)s AND revision = %(revision)s AND tenant_id = %(tenant)s
        RETURNING {MOVED_COLUMNS}, revision
    )
    INSERT INTO chunks ({MOVED_COLUMNS}, revision, updated_at) OVERRIDING SYSTEM VALUE
    SELECT {MOVED_COLUMNS}, revision + 1, now() FROM moved
    RETURNING id
"""

# An edit keeps the parser's text in original_text (the first edit saves it; editing back to it
# clears it: the chunk is the parser's again).
EDIT_SET = """
    text = %(text)s, embedding = %(embedding)s, search_terms = %(terms)s, revision = revision + 1, updated_at = now(),
    original_text = CASE WHEN coalesce(original_text, text) = %(text)s THEN NULL ELSE coalesce(original_text, text) END
"""
EDIT_SQL = {
    True: f"UPDATE chunks SET {EDIT_SET} WHERE id = %(id)s AND revision = %(revision)s AND tenant_id = %(tenant)s RETURNING id",
    False: f"UPDATE disabled_chunks SET {EDIT_SET}, search_length = sluice_term_count(%(terms)s)"
    " WHERE id = %(id)s AND revision = %(revision)s AND tenant_id = %(tenant)s RETURNING id",
}

# How many copies of a chunk the live generations hold now.
COPIES_SQL = compose("""
    SELECT count(*) FROM (SELECT generation_id FROM chunks
                           WHERE document_id = %(document)s AND chunk_index = %(index)s AND tenant_id = %(tenant)s
                          UNION ALL
                          SELECT generation_id FROM disabled_chunks
                           WHERE document_id = %(document)s AND chunk_index = %(index)s AND tenant_id = %(tenant)s) c
      JOIN collection_generations g ON g.id = c.generation_id
     WHERE g.state IN ({gen_active}, {gen_building})
""")

# A disabled chunk's DELETE took its document's vector in that generation with it (migration
# 0026 drops the pair's vector on a delete and computes it on an insert): computed again from the
# chunks that remain, as 0026's insert trigger does.
DOCUMENT_VECTOR_SQL = """
    INSERT INTO document_vectors (generation_id, document_id, tenant_id, embedding)
    SELECT c.generation_id, c.document_id, min(c.tenant_id), l2_normalize(avg(c.embedding))
      FROM chunks c WHERE c.document_id = %s AND c.generation_id = %s
     GROUP BY c.generation_id, c.document_id
    ON CONFLICT (generation_id, document_id) DO UPDATE SET embedding = EXCLUDED.embedding
"""


# An EMBED job's commit (a reindex) writes the document's chunks into the BUILDING generation: a
# chunk disabled in the ACTIVE generation is moved out of the new one too, by chunk_index, when
# the new chunk's text is the disabled one's (edited or the parser's; docs/chunks.md, "Later").
KEEP_DISABLED_SQL = compose(
    """
    WITH moved AS (
        DELETE FROM chunks n
         USING disabled_chunks a, collection_generations g
         WHERE n.document_id = %(document)s AND n.generation_id = %(generation)s
           AND a.document_id = n.document_id AND a.chunk_index = n.chunk_index
           AND g.id = a.generation_id AND g.state = {gen_active}
           AND n.text IN (a.text, coalesce(a.original_text, a.text))
        RETURNING {moved_of_n}, n.search_length, n.revision
    )
    INSERT INTO disabled_chunks ({moved}, search_length, revision, updated_at)
    SELECT {moved}, search_length, revision, now() FROM moved
    RETURNING id
""",
    moved=sql.SQL(MOVED_COLUMNS),
    moved_of_n=sql.SQL(", ".join("n." + c for c in MOVED_COLUMNS.split(", "))),
)


# The chunks of a document edited in its ACTIVE generation (either table): what a reindex's EMBED
# job embeds instead of the parser's text, and what its commit marks edited (docs/chunks.md, "Later").
_ACTIVE_EDITS = """
    SELECT c.chunk_index, c.text, c.original_text FROM (
        SELECT chunk_index, text, original_text, generation_id FROM chunks
         WHERE document_id = %(document)s AND original_text IS NOT NULL
        UNION ALL
        SELECT chunk_index, text, original_text, generation_id FROM disabled_chunks
         WHERE document_id = %(document)s AND original_text IS NOT NULL
    ) c JOIN collection_generations g ON g.id = c.generation_id AND g.state = {gen_active}
"""
ACTIVE_EDITS_SQL = compose(_ACTIVE_EDITS)

# In an EMBED job's commit: the new generation's chunks that carry an ACTIVE chunk's edited text
# (the snapshot it embedded was edited: edited_snapshot) keep the parser's text beside it.
CARRY_EDITS_SQL = compose(
    """
    UPDATE chunks n SET original_text = a.original_text
      FROM ("""
    + _ACTIVE_EDITS
    + """) a
     WHERE n.document_id = %(document)s AND n.generation_id = %(generation)s
       AND n.chunk_index = a.chunk_index AND n.text = a.text AND n.original_text IS NULL
    RETURNING n.id
"""
)

# ListChunks: the generation asked for (0: the ACTIVE one) of the document's collection.
GENERATION_SQL = compose(
    "SELECT id, number FROM collection_generations WHERE collection_id = %s AND tenant_id = %s"
    " AND CASE WHEN %s = 0 THEN state = {gen_active} ELSE number = %s END"
)

# UpdateChunk's reads (chunk_target): the chunk named, its document's status, its copies in the
# ACTIVE and BUILDING generations (the named one first).
NAMED_CHUNK_SQL = (
    "SELECT document_id, chunk_index FROM chunks WHERE id = %s AND tenant_id = %s"
    " UNION ALL SELECT document_id, chunk_index FROM disabled_chunks WHERE id = %s AND tenant_id = %s"
)
# The name of a chunk's collection, for a scoped key's check before UpdateChunk.
CHUNK_COLLECTION_SQL = (
    "SELECT c.name FROM (" + NAMED_CHUNK_SQL + ") n JOIN documents d ON d.id = n.document_id"
    " JOIN collections c ON c.id = d.collection_id LIMIT 1"
)
DOCUMENT_STATUS_SQL = "SELECT status::text FROM documents WHERE id = %s AND tenant_id = %s"
CHUNK_COPIES_SQL = compose("""
    SELECT c.id, c.generation_id, g.number AS generation, g.embedder_provider, g.embedder_model, g.dimensions,
           c.revision, c.enabled
      FROM (SELECT id, generation_id, revision, true AS enabled FROM chunks
             WHERE document_id = %(document)s AND chunk_index = %(index)s AND tenant_id = %(tenant)s
            UNION ALL
            SELECT id, generation_id, revision, false FROM disabled_chunks
             WHERE document_id = %(document)s AND chunk_index = %(index)s AND tenant_id = %(tenant)s) c
      JOIN collection_generations g ON g.id = c.generation_id
     WHERE g.state IN ({gen_active}, {gen_building})
     ORDER BY c.id = %(id)s DESC, g.number
""")

# UpdateChunk's write (apply_update): the document's EMBED job of a BUILDING generation, locked
# first (the lock order: job, then document), then the document FOR SHARE.
LOCK_BUILDING_JOB_SQL = compose(
    "SELECT j.generation_id, j.status::text AS status FROM ingestion_jobs j"
    " JOIN collection_generations g ON g.id = j.generation_id AND g.state = {gen_building}"
    " WHERE j.document_id = %s AND j.kind = {kind_embed} AND g.tenant_id = %s FOR UPDATE OF j"
)
SHARE_DOCUMENT_STATUS_SQL = "SELECT status::text FROM documents WHERE id = %s AND tenant_id = %s FOR SHARE"
READ_CHUNK_SQL = (
    f"SELECT {CHUNK_COLUMNS}, true AS enabled FROM chunks c WHERE c.id = %(id)s AND c.tenant_id = %(tenant)s"
    f" UNION ALL SELECT {CHUNK_COLUMNS}, false FROM disabled_chunks c WHERE c.id = %(id)s AND c.tenant_id = %(tenant)s"
)

# DownloadDocument's reads of the original bytes, only if the document is the tenant's.
CONTENT_STORED_SQL = (
    "SELECT EXISTS (SELECT 1 FROM document_contents k JOIN documents d ON d.id = k.document_id"
    " WHERE k.document_id = %s AND d.tenant_id = %s)"
)
CONTENT_SLICE_SQL = (
    "SELECT substring(k.content FROM %s FOR %s) FROM document_contents k JOIN documents d ON d.id = k.document_id"
    " WHERE k.document_id = %s AND d.tenant_id = %s"
)


@dataclass(frozen=True, slots=True)
class _Edit:
    chunk_index: int
    text: str
    original_text: str


@dataclass(frozen=True, slots=True)
class _Generation:
    id: int
    number: int


@dataclass(frozen=True, slots=True)
class _NamedChunk:
    document_id: uuid.UUID
    chunk_index: int


@dataclass(frozen=True, slots=True)
class _BuildingJob:
    generation_id: int
    status: JobStatus

    def __post_init__(self) -> None:
        as_members(self, status=JobStatus)


async def edited_snapshot(conn: psycopg.AsyncConnection[Any], document_id: uuid.UUID, chunks: list[dict[str, Any]]) -> int:
    """A reindex's EMBED job reads the document's snapshot (the parser's chunks): each chunk edited
    in the ACTIVE generation is given its edited text there (by chunk_index, when the snapshot's
    text is the one the edit replaced), so the worker embeds what users see with the new embedder.
    Changes `chunks` in place; returns how many."""
    edits: dict[object, tuple[str, str]] = {
        edit.chunk_index: (edit.text, edit.original_text)
        for edit in await named_rows(conn, _Edit, ACTIVE_EDITS_SQL, {"document": document_id})
    }
    changed = 0
    for chunk in chunks:
        edit = edits.get(chunk.get("index"))
        if edit is not None and chunk.get("text") == edit[1]:
            chunk["text"] = edit[0]
            changed += 1
    return changed


async def keep_disabled(conn: psycopg.AsyncConnection[Any], document_id: uuid.UUID, generation_id: int) -> int:
    """In an EMBED job's commit: the document's chunks edited in the ACTIVE generation are marked
    edited in the new one (their edited text came through the snapshot), and the chunks disabled
    there leave the new one too (its document vector computed again without them). Returns how
    many chunks were disabled."""
    await conn.execute(CARRY_EDITS_SQL, {"document": document_id, "generation": generation_id})
    moved = await (await conn.execute(KEEP_DISABLED_SQL, {"document": document_id, "generation": generation_id})).fetchall()
    if moved:
        await conn.execute(DOCUMENT_VECTOR_SQL, (document_id, generation_id))
    return len(moved)


class DocumentChunkRow(NamedTuple):
    """A chunk as ListChunks and UpdateChunk show it (`generation`: its generation's number).

    A NamedTuple built from the select's values by position (CHUNK_COLUMNS, then `enabled`, in
    this order): a page makes 1,000 of them, and a frozen dataclass built from keywords cost
    several milliseconds of it."""

    id: int
    document_id: uuid.UUID
    chunk_index: int
    text: str
    page_number: int
    element_type: str
    element_types: list[str]
    section_title: str
    text_as_html: str
    boxes: list[dict[str, Any]] | None  # None: no boxes
    search_length: int
    text_source: str
    ocr_confidence: float | None
    original_text: str | None
    revision: int
    updated_at: dt.datetime
    generation: int
    enabled: bool

    @property
    def etag(self) -> str:
        return f"{self.id}-{self.revision}"


@dataclass(frozen=True)
class ChunkCopy:
    """One generation's row of a chunk that UpdateChunk changes, as it was read."""

    id: int
    generation_id: int
    generation: int
    embedder_provider: str
    embedder_model: str
    dimensions: int
    revision: int
    enabled: bool

    @property
    def etag(self) -> str:
        return f"{self.id}-{self.revision}"


@dataclass(frozen=True)
class ChunkTarget:
    """The chunk UpdateChunk names: its document and its copies in the ACTIVE and BUILDING
    generations (the named one first)."""

    document_id: uuid.UUID
    document_status: DocumentStatus
    chunk_index: int
    copies: tuple[ChunkCopy, ...]

    @property
    def named(self) -> ChunkCopy:
        return self.copies[0]


def chunk_not_found(chunk_id: int) -> NotFound:
    """The one answer for a chunk that does not exist, is another tenant's or is being dropped."""
    return NotFound(f"chunk {chunk_id} does not exist", reason=Reason.CHUNK_NOT_FOUND)


class ChunkStore(StoreBase):
    async def list_chunks(
        self, tenant_id: int, document_id: uuid.UUID, generation: int, after_index: int, limit: int
    ) -> tuple[list[DocumentChunkRow], int, int]:
        """A page of the document's chunks in one generation (0: the ACTIVE one), after
        `after_index`; (rows, the generation's chunk count for the document, its number). The
        document, the generation and the page are read in one snapshot."""
        async with self.pool.connection() as conn, one_snapshot(conn):
            document = await lookup_document(conn, document_id, tenant_id)
            found = await named_row(
                conn, _Generation, GENERATION_SQL, (document.collection_id, tenant_id, generation, generation)
            )
            if found is None:
                raise NotFound(
                    f"collection {document.collection!r} has no index generation {generation}",
                    reason=Reason.GENERATION_NOT_FOUND,
                )
            number = found.number
            params = {"document": document_id, "generation": found.id, "tenant": tenant_id, "after": after_index}
            cur = conn.cursor(row_factory=args_row(DocumentChunkRow))
            # Binary results: a page of 1,000 chunks parses faster (numbers and times as they are stored).
            await cur.execute(LIST_SQL, {**params, "limit": limit, "number": number}, binary=True)
            rows = await cur.fetchall()
            (total,) = await one_row(conn, COUNT_SQL, params)
            return rows, int(total), int(number)

    async def chunk_collection(self, tenant_id: int, chunk_id: int) -> str | None:
        """The name of the chunk's collection; None when the tenant has no such chunk."""
        async with self.pool.connection() as conn:
            row = await (await conn.execute(CHUNK_COLLECTION_SQL, (chunk_id, tenant_id, chunk_id, tenant_id))).fetchone()
            return None if row is None else str(row[0])

    async def chunk_target(self, tenant_id: int, chunk_id: int) -> ChunkTarget:
        """The chunk's copies in the ACTIVE and BUILDING generations (read once, before embedding:
        apply_update refuses if any of them changed since)."""
        async with self.pool.connection() as conn, one_snapshot(conn):
            named = await named_row(conn, _NamedChunk, NAMED_CHUNK_SQL, (chunk_id, tenant_id, chunk_id, tenant_id))
            if named is None:
                raise chunk_not_found(chunk_id)
            document_id, chunk_index = named.document_id, named.chunk_index
            status = await (await conn.execute(DOCUMENT_STATUS_SQL, (document_id, tenant_id))).fetchone()
            if status is None:  # pragma: no cover - the chunk's foreign key holds its document
                raise chunk_not_found(chunk_id)
            copies = tuple(
                await named_rows(
                    conn,
                    ChunkCopy,
                    CHUNK_COPIES_SQL,
                    {"document": document_id, "index": chunk_index, "tenant": tenant_id, "id": chunk_id},
                )
            )
            if not copies or copies[0].id != chunk_id:
                raise chunk_not_found(chunk_id)  # a retired or cancelled generation's, being dropped
            return ChunkTarget(document_id, DocumentStatus(status[0]), chunk_index, copies)

    async def apply_update(
        self,
        tenant_id: int,
        target: ChunkTarget,
        enabled: bool | None,
        text: str | None,
        terms: str,
        vectors: dict[int, np.ndarray],
    ) -> DocumentChunkRow:
        """One transaction: every copy of the chunk gets the new text (with its generation's
        vector, `vectors` by generation id) and moves to the table `enabled` names, only if the
        document is still READY and no copy changed since chunk_target read it (else ABORTED
        CHUNK_CHANGED: nothing is written)."""
        async with self.pool.connection() as conn, conn.transaction():
            # An edit during a reindex whose EMBED job of this document is running, not yet written:
            # that job read the chunks before this edit, so it is replaced by a fresh one (its
            # worker's commit then fails, as for any job replaced) that will read the edited text.
            # Its row is locked first: the lock order is job, then document.
            building_job = None
            if text is not None:
                building_job = await named_row(conn, _BuildingJob, LOCK_BUILDING_JOB_SQL, (target.document_id, tenant_id))
            # FOR SHARE: a reprocess, a deletion or a commit replacing these chunks (each updates or
            # deletes the document row) waits for this transaction, or has already committed and
            # the status below says so. Rule 1: no chunk is written under a document that is not READY.
            status = await (await conn.execute(SHARE_DOCUMENT_STATUS_SQL, (target.document_id, tenant_id))).fetchone()
            if status is None:
                raise chunk_not_found(target.named.id)
            if status[0] != DocumentStatus.READY:
                raise FailedPrecondition(
                    f"the chunk's document is {status[0]}, not READY: its chunks are being replaced",
                    reason=Reason.DOCUMENT_NOT_READY,
                    status=status[0],
                )
            # A generation that received the chunk since it was read (an EMBED job's commit) would
            # miss this change: refused, to be read again.
            (copies,) = await one_row(
                conn, COPIES_SQL, {"document": target.document_id, "index": target.chunk_index, "tenant": tenant_id}
            )
            if copies != len(target.copies):
                raise Aborted(
                    "the chunk changed since it was read (a reindex embedded it meanwhile); read it again",
                    reason=Reason.CHUNK_CHANGED,
                )
            for copy in target.copies:
                revision = copy.revision
                if text is not None:
                    await _expect_one(
                        conn,
                        EDIT_SQL[copy.enabled],
                        {
                            "id": copy.id,
                            "revision": revision,
                            "tenant": tenant_id,
                            "text": text,
                            "terms": terms,
                            "embedding": vectors[copy.generation_id],
                        },
                    )
                    revision += 1
                if enabled is not None and enabled != copy.enabled:
                    params = {"id": copy.id, "revision": revision, "tenant": tenant_id}
                    await _expect_one(conn, ENABLE_SQL if enabled else DISABLE_SQL, params)
                    if not enabled:
                        await conn.execute(DOCUMENT_VECTOR_SQL, (target.document_id, copy.generation_id))
            if (
                building_job is not None
                and building_job.status is JobStatus.RUNNING
                and all(copy.generation_id != building_job.generation_id for copy in target.copies)
            ):
                await add_embed_job(conn, target.document_id, building_job.generation_id)
            return await self._read_chunk(conn, tenant_id, target.named)

    async def _read_chunk(self, conn: psycopg.AsyncConnection, tenant_id: int, copy: ChunkCopy) -> DocumentChunkRow:
        cur = conn.cursor(row_factory=args_row(DocumentChunkRow))
        await cur.execute(READ_CHUNK_SQL, {"id": copy.id, "tenant": tenant_id, "number": copy.generation})
        row = await cur.fetchone()
        if row is None:  # pragma: no cover - written in this transaction
            raise chunk_not_found(copy.id)
        return row

    async def document_for_download(self, tenant_id: int, document_id: uuid.UUID) -> DocumentRow:
        """The document whose bytes DownloadDocument sends (NOT_FOUND for another tenant's)."""
        async with self.pool.connection() as conn:
            document = await lookup_document(conn, document_id, tenant_id)
            (stored,) = await one_row(conn, CONTENT_STORED_SQL, (document_id, tenant_id))
            if not stored:  # pragma: no cover - the content is written with its document
                raise NotFound("the document's content is missing", reason=Reason.CONTENT_NOT_FOUND)
            return document

    async def content_slice(self, tenant_id: int, document_id: uuid.UUID, offset: int, size: int) -> bytes:
        """`size` bytes of the document's content from `offset` (the read JobService's
        ReadDocumentContent streams with), only if the document is the tenant's."""
        async with self.pool.connection() as conn:
            row = await (await conn.execute(CONTENT_SLICE_SQL, (offset + 1, size, document_id, tenant_id))).fetchone()
            if row is None:
                raise NotFound(f"document {document_id} does not exist", reason=Reason.DOCUMENT_NOT_FOUND)
            return bytes(row[0])


async def _expect_one(conn: psycopg.AsyncConnection, query: str, params: dict[str, Any]) -> None:
    """A conditional write of one copy; none written means the copy changed since it was read."""
    if await (await conn.execute(query, params)).fetchone() is None:
        raise Aborted(
            "the chunk changed since it was read (another update, or a reindex replaced it); read it again",
            reason=Reason.CHUNK_CHANGED,
        )


__all__ = ["ChunkCopy", "ChunkStore", "ChunkTarget", "DocumentChunkRow", "chunk_not_found", "edited_snapshot", "keep_disabled"]
