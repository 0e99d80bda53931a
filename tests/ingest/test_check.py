"""sluice-check (docs/operations.md, "Checking a database"): on a healthy database with READY,
FAILED, in-flight and disabled-chunk documents it reports nothing; each invariant broken on
purpose, by the SQL a bug or a bad manual repair would run, is reported by name, with the
offending row and its repair, and the exit status is 1. It writes nothing."""

from __future__ import annotations

import psycopg
import pytest
from sluice.v1 import document_service_pb2 as ds
from sluice_ingest import check

from .test_chunks import list_chunks, ready, update


def findings(url: str) -> dict[str, check.Finding]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {f.check.name: f for f in check.run_checks(conn)}


@pytest.fixture
def healthy(c, database_url):
    """READY documents (one with a disabled chunk), a FAILED one and one waiting to be claimed."""
    first = ready(c, name="first.txt")
    second = ready(c, name="second.txt")
    chunk = list_chunks(c, second).chunks[1]
    update(c, chunk.id, enabled=False)
    failing = c.upload(content=b"will fail", filename="bad.txt")
    job = c.claim()
    assert job.document_id == failing.id
    c.fail(job, retryable=False)
    waiting = c.upload(content=b"still waiting", filename="wait.txt")
    assert findings(database_url) == {}, "a healthy database reports nothing"
    return {"first": first, "second": second, "failed": failing.id, "waiting": waiting.id}


BREAKS = [
    # (the invariant, the SQL that breaks it)
    ("chunks_outside_ready", "UPDATE documents SET status = 'PARSING' WHERE id = '{first}'"),
    ("chunk_count", "UPDATE documents SET chunk_count = chunk_count + 1 WHERE id = '{first}'"),
    ("keyword_copy", "DELETE FROM keyword_chunks WHERE chunk_id = (SELECT min(id) FROM chunks)"),
    (
        "disabled_and_enabled",
        "INSERT INTO chunks (id, document_id, tenant_id, collection_id, generation_id, chunk_index, text, embedding)"
        " OVERRIDING SYSTEM VALUE SELECT id, document_id, tenant_id, collection_id, generation_id, 1000, text, embedding"
        " FROM disabled_chunks",
    ),
    ("active_generation", "UPDATE collection_generations SET state = 'BUILDING' WHERE state = 'ACTIVE'"),
    (
        "chunks_of_dropped_generations",
        "UPDATE collection_generations SET state = 'RETIRED', ended_at = now(), dropped_at = now() WHERE state = 'ACTIVE'",
    ),
    ("document_without_ingest_job", "DELETE FROM ingestion_jobs WHERE document_id = '{waiting}'"),
    ("document_and_job_disagree", "UPDATE ingestion_jobs SET status = 'PENDING' WHERE document_id = '{failed}'"),
    ("unclaimable_job", "UPDATE ingestion_jobs SET attempts = max_attempts WHERE document_id = '{waiting}'"),
    ("lease_outlives_job", "UPDATE job_attempts SET outcome = 'RUNNING', ended_at = NULL"),
    ("original_missing", "DELETE FROM document_contents WHERE document_id = '{second}'"),
]


@pytest.mark.parametrize("broken, statement", BREAKS, ids=[name for name, _ in BREAKS])
def test_each_broken_invariant_is_reported_with_its_repair(healthy, database_url, capsys, broken, statement):
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # no trigger repairs what we break
        conn.execute(statement.format(**healthy).encode())
    found = findings(database_url)
    assert broken in found, sorted(found)
    finding = found[broken]
    assert finding.count >= 1 and finding.rows and all(subject and detail for subject, detail in finding.rows)
    assert check.main(["--database-url", database_url]) == 1
    printed = capsys.readouterr().out
    assert f"BROKEN {broken}: " in printed and "repair: " in printed and "invariants broken" in printed


def test_an_orphaned_snapshot_is_a_note_not_a_failure(c, database_url, capsys):
    document = ready(c, name="gone.txt")
    with psycopg.connect(database_url, autocommit=True) as conn:
        tenant, sha = conn.execute("SELECT tenant_id, content_sha256 FROM documents WHERE id = %s", (document,)).fetchone()
        conn.execute(
            "INSERT INTO chunk_snapshots (tenant_id, content_sha256, pipeline_version, chunk_count, chunks)"
            " VALUES (%s, %s, 'test-1', 0, '[]')",
            (tenant, sha),
        )
    assert findings(database_url) == {}
    c.docs.DeleteDocument(ds.DeleteDocumentRequest(id=document))
    assert set(findings(database_url)) == {"orphaned_snapshots"}
    assert check.main(["--database-url", database_url]) == 0
    assert "NOTE orphaned_snapshots" in capsys.readouterr().out


def test_the_check_reads_only(healthy, database_url):
    """Every statement runs in a READ ONLY transaction: a check that tried to write would fail."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            check.run_checks(conn, [check.Check("writer", "x", "UPDATE documents SET chunk_count = 0", "x")])
        assert check.run_checks(conn) == []
