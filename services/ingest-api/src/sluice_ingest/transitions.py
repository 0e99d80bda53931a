"""Every status write of a document or a job, built from the domain's transition tables.

`move_document` and `move_job` are the only places that write a status (a test inspects the
store for any other): each builds `UPDATE … SET status = <target>, … WHERE id = … AND status =
ANY(<sources>)` where the sources come from DOCUMENT_TRANSITIONS / JOB_TRANSITIONS (optionally
narrowed by the caller, never widened), and raises IllegalTransition when no row matched: a
move that lost a race or was never allowed fails loudly instead of passing silently
(procrastinate's style).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import psycopg
from psycopg import sql

from .domain import (
    DocumentStatus,
    GenerationState,
    IllegalTransition,
    JobStatus,
    document_sources,
    generation_sources,
    job_sources,
)


class Expr:
    """A SQL expression of ours (never client input) for a SET clause, with its parameters."""

    __slots__ = ("params", "text")

    def __init__(self, text: str, *params: Any) -> None:
        self.text = text
        self.params = params


NOW = Expr("now()")


# Composed statements by shape (table, columns, expressions): a transition builds its SQL once,
# not on every call (composing was a tenth of a cycle's Python time in bench/ingest_bench.py).
# Rendered to bytes once, too: psycopg renders a Composed again on every execute.
_STATEMENTS: dict[tuple[str, tuple[tuple[str, str | None], ...]], bytes] = {}


def _update(
    table: str, row_id: Any, target: Any, sources: list[str], values: Mapping[str, Any], state_column: str = "status"
) -> tuple[bytes, list[Any]]:
    shape = (table, tuple((column, value.text if isinstance(value, Expr) else None) for column, value in values.items()))
    statement = _STATEMENTS.get(shape)
    if statement is None:
        assignments: list[sql.Composable] = [sql.SQL("{} = %s").format(sql.Identifier(state_column))]
        for column, text in shape[1]:
            if text is not None:
                assignments.append(sql.SQL("{} = ").format(sql.Identifier(column)) + sql.SQL(text))
            else:
                assignments.append(sql.SQL("{} = %s").format(sql.Identifier(column)))
        statement = (
            sql.SQL("UPDATE {} SET {} WHERE id = %s AND {} = ANY(%s) RETURNING id")
            .format(sql.Identifier(table), sql.SQL(", ").join(assignments), sql.Identifier(state_column))
            .as_bytes(None)
        )
        _STATEMENTS[shape] = statement
    params: list[Any] = [str(target)]
    for value in values.values():
        if isinstance(value, Expr):
            params.extend(value.params)
        else:
            params.append(value)
    return statement, [*params, row_id, sources]


class PendingMove:
    """A move sent but not yet confirmed (in pipeline mode its result arrives at the next sync):
    `confirm()` raises IllegalTransition when no row matched."""

    __slots__ = ("cursor", "details", "message")

    def __init__(self, cursor: psycopg.AsyncCursor[Any], message: str, details: dict[str, Any]) -> None:
        self.cursor = cursor
        self.message = message
        self.details = details

    async def confirm(self) -> None:
        if await self.cursor.fetchone() is None:
            raise IllegalTransition(self.message, **self.details)


async def send_move_document(
    conn: psycopg.AsyncConnection,
    document_id: uuid.UUID,
    target: DocumentStatus,
    values: Mapping[str, Any] | None = None,
    *,
    sources: Iterable[DocumentStatus] | None = None,
) -> PendingMove:
    """move_document without waiting for its row: several moves (and other statements) share
    one round trip in pipeline mode; confirm() each afterwards."""
    allowed = document_sources(target, sources)
    statement, params = _update("documents", document_id, target, allowed, {**(values or {}), "updated_at": NOW})
    return PendingMove(
        await conn.execute(statement, params),
        f"document {document_id} cannot move to {target} (it is not in {', '.join(allowed)})",
        {"target": target, "document_id": document_id},
    )


async def move_document(
    conn: psycopg.AsyncConnection,
    document_id: uuid.UUID,
    target: DocumentStatus,
    values: Mapping[str, Any] | None = None,
    *,
    sources: Iterable[DocumentStatus] | None = None,
) -> None:
    """Move a document to `target` along an edge of DOCUMENT_TRANSITIONS, setting `values`."""
    await (await send_move_document(conn, document_id, target, values, sources=sources)).confirm()


async def send_move_job(
    conn: psycopg.AsyncConnection,
    job_id: uuid.UUID,
    target: JobStatus,
    values: Mapping[str, Any] | None = None,
    *,
    sources: Iterable[JobStatus] | None = None,
) -> PendingMove:
    """move_job without waiting for its row (see send_move_document)."""
    allowed = job_sources(target, sources)
    statement, params = _update("ingestion_jobs", job_id, target, allowed, {**(values or {}), "updated_at": NOW})
    return PendingMove(
        await conn.execute(statement, params),
        f"job {job_id} cannot move to {target} (it is not in {', '.join(allowed)})",
        {"target": target, "job_id": job_id},
    )


async def move_job(
    conn: psycopg.AsyncConnection,
    job_id: uuid.UUID,
    target: JobStatus,
    values: Mapping[str, Any] | None = None,
    *,
    sources: Iterable[JobStatus] | None = None,
) -> None:
    """Move a job to `target` along an edge of JOB_TRANSITIONS, setting `values`."""
    await (await send_move_job(conn, job_id, target, values, sources=sources)).confirm()


async def move_generation(
    conn: psycopg.AsyncConnection,
    generation_id: int,
    target: GenerationState,
    values: Mapping[str, Any] | None = None,
    *,
    sources: Iterable[GenerationState] | None = None,
) -> None:
    """Move an index generation to `target` along an edge of GENERATION_TRANSITIONS."""
    allowed = generation_sources(target, sources)
    statement, params = _update("collection_generations", generation_id, target, allowed, dict(values or {}), "state")
    if await (await conn.execute(statement, params)).fetchone() is None:
        raise IllegalTransition(
            f"generation {generation_id} cannot move to {target} (it is not in {', '.join(allowed)})",
            target=target,
            generation_id=generation_id,
        )


def document_move_sql(target: str, values: Mapping[str, str], *, where: str, sources: str, returning: str = "id") -> sql.Composed:
    """The document move of DOCUMENT_TRANSITIONS as a fragment of a larger statement (a CTE of
    ReportStage's single statement): `UPDATE documents SET status = <target>, … WHERE <where>
    AND status = ANY(<sources>)`. `target`, the values and `sources` are SQL placeholders or
    expressions of the caller's statement; the caller binds `sources` to document_sources(…)
    and turns zero rows into IllegalTransition (as move_document does)."""
    assignments = [sql.SQL("status = ") + sql.SQL(target)]
    assignments += [sql.SQL("{} = ").format(sql.Identifier(column)) + sql.SQL(text) for column, text in values.items()]
    return sql.SQL("UPDATE documents SET {} WHERE {} AND status = ANY({}) RETURNING {}").format(
        sql.SQL(", ").join(assignments), sql.SQL(where), sql.SQL(sources), sql.SQL(returning)
    )


RELEASED_LEASE = {"locked_at": None, "locked_by": None, "lease_token": None}

__all__ = [
    "NOW",
    "RELEASED_LEASE",
    "Expr",
    "PendingMove",
    "document_move_sql",
    "move_document",
    "move_generation",
    "move_job",
    "send_move_document",
    "send_move_job",
]
