"""`sluice-check`: a read-only consistency check of a Sluice database (docs/operations.md,
"Checking a database").

Each check is one named statement that returns the rows breaking one invariant, with what is
wrong and how to repair it. The constraints, unique indexes and foreign keys of the schema hold
what one row (or one pair of rows) can say; these are the invariants that span tables and that
only the code keeps: rule 1's "no chunks outside READY", rule 5's "document and job agree", the
keyword copy of every chunk, one ACTIVE generation per collection, every queued document still
reachable by a claim, leases that outlive their jobs. (A RUNNING job without a lease, for
one, is the constraint running_is_leased's to refuse, not this check's.) Every statement runs in one REPEATABLE
READ, READ ONLY transaction, so the report is one consistent moment of a live database and the
check writes nothing.

Statuses and kinds come from the enums (domain.py), never typed by hand.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from .domain import DocumentStatus
from .operator_tool import UNREACHABLE, tool_parser, with_database
from .store.literals import LITERALS as STORE_LITERALS
from .store.literals import literal_array

# How many offending rows each finding lists (the count is always exact).
SHOWN_ROWS = 10

IN_FLIGHT = [s for s in DocumentStatus if s not in (DocumentStatus.READY, DocumentStatus.FAILED)]
# The store's literal table (store/literals.py: `{doc_ready}`, `{job_running}`, `{gen_active}`,
# `{kind_embed}`…, from the enums), with the in-flight statuses as one array.
LITERALS: dict[str, sql.Composable] = {**STORE_LITERALS, "in_flight": literal_array(IN_FLIGHT, "document_status")}


@dataclass(frozen=True)
class Check:
    """One invariant: `query` returns (subject, detail) for every row that breaks it."""

    name: str
    invariant: str
    query: str
    repair: str
    # A note reports what wastes space but breaks nothing (the exit status stays 0).
    note: bool = False

    def statement(self) -> sql.Composed:
        return sql.SQL(self.query).format(**LITERALS)


CHECKS: tuple[Check, ...] = (
    Check(
        "chunks_outside_ready",
        "only READY documents hold chunks, enabled or disabled (rule 1)",
        """
        SELECT c.document_id::text, 'chunk ' || c.chunk_index || ' under a ' || d.status || ' document'
          FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.status <> {doc_ready}
        UNION ALL
        SELECT c.document_id::text, 'disabled chunk ' || c.chunk_index || ' under a ' || d.status || ' document'
          FROM disabled_chunks c JOIN documents d ON d.id = c.document_id WHERE d.status <> {doc_ready}
        """,
        "ReprocessDocument (or RetryDocument) writes the chunks again; until then they are never searched",
    ),
    Check(
        "chunk_count",
        "a READY document's chunk_count is the number of chunks its ACTIVE generation holds",
        """
        SELECT d.id::text, 'chunk_count ' || d.chunk_count || ', but ' || n.chunks || ' chunks in the ACTIVE generation'
          FROM documents d
          JOIN collection_generations g ON g.collection_id = d.collection_id AND g.state = {gen_active}
          CROSS JOIN LATERAL (
            SELECT (SELECT count(*) FROM chunks c WHERE c.document_id = d.id AND c.generation_id = g.id)
                 + (SELECT count(*) FROM disabled_chunks c WHERE c.document_id = d.id AND c.generation_id = g.id) AS chunks
          ) n
         WHERE d.status = {doc_ready} AND n.chunks <> d.chunk_count
        """,
        "ReprocessDocument writes the document's chunks and its count again",
    ),
    Check(
        "keyword_copy",
        "every chunk has its keyword_chunks row, in its generation and tenant (migration 0028)",
        """
        SELECT c.id::text, 'no keyword row: KEYWORD and HYBRID never find this chunk'
          FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM keyword_chunks k WHERE k.chunk_id = c.id)
        UNION ALL
        SELECT c.id::text, 'keyword row of generation ' || k.generation_id || ', tenant ' || k.tenant_id
          FROM chunks c JOIN keyword_chunks k ON k.chunk_id = c.id
         WHERE k.generation_id <> c.generation_id OR k.tenant_id <> c.tenant_id
        """,
        "`UPDATE chunks SET search_terms = search_terms WHERE id = ...` rewrites the copy through the chunks' triggers",
    ),
    Check(
        "disabled_and_enabled",
        "a disabled chunk is not also in chunks (docs/chunks.md)",
        "SELECT c.id::text, 'in chunks and in disabled_chunks' FROM disabled_chunks c JOIN chunks e ON e.id = c.id",
        "delete the disabled_chunks row (the chunk serves), or disable the chunk again with UpdateChunk",
    ),
    Check(
        "active_generation",
        "every collection has exactly one ACTIVE generation (search reads it)",
        """
        SELECT col.tenant_id || '/' || col.name, 'no ACTIVE generation: search cannot answer'
          FROM collections col
         WHERE NOT EXISTS (SELECT 1 FROM collection_generations g WHERE g.collection_id = col.id AND g.state = {gen_active})
        """,
        "restore from a backup taken before the loss; a generation cannot be made ACTIVE by hand safely",
    ),
    Check(
        "chunks_of_dropped_generations",
        "a generation marked dropped holds no chunks",
        """
        SELECT g.id::text, count(*) || ' chunks left in dropped generation ' || g.number || ' (' || g.state || ')'
          FROM collection_generations g JOIN chunks c ON c.generation_id = g.id
         WHERE g.dropped_at IS NOT NULL GROUP BY g.id, g.number, g.state
        """,
        "`DELETE FROM chunks WHERE generation_id = ...`: nothing searches a dropped generation",
    ),
    Check(
        "document_without_ingest_job",
        "every document has its INGEST job (rule 5: created together)",
        """
        SELECT d.id::text, d.status || ' document without an INGEST job'
          FROM documents d
         WHERE NOT EXISTS (SELECT 1 FROM ingestion_jobs j WHERE j.document_id = d.id AND j.kind = {kind_ingest})
        """,
        "DeleteDocument and upload the file again (a document without a job is never processed)",
    ),
    Check(
        "document_and_job_disagree",
        "a document and its INGEST job agree: in flight with PENDING or RUNNING, READY with SUCCEEDED, FAILED with FAILED (rule 5)",
        """
        SELECT d.id::text, 'document ' || d.status || ', job ' || j.status
          FROM documents d JOIN ingestion_jobs j ON j.document_id = d.id AND j.kind = {kind_ingest}
         WHERE (d.status = ANY({in_flight}) AND j.status NOT IN ({job_pending}, {job_running}))
            OR (d.status = {doc_ready} AND j.status <> {job_succeeded})
            OR (d.status = {doc_failed} AND j.status <> {job_failed})
        """,
        "RetryDocument (a FAILED document) or ReprocessDocument (a READY one) puts both back on one path",
    ),
    Check(
        "unclaimable_job",
        "a PENDING job can still be claimed: attempts < max_attempts (rule 6); otherwise its document waits for ever",
        """
        SELECT j.id::text, j.kind || ' job PENDING after ' || j.attempts || ' of ' || j.max_attempts || ' attempts'
          FROM ingestion_jobs j WHERE j.status = {job_pending} AND j.attempts >= j.max_attempts
        """,
        "RetryDocument gives its document fresh attempts",
    ),
    Check(
        "lease_outlives_job",
        "an open attempt is the lease of its RUNNING job: no attempt stays open once its lease ended",
        """
        SELECT a.job_id::text, 'attempt ' || a.number || ' still RUNNING, but the job is ' || j.status
               || CASE WHEN j.status = {job_running} THEN ' under another lease' ELSE '' END
          FROM job_attempts a JOIN ingestion_jobs j ON j.id = a.job_id
         WHERE a.outcome = {attempt_running} AND (j.status <> {job_running} OR j.lease_token IS DISTINCT FROM a.lease_token)
        """,
        "the attempt's lease is fenced already (every write checks the job's token); close the attempt row by hand",
    ),
    Check(
        "embed_job_of_ended_generation",
        "an EMBED job in flight belongs to a BUILDING generation",
        """
        SELECT j.id::text, 'EMBED job ' || j.status || ' for a ' || g.state || ' generation'
          FROM ingestion_jobs j JOIN collection_generations g ON g.id = j.generation_id
         WHERE j.kind = {kind_embed} AND j.status IN ({job_pending}, {job_running}) AND g.state <> {gen_building}
        """,
        "`DELETE FROM ingestion_jobs WHERE id = ...`: nothing will read what it would write",
    ),
    Check(
        "original_missing",
        "every document keeps its original bytes (workers read them; DownloadDocument sends them)",
        """
        SELECT d.id::text, d.status || ' document without its content'
          FROM documents d WHERE NOT EXISTS (SELECT 1 FROM document_contents c WHERE c.document_id = d.id)
        """,
        "upload the file again (same bytes, same collection: the upload finds this document)",
    ),
    Check(
        "versions_serving_twice",
        "a source_uri has at most one serving version in its history (docs/architecture.md, Document versions)",
        """
        SELECT v.tenant_id || '/' || v.collection_id || ' ' || v.source_uri, count(*) || ' versions serving at once'
          FROM document_versions v WHERE v.serving_at IS NOT NULL AND v.ended_at IS NULL
         GROUP BY v.tenant_id, v.collection_id, v.source_uri HAVING count(*) > 1
        """,
        "DeleteDocument the versions that should have ended, or upload the source's content again",
    ),
    Check(
        "orphaned_snapshots",
        "a chunk snapshot belongs to the content of a live document of its tenant",
        """
        SELECT s.tenant_id || '/' || s.content_sha256 || ' ' || s.pipeline_version,
               pg_size_pretty(pg_column_size(s.chunks)::bigint) || ' of chunks that no live document has'
          FROM chunk_snapshots s
         WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.tenant_id = s.tenant_id AND d.content_sha256 = s.content_sha256)
        """,
        "`DELETE FROM chunk_snapshots WHERE tenant_id = ... AND content_sha256 = ...` reclaims the space"
        " (an upload of the same bytes would have reused it)",
        note=True,
    ),
)


@dataclass(frozen=True)
class Finding:
    check: Check
    count: int
    rows: list[tuple[str, str]]


def run_checks(conn: psycopg.Connection[Any], checks: Sequence[Check] = CHECKS) -> list[Finding]:
    """Every check in one REPEATABLE READ, READ ONLY transaction; the ones that found rows."""
    findings = []
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        for check in checks:
            rows = conn.execute(check.statement()).fetchall()
            if rows:
                findings.append(Finding(check, len(rows), [(str(a), str(b)) for a, b in rows[:SHOWN_ROWS]]))
    return findings


def report(findings: Sequence[Finding], checks: Sequence[Check] = CHECKS) -> str:
    """The findings as a person reads them; one line when all is well."""
    if not findings:
        return f"all {len(checks)} invariants hold"
    lines = []
    for finding in findings:
        label = "NOTE" if finding.check.note else "BROKEN"
        lines.append(f"{label} {finding.check.name}: {finding.check.invariant}")
        lines += [f"  {subject}: {detail}" for subject, detail in finding.rows]
        if finding.count > len(finding.rows):
            lines.append(f"  … and {finding.count - len(finding.rows)} more")
        lines.append(f"  repair: {finding.check.repair}")
    broken = sum(1 for f in findings if not f.check.note)
    lines.append(
        f"{broken} of {len(checks)} invariants broken" + (f", {len(findings) - broken} notes" if broken < len(findings) else "")
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(
        "sluice-check",
        "Check a Sluice database's invariants, reading only (docs/operations.md, 'Checking a database'). "
        "Exits 1 when one is broken.",
        "the database (default: SLUICE_DATABASE_URL, as ingest-api reads it)",
    )
    findings = with_database(parser, parser.parse_args(argv), run_checks)
    if findings is None:
        return UNREACHABLE
    print(report(findings))
    return 1 if any(not f.check.note for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
