"""The literals of every store statement, in one table built from the domain's enums.

A statement names a status, a state, a kind, a role or an outcome by its entry here
(`{doc_ready}`, `{job_running}`, `{gen_active}`, `{kind_embed}`, `{attempt_running}`,
`{role_current}`, `{version_deleted}`, `{runs_none}`: the enum's prefix, then the member's value
in lower case) and is composed with `compose` once, at import, and kept as bytes (psycopg renders
a Composed again on every execute). The values are SQL literals, not parameters: the partial
indexes on status and kind (migrations 0001, 0005, 0009) match only a literal, also once a statement is
prepared. A new member of one of these enums gets its entry by itself; no store module types such
a literal by hand (tests/ingest/test_store_statements.py checks both).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from psycopg import sql

from ..domain import (
    AttemptOutcome,
    DocumentStatus,
    GenerationState,
    JobKind,
    JobStatus,
    SourceRunEvents,
    VersionOutcome,
    VersionRole,
)

# Each enum whose values the statements name, by the prefix of its entries.
LITERAL_ENUMS: dict[str, type[enum.StrEnum]] = {
    "doc": DocumentStatus,
    "job": JobStatus,
    "gen": GenerationState,
    "kind": JobKind,
    "attempt": AttemptOutcome,
    "role": VersionRole,
    "version": VersionOutcome,
    "runs": SourceRunEvents,
}


def literal_name(prefix: str, member: enum.StrEnum) -> str:
    """The table's name of a member: `doc_ready` for DocumentStatus.READY."""
    return f"{prefix}_{member.value.lower()}"


def literal_table(enums: Mapping[str, type[enum.StrEnum]]) -> dict[str, sql.Composable]:
    """Every member of `enums` as a SQL literal, under its table name. The sources' and the
    webhooks' stores build their own tables with it, from their own enums, and pass them to
    `compose` as fragments."""
    return {literal_name(prefix, member): sql.Literal(str(member)) for prefix, kind in enums.items() for member in kind}


LITERALS: dict[str, sql.Composable] = literal_table(LITERAL_ENUMS)


def literal_array(members: Iterable[enum.StrEnum], sql_type: str) -> sql.Composed:
    """Several members as one typed array literal, `ARRAY['PARSING', …]::document_status[]`."""
    return sql.SQL("ARRAY[{}]::{}[]").format(sql.SQL(", ").join(sql.Literal(str(m)) for m in members), sql.SQL(sql_type))


def compose(text: str, **fragments: sql.Composable) -> bytes:
    """A statement with the table's literals (and a module's own `fragments`), rendered once."""
    return sql.SQL(text).format(**LITERALS, **fragments).as_bytes(None)


__all__ = ["LITERALS", "LITERAL_ENUMS", "compose", "literal_array", "literal_name", "literal_table"]
