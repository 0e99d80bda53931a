"""What an INGEST job does that an EMBED job does not, in one table (docs/architecture.md#index-generations).

The queue's Python reads `KIND_POLICIES` (`policy_of(kind)`), and its SQL reads the same table
as the `kind_policy` CTE (`KIND_POLICY_CTE`, rendered from it once): no statement and no branch
names a kind. pgqueuer keeps its query text apart from the code that runs it in the same way.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from sluice_common.reasons import Reason

from ..domain import DocumentStatus, GenerationState, JobKind
from .literals import compose


@dataclass(frozen=True, slots=True)
class KindPolicy:
    kind: JobKind
    # INGEST drives its document along DOCUMENT_TRANSITIONS (stages, READY, retries, FAILED,
    # rule 8's convergence). EMBED never moves its document, which stays READY and searchable in
    # the ACTIVE generation: its progress, retries and failures are recorded on the job alone.
    drives_document: bool
    # The generation its commit writes into: INGEST the ACTIVE one, looked up again at every
    # claim (a retry after a switch embeds with the new embedder); EMBED the BUILDING one it was
    # created for, kept from claim to commit.
    writes_generation: GenerationState
    # The document's status a commit requires, and the refusal otherwise (FAILED_PRECONDITION,
    # `{status}` the document's): INGEST must have reported INDEXING (rule 2); EMBED re-embeds a
    # document that must still be READY.
    commits_from: DocumentStatus
    commit_refusal: str
    commit_refusal_reason: Reason
    # Which of the document's chunks its commit replaces: every generation's (INGEST: the
    # content may have changed, and a BUILDING generation gets a new EMBED job) or only those of
    # its own generation (EMBED).
    replaces_every_generation: bool

    @property
    def follows_active_generation(self) -> bool:
        """Whether a claim points the job at the generation ACTIVE at that moment."""
        return self.writes_generation is GenerationState.ACTIVE


KIND_POLICIES: dict[JobKind, KindPolicy] = {
    JobKind.INGEST: KindPolicy(
        kind=JobKind.INGEST,
        drives_document=True,
        writes_generation=GenerationState.ACTIVE,
        commits_from=DocumentStatus.INDEXING,
        commit_refusal="the document is {status}; report INDEXING before completing",
        commit_refusal_reason=Reason.STAGE_NOT_INDEXING,
        replaces_every_generation=True,
    ),
    JobKind.EMBED: KindPolicy(
        kind=JobKind.EMBED,
        drives_document=False,
        writes_generation=GenerationState.BUILDING,
        commits_from=DocumentStatus.READY,
        commit_refusal="the document is {status}, not READY",
        commit_refusal_reason=Reason.DOCUMENT_NOT_READY,
        replaces_every_generation=False,
    ),
}


def policy_of(kind: JobKind | str) -> KindPolicy:
    """The policy of a job kind (a JobKind or its text, as the statements return it)."""
    return KIND_POLICIES[JobKind(kind)]


def _kind_policy_cte() -> sql.Composed:
    rows = [
        sql.SQL("({}::job_kind, {}, {}::generation_state, {}, {}::document_status, {})").format(
            sql.Literal(str(p.kind)),
            sql.Literal(p.drives_document),
            sql.Literal(str(p.writes_generation)),
            sql.Literal(p.follows_active_generation),
            sql.Literal(str(p.commits_from)),
            sql.Literal(p.replaces_every_generation),
        )
        for p in KIND_POLICIES.values()
    ]
    return sql.SQL(
        "kind_policy (kind, drives_document, writes_generation, follows_active_generation, commits_from,"
        " replaces_every_generation) AS (VALUES {})"
    ).format(sql.SQL(", ").join(rows))


# `WITH {kind_policy}, …` in a statement: the table above as rows, one per kind. A statement
# joins it on the job's kind (`JOIN kind_policy p ON p.kind = j.kind`) and reads its columns.
KIND_POLICY_CTE = _kind_policy_cte()

# A fresh EMBED job of a READY document for a BUILDING generation, replacing an older one (the
# kind a literal: the partial unique index ingestion_jobs_embed matches only a literal).
DROP_EMBED_JOB_SQL = compose("DELETE FROM ingestion_jobs WHERE kind = {kind_embed} AND document_id = %s AND generation_id = %s")
ADD_EMBED_JOB_SQL = compose(
    "INSERT INTO ingestion_jobs (document_id, kind, generation_id, max_attempts)"
    " SELECT d.id, {kind_embed}, %s, c.max_attempts FROM documents d JOIN collections c ON c.id = d.collection_id"
    " WHERE d.id = %s"
)


async def add_embed_job(conn: psycopg.AsyncConnection[Any], document_id: uuid.UUID, generation_id: int) -> None:
    """A fresh EMBED job of a READY document for a BUILDING generation (replacing an older one)."""
    await conn.execute(DROP_EMBED_JOB_SQL, (document_id, generation_id))
    await conn.execute(ADD_EMBED_JOB_SQL, (generation_id, document_id))


__all__ = ["KIND_POLICIES", "KIND_POLICY_CTE", "KindPolicy", "add_embed_job", "policy_of"]
