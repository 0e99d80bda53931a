"""The end of an attempt: the commit (rule 1 of docs/architecture.md#the-rules: chunks, READY and
SUCCEEDED in one transaction, chunks by binary COPY) or the failure (rule 7: a delayed retry
while attempts remain, else FAILED).

What differs between an INGEST and an EMBED job (which generation the chunks go to, which
document status a commit needs, what it replaces, whether the document moves) is read from the
kind table (job_kinds.py), here and in COMPLETE_LOCK_SQL alike.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import kwargs_row
from psycopg.types.json import Jsonb
from sluice_common.errors import FailedPrecondition, LeaseNotHeld

from ..domain import (
    IN_PROGRESS,
    AttemptOutcome,
    DocumentStatus,
    GenerationState,
    JobStatus,
    check_document_transition,
    retry_delay_seconds,
    retry_message,
    should_retry,
)
from ..transitions import RELEASED_LEASE, Expr, PendingMove, move_document, move_job, send_move_document, send_move_job
from .chunks import keep_disabled
from .claims import hand_back
from .common import NO_ERROR, fetch_document_lookup, lookup_document, send_document_lookup
from .job_kinds import add_embed_job
from .leases import HeldJob, QueueBase, end_attempt, hold_job, lease_failure
from .literals import compose
from .queue_sql import QUEUE_LITERALS
from .rows import ChunkRow, DocumentRow
from .versions import swap_in

# CompleteJob's first round trip: fence (and renew) the lease, lock the document and, FOR SHARE,
# the generation the job writes into (job, document, generation: the lock order used
# everywhere), and delete the chunks this commit replaces (enabled or disabled: docs/chunks.md),
# only when complete_job's checks will pass: the generation is in the state the kind writes into and the document in the status it
# commits from (an INGEST job: the ACTIVE generation, an INDEXING document, every generation's
# chunks; an EMBED job: its BUILDING generation, a READY document, that generation's chunks).
COMPLETE_LOCK_SQL = (
    sql.SQL("""
WITH {kind_policy}, job AS (
    UPDATE ingestion_jobs SET locked_at = now()
    WHERE {held_by_lease}
    RETURNING id, document_id, attempts, max_attempts, lease_token, locked_at, kind, generation_id
), locked AS (
    SELECT job.id, job.document_id, job.attempts, job.max_attempts, job.lease_token, job.locked_at,
           job.kind::text AS kind, job.generation_id, d.status::text AS document_status, d.collection_id, d.tenant_id,
           g.state::text AS generation_state,
           g.state = p.writes_generation AND d.status = p.commits_from AS committable, p.replaces_every_generation
    FROM job JOIN kind_policy p ON p.kind = job.kind
         JOIN documents d ON d.id = job.document_id JOIN collection_generations g ON g.id = job.generation_id
    FOR UPDATE OF d FOR SHARE OF g
), cleared AS (
    DELETE FROM chunks c USING locked l
    WHERE c.document_id = l.document_id AND l.committable
      AND (l.replaces_every_generation OR c.generation_id = l.generation_id)
), cleared_disabled AS (
    DELETE FROM disabled_chunks c USING locked l
    WHERE c.document_id = l.document_id AND l.committable
      AND (l.replaces_every_generation OR c.generation_id = l.generation_id)
)
SELECT id, document_id, attempts, max_attempts, lease_token, locked_at, kind, generation_id, document_status,
       collection_id, tenant_id, generation_state
FROM locked
""")
    .format(**QUEUE_LITERALS)
    .as_bytes(None)
)

# After an INGEST commit (the document READY now): a BUILDING generation needs it too.
BUILDING_GENERATION_SQL = compose(
    "SELECT id FROM collection_generations WHERE collection_id = %s AND state = {gen_building} FOR SHARE"
)

# A retried job's `available_at`: after its delay (rule 7).
RETRY_AT = "now() + make_interval(secs => %s)"

COPY_CHUNKS = (
    "COPY chunks (document_id, tenant_id, collection_id, generation_id, chunk_index, text, page_number, element_type,"
    " section_title, text_as_html, embedding, search_terms, text_source, ocr_confidence, boxes, element_types)"
    " FROM STDIN WITH (FORMAT BINARY)"
)
COPY_CHUNK_TYPES = [
    "uuid",
    "int8",
    "int8",
    "int8",
    "int4",
    "text",
    "int4",
    "text",
    "text",
    "text",
    "vector",
    "text",
    "text",
    "float4",
    "jsonb",
    "text[]",
]


async def copy_chunks(conn: psycopg.AsyncConnection[Any], job: HeldJob, chunks: list[ChunkRow]) -> None:
    """The chunks, into the job's generation, by binary COPY."""
    async with conn.cursor().copy(COPY_CHUNKS) as copy:
        copy.set_types(COPY_CHUNK_TYPES)
        for chunk in chunks:
            await copy.write_row(
                (
                    job.document_id,
                    job.tenant_id,
                    job.collection_id,
                    job.generation_id,
                    chunk.index,
                    chunk.text,
                    chunk.page_number,
                    chunk.element_type,
                    chunk.section_title,
                    chunk.text_as_html,
                    chunk.embedding,
                    chunk.search_terms,
                    chunk.text_source,
                    chunk.ocr_confidence,
                    Jsonb(chunk.boxes),
                    chunk.element_types,
                )
            )


class CommitStore(QueueBase):
    async def complete_job(self, job_id: uuid.UUID, lease_token: uuid.UUID, chunks: list[ChunkRow]) -> DocumentRow:
        """Rule 1: replace the chunks, set READY and SUCCEEDED in one transaction (binary COPY).

        An INGEST job writes into the generation it was claimed for, which must still be the
        ACTIVE one (locked FOR SHARE, so a switch waits for this commit or this commit sees the
        switch); if a reindex is BUILDING, the same transaction adds the EMBED job that brings
        the now READY document into the new generation. If the collection switched while the
        job ran, the job is handed back (run again with the new embedder) and the call fails
        with LEASE_NOT_HELD. An EMBED job writes into its BUILDING generation and leaves the
        document READY; a second transaction then tries the switch."""
        switched_under_us = False
        async with self.pool.connection() as conn, conn.transaction():
            # One round trip: fence, lock the document, lock the generation FOR SHARE and clear
            # the chunks this commit replaces (only when the checks below will pass).
            cur = conn.cursor(row_factory=kwargs_row(HeldJob.from_row))
            await cur.execute(COMPLETE_LOCK_SQL, {"job": job_id, "lease": lease_token})
            job = await cur.fetchone()
            if job is None:
                raise await lease_failure(conn, job_id)
            policy = job.policy
            if job.generation_state != policy.writes_generation:
                if not policy.follows_active_generation:
                    raise LeaseNotHeld("the generation this job builds is no longer being built", job_id=job_id)
                # The collection switched while the job ran: it runs again for the new generation.
                await hand_back(conn, job)
                switched_under_us = True
            elif job.document_status != policy.commits_from:
                raise FailedPrecondition(
                    policy.commit_refusal.format(status=job.document_status), reason=policy.commit_refusal_reason
                )
            else:
                # COMPLETE_LOCK_SQL cleared the chunks this commit replaces (every generation's for
                # an INGEST job: a BUILDING generation gets a new EMBED job below).
                await copy_chunks(conn, job, chunks)
                if policy.writes_generation is GenerationState.BUILDING:
                    # A reindex keeps the chunks users disabled out of the new generation (docs/chunks.md).
                    await keep_disabled(conn, job.document_id, job.generation_id)
                if policy.drives_document:
                    check_document_transition(policy.commits_from, DocumentStatus.READY)
                # The rest shares one round trip (pipeline mode); each move is confirmed after the sync.
                moves: list[PendingMove] = []
                building_cursor: psycopg.AsyncCursor[Any] | None = None
                async with conn.pipeline():
                    if policy.drives_document:
                        moves.append(
                            await send_move_document(
                                conn,
                                job.document_id,
                                DocumentStatus.READY,
                                {
                                    **NO_ERROR,
                                    "chunk_count": len(chunks),
                                    "progress_stage": str(DocumentStatus.INDEXING),
                                    "progress_done": len(chunks),
                                    "progress_total": len(chunks),
                                    "progress_unit": "chunks",
                                },
                                sources=[policy.commits_from],
                            )
                        )
                    moves.append(await send_move_job(conn, job_id, JobStatus.SUCCEEDED, RELEASED_LEASE))
                    await end_attempt(conn, lease_token, AttemptOutcome.SUCCEEDED)
                    if policy.drives_document:
                        # The document is READY now: a BUILDING generation needs it too.
                        building_cursor = await conn.execute(BUILDING_GENERATION_SQL, (job.collection_id,))
                    document_cursor = await send_document_lookup(conn, job.document_id)
                # The pipeline's sync has fetched every result (a failed move raises here, in the transaction).
                for move in moves:
                    await move.confirm()
                building = await building_cursor.fetchone() if building_cursor is not None else None
                document = await fetch_document_lookup(document_cursor)
                if policy.drives_document and document.source_uri is not None:
                    # A new version of a source: the version it replaces leaves in this same commit.
                    document = await swap_in(conn, document)
                if building is not None:
                    await add_embed_job(conn, job.document_id, building[0])
        if switched_under_us:
            raise LeaseNotHeld(
                "the collection switched to a new index generation while this job ran; it will run again", job_id=job_id
            )
        if policy.writes_generation is GenerationState.BUILDING:
            # This commit may have been the generation's last: its index, then the switch.
            await self.generations.switch_after_commit(job.generation_id)
        return document

    async def fail_job(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, retryable: bool, error_code: str, error_message: str
    ) -> tuple[DocumentRow, bool]:
        """Rule 7: retry a temporary failure after a delay while attempts remain; else fail for good.
        A job that does not drive its document (EMBED) records it on the job alone: the document
        stays READY in the active generation."""
        async with self.pool.connection() as conn, conn.transaction():
            job = await hold_job(conn, job_id, lease_token)
            drives_document = job.policy.drives_document
            retry = should_retry(retryable, job.attempts, job.max_attempts)
            if retry:
                delay = retry_delay_seconds(job.attempts, self.policy.retry_delay_seconds, self.policy.max_retry_delay_seconds)
                if drives_document:
                    await move_document(
                        conn,
                        job.document_id,
                        DocumentStatus.PENDING,
                        {
                            "error_code": error_code,
                            "error_message": retry_message(job.attempts, job.max_attempts, error_message),
                        },
                        sources=IN_PROGRESS | {DocumentStatus.PENDING},
                    )
                await move_job(
                    conn,
                    job_id,
                    JobStatus.PENDING,
                    {
                        "available_at": Expr(RETRY_AT, delay),
                        **RELEASED_LEASE,
                    },
                    sources=[JobStatus.RUNNING],
                )
            else:
                if retryable:
                    error_message = f"failed after {job.attempts} attempts: {error_message}"
                if drives_document:
                    await move_document(
                        conn, job.document_id, DocumentStatus.FAILED, {"error_code": error_code, "error_message": error_message}
                    )
                await move_job(conn, job_id, JobStatus.FAILED, RELEASED_LEASE)
            outcome = AttemptOutcome.RETRYABLE_FAILURE if retryable else AttemptOutcome.PERMANENT_FAILURE
            await end_attempt(conn, lease_token, outcome, error_code, error_message, retryable)
            return await lookup_document(conn, job.document_id), retry


__all__ = ["COMPLETE_LOCK_SQL", "CommitStore", "add_embed_job", "copy_chunks"]
