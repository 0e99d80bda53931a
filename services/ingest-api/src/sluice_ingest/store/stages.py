"""What a worker writes and reads while it holds a lease, before its attempt ends: stage reports
(rules 2 and 4 of docs/architecture.md#the-rules), chunk snapshots and the document's content.

Every call here is fenced (queue_sql.HELD_BY_LEASE, leases.hold_job) and renews the lease on
the way (queue_sql.LAZY_RENEWAL for the two one-statement writes).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from sluice_common.errors import NotFound
from sluice_common.reasons import Reason

from ..domain import (
    DocumentStatus,
    GenerationState,
    IllegalTransition,
    check_document_transition,
    document_sources,
)
from ..transitions import document_move_sql
from .chunks import edited_snapshot
from .common import named_row
from .leases import QueueBase, hold_job, lease_failure
from .queue_sql import QUEUE_LITERALS, RENEWAL_DIVISOR

# ReportStage in one statement (StageStore.report_stage). `job` fences: it matches only while
# this lease holds the RUNNING job, renews the lease and, for a job that does not drive its
# document (the kind table, job_kinds.py: EMBED, whose document stays READY), records the
# progress on the job itself. `doc` locks the document of a job that drives it (job row first,
# then document: the lock order used everywhere). Then exactly one of `tick` (the document is
# already in this stage: progress only) or `moved` (the stage change, along
# DOCUMENT_TRANSITIONS: `sources` is document_sources(stage)) writes the document. The attempt
# records its stage on a move (and on every report of a job that does not drive its document).
# A tick or such a job's report commits asynchronously: set_config(…, is_local) holds for this
# statement's own transaction. Zero rows: the lease is not held. `moved` false on a job that
# drives its document, in another stage: an illegal edge.
REPORT_STAGE_SQL = (
    sql.SQL("""
WITH {kind_policy}, job AS (
    UPDATE ingestion_jobs j
    SET {lazy_renewal},
        progress_stage = CASE WHEN p.drives_document THEN j.progress_stage ELSE %(stage)s::document_status END,
        progress_done = CASE WHEN p.drives_document THEN j.progress_done ELSE %(done)s END,
        progress_total = CASE WHEN p.drives_document THEN j.progress_total ELSE %(total)s END,
        updated_at = CASE WHEN p.drives_document THEN j.updated_at ELSE now() END
    FROM kind_policy p
    WHERE {held_by_lease} AND p.kind = j.kind
    RETURNING j.id, j.document_id, j.locked_at, p.drives_document
), doc AS (
    SELECT d.id, d.status FROM documents d JOIN job ON d.id = job.document_id AND job.drives_document
    FOR UPDATE OF d
), tick AS (
    UPDATE documents d SET progress_stage = %(stage)s::document_status, progress_done = %(done)s,
        progress_total = %(total)s, progress_unit = %(unit)s, updated_at = now()
    FROM doc WHERE d.id = doc.id AND doc.status = %(stage)s::document_status
    RETURNING d.id
), moved AS (
    {move}
), attempt AS (
    UPDATE job_attempts SET stage = %(stage)s::document_status
    WHERE lease_token = %(lease)s AND (EXISTS (SELECT 1 FROM moved) OR EXISTS (SELECT 1 FROM job WHERE NOT drives_document))
)
SELECT job.locked_at, job.drives_document, doc.status::text AS document_status, EXISTS (SELECT 1 FROM moved) AS moved,
       CASE WHEN NOT EXISTS (SELECT 1 FROM moved) THEN set_config('synchronous_commit', 'off', true) END AS asynchronous
FROM job LEFT JOIN doc ON true
""")
    .format(
        **QUEUE_LITERALS,
        move=document_move_sql(
            "%(stage)s::document_status",
            {
                "error_code": "NULL",
                "error_message": "NULL",
                "progress_stage": "%(stage)s::document_status",
                "progress_done": "%(done)s",
                "progress_total": "%(total)s",
                "progress_unit": "%(unit)s",
                "updated_at": "now()",
            },
            where="id = (SELECT id FROM doc WHERE status <> %(stage)s::document_status)",
            sources="%(sources)s::document_status[]",
        ),
    )
    .as_bytes(None)
)


# SaveSnapshot in one statement: fence the lease (renewed as ReportStage renews it) and store the
# chunk list under the content's hash and the pipeline version. No row: the lease is not held.
SAVE_SNAPSHOT_SQL = (
    sql.SQL("""
WITH job AS (
    UPDATE ingestion_jobs
    SET {lazy_renewal}
    WHERE {held_by_lease}
    RETURNING document_id
)
INSERT INTO chunk_snapshots (tenant_id, content_sha256, pipeline_version, chunk_count, chunks)
SELECT d.tenant_id, d.content_sha256, %(version)s, %(count)s, %(chunks)s FROM job JOIN documents d ON d.id = job.document_id
ON CONFLICT (tenant_id, content_sha256, pipeline_version)
DO UPDATE SET chunks = EXCLUDED.chunks, chunk_count = EXCLUDED.chunk_count, created_at = now()
RETURNING 1
""")
    .format(**QUEUE_LITERALS)
    .as_bytes(None)
)


SNAPSHOT_SQL = (
    "SELECT s.chunks FROM chunk_snapshots s"
    " JOIN documents d ON d.tenant_id = s.tenant_id AND d.content_sha256 = s.content_sha256"
    " WHERE d.id = %s AND s.pipeline_version = %s"
)
CONTENT_LENGTH_SQL = "SELECT length(content) FROM document_contents WHERE document_id = %s"
CONTENT_SLICE_SQL = "SELECT substring(content FROM %s FOR %s) FROM document_contents WHERE document_id = %s"
# The dimensions of the generation a job embeds for (its claim set it).
JOB_DIMENSIONS_SQL = (
    "SELECT g.dimensions FROM ingestion_jobs j JOIN collection_generations g ON g.id = j.generation_id WHERE j.id = %s"
)


@dataclass(frozen=True, slots=True)
class _StageReport:
    """REPORT_STAGE_SQL's row: `document_status` None for a job that does not drive its document."""

    locked_at: dt.datetime
    drives_document: bool
    document_status: str | None
    moved: bool
    asynchronous: str | None  # set_config's answer when the statement commits asynchronously


class StageStore(QueueBase):
    async def report_stage(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, stage: DocumentStatus, done: int, total: int, unit: str
    ) -> dt.datetime:
        """Rule 2 (status before action) and rule 4 (a new stage clears a stale error).

        One statement, one round trip, its own transaction (the pool's connections are in
        autocommit): REPORT_STAGE_SQL fences and renews the lease, locks the document, moves it
        along DOCUMENT_TRANSITIONS or records a tick, and marks the attempt's stage. A stage
        change commits durably before this returns (rule 2); a tick, and an EMBED job's
        progress, commit without waiting for the WAL flush. Only a failure costs a second look:
        which of LEASE_NOT_HELD / JOB_NOT_FOUND, or the illegal edge."""
        async with self.pool.connection() as conn:
            row = await named_row(
                conn,
                _StageReport,
                REPORT_STAGE_SQL,
                {
                    "job": job_id,
                    "lease": lease_token,
                    "stage": str(stage),
                    "done": done,
                    "total": total,
                    "unit": unit,
                    "sources": document_sources(stage),
                    "renew_after": self.policy.lease_seconds / RENEWAL_DIVISOR,
                },
            )
            if row is None:
                raise await lease_failure(conn, job_id)
            current = row.document_status
            if row.drives_document and current != stage and not row.moved:
                # Nothing was written but the lease renewal: the edge is not in the table.
                assert current is not None  # `doc` locked the document the job drives
                check_document_transition(DocumentStatus(current), stage)
                raise IllegalTransition(  # pragma: no cover - check_document_transition raised
                    f"a document cannot go from {current} to {stage}", current=current, target=stage
                )
            return row.locked_at + dt.timedelta(seconds=self.policy.lease_seconds)

    async def save_snapshot(
        self, job_id: uuid.UUID, lease_token: uuid.UUID, pipeline_version: str, chunks: list[dict[str, Any]]
    ) -> None:
        """One statement in its own transaction: fence the lease and store the content's chunk list."""
        async with self.pool.connection() as conn:
            row = await (
                await conn.execute(
                    SAVE_SNAPSHOT_SQL,
                    {
                        "job": job_id,
                        "lease": lease_token,
                        "renew_after": self.policy.lease_seconds / RENEWAL_DIVISOR,
                        "version": pipeline_version,
                        "count": len(chunks),
                        "chunks": json.dumps(chunks),
                    },
                )
            ).fetchone()
            if row is None:
                raise await lease_failure(conn, job_id)

    async def read_snapshot(self, job_id: uuid.UUID, lease_token: uuid.UUID, pipeline_version: str) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn, conn.transaction():
            job = await hold_job(conn, job_id, lease_token)
            row = await (await conn.execute(SNAPSHOT_SQL, (job.document_id, pipeline_version))).fetchone()
            if row is None:
                raise NotFound("no snapshot for this content and pipeline version", reason=Reason.SNAPSHOT_NOT_FOUND)
            chunks: list[dict[str, Any]] = row[0]
            if job.policy.writes_generation is GenerationState.BUILDING:
                # A reindex embeds the chunks as users edited them (docs/chunks.md, "Later").
                await edited_snapshot(conn, job.document_id, chunks)
            return chunks

    async def content_length(self, job_id: uuid.UUID, lease_token: uuid.UUID) -> tuple[uuid.UUID, int]:
        async with self.pool.connection() as conn, conn.transaction():
            job = await hold_job(conn, job_id, lease_token)
            row = await (await conn.execute(CONTENT_LENGTH_SQL, (job.document_id,))).fetchone()
            if row is None:
                raise NotFound("the document's content is missing", reason=Reason.CONTENT_NOT_FOUND)
            return job.document_id, int(row[0])

    async def content_slice(self, document_id: uuid.UUID, offset: int, size: int) -> bytes:
        async with self.pool.connection() as conn:
            row = await (await conn.execute(CONTENT_SLICE_SQL, (offset + 1, size, document_id))).fetchone()
            if row is None:
                raise NotFound("the document was deleted while its content was being read", reason=Reason.JOB_NOT_FOUND)
            return bytes(row[0])

    async def collection_dimensions(self, job_id: uuid.UUID) -> int:
        """The dimensions of the generation the job embeds for (its claim set it)."""
        async with self.pool.connection() as conn:
            row = await (await conn.execute(JOB_DIMENSIONS_SQL, (job_id,))).fetchone()
            if row is None:
                raise NotFound(f"job {job_id} does not exist (its document may have been deleted)", reason=Reason.JOB_NOT_FOUND)
            return int(row[0])


__all__ = ["REPORT_STAGE_SQL", "SAVE_SNAPSHOT_SQL", "StageStore"]
