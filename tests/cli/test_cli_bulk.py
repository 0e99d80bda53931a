"""Bulk uploads survive the rate limit: `sluice upload` of a few hundred files against an
ingest-api whose per-key limit is lowered so that it bites ends with every file READY and exit 0.

The CLI runs as its own process (as a user runs it); the documents are processed by the
ScriptedWorker through the real JobService (worker keys are not rate limited). The same with
10,000 files and the default limits is measured by hand (docs/clients.md, "Rate limits and bulk
jobs")."""

from __future__ import annotations

import json

import auth_keys
import psycopg
from prometheus_client import REGISTRY
from sluice_client import Client

from .conftest import ScriptedWorker, run_sluice_process

FILES = 300


def refused_calls() -> float:
    return REGISTRY.get_sample_value("sluice_rate_limited_calls_total") or 0.0


def test_a_folder_of_hundreds_of_files_under_a_biting_rate_limit_ends_all_ready(ingest_api_factory, database_url, tmp_path):
    server = ingest_api_factory(rate_limit_per_second=25, rate_limit_burst=10)
    worker = ScriptedWorker(server.address)
    try:
        with Client(server.address, api_key=auth_keys.KEYS["client"]) as client:
            client.collections.create("bulk", embedder="hashing")
        folder = tmp_path / "bulk"
        folder.mkdir()
        for n in range(FILES):
            (folder / f"note{n:04}.txt").write_text(f"Note {n}\n\nThe {n}th note of a bulk upload.")
        refused_before = refused_calls()
        result = run_sluice_process(
            "--json", "upload", folder, "--collection", "bulk", "--ingest-address", server.address, timeout=900
        )
        assert result.code == 0, result.err[-3000:]
        summary = json.loads(result.out)
        assert (summary["files"], summary["ready"], summary["failed"]) == (FILES, FILES, 0)
        assert summary["counts"] == {"READY": FILES}
        assert refused_calls() > refused_before, "the rate limit never bit: the test proves nothing"
        with psycopg.connect(database_url) as conn:
            statuses = conn.execute("SELECT status::text, count(*) FROM documents GROUP BY 1").fetchall()
        assert statuses == [("READY", FILES)]
    finally:
        worker.stop()
    assert not worker.errors, worker.errors


def test_upload_waits_for_documents_still_processing_instead_of_giving_up(sluice, stack, tmp_path):
    """No worker for a while: the upload keeps waiting (one stream, reconnecting if need be) and
    ends when the documents are READY."""
    import threading

    assert sluice("collections", "create", "docs", "--embedder", "hashing", *stack.args).code == 0
    folder = tmp_path / "waiting"
    folder.mkdir()
    for n in range(20):
        (folder / f"w{n:02}.txt").write_text(f"waiting file {n}")
    stack.worker.pause()
    threading.Timer(3.0, stack.worker.resume).start()
    result = sluice("--json", "upload", folder, "--collection", "docs", *stack.args)
    assert result.code == 0, result.err
    assert json.loads(result.out)["counts"] == {"READY": 20}
