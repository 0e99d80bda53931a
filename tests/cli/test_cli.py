"""The sluice CLI against the real services: human output, --json, paging, exit codes.

Each test gets its own database with the real ingest-api and search in-process (`stack`);
documents are processed by ScriptedWorker through the real JobService (see conftest.py),
so READY and FAILED documents, their attempt history and their search hits are real. The
same commands against `sluice-dev` with a real worker are in test_e2e_dev.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading

import psycopg
from sluice_cli.files import request_id

from .conftest import CORRUPT_CODE, WORKER_ID, run_sluice_process


def create(sluice, stack, name="docs", *extra):
    result = sluice("collections", "create", name, "--embedder", "hashing", *extra, *stack.args)
    assert result.code == 0, result.err
    return result


def upload(sluice, stack, path, collection="docs", *extra) -> list[dict]:
    result = sluice("--json", "upload", path, "--collection", collection, *extra, *stack.args)
    assert result.code in (0, 1), result.err
    return json.loads(result.out)["results"]


def one_error_line(result) -> bool:
    return "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1


# ------------------------------------------------------------------ collections


def test_collections_create_list_delete(sluice, stack):
    result = create(sluice, stack, "docs", "--chunk-size", "600", "--overlap", "50")
    assert "Created collection docs" in result.out and "hashing embedder hashing, 256 dimensions" in result.out
    created = json.loads(sluice("--json", "collections", "show", "docs", *stack.args).out)
    assert created["embedder"]["model"] == "hashing" and created["embedder"]["dimensions"] == 256
    assert created["chunking"]["max_characters"] == 600 and created["chunking"]["overlap"] == 50
    assert 1 <= created["chunking"]["new_after_n_chars"] <= 600

    listed = sluice("collections", "list", *stack.args)
    assert listed.code == 0 and "docs" in listed.out and "hashing" in listed.out
    shown = sluice("collections", "show", "docs", *stack.args)
    assert shown.code == 0 and "docs" in shown.out

    as_json = json.loads(sluice("--json", "collections", "list", *stack.args).out)
    assert [c["name"] for c in as_json["collections"]] == ["docs"]
    assert as_json["collections"][0]["embedder"]["provider"] == "EMBEDDER_PROVIDER_HASHING"

    deleted = sluice("collections", "delete", "docs", *stack.args)
    assert deleted.code == 0 and "Deleted collection docs" in deleted.out
    again = sluice("collections", "delete", "docs", *stack.args)
    assert again.code == 3 and one_error_line(again)
    assert "No collections yet" in sluice("collections", "list", *stack.args).out


def test_default_embedder_is_the_local_model(sluice, stack):
    assert sluice("collections", "create", "local", *stack.args).code == 0
    embedder = json.loads(sluice("--json", "collections", "show", "local", *stack.args).out)["embedder"]
    assert (embedder["model"], embedder["dimensions"]) == ("all-MiniLM-L6-v2", 384)
    assert embedder["provider"] == "EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS"


def test_collection_errors_have_readable_messages_and_codes(sluice, stack):
    create(sluice, stack, "docs")
    again = sluice("collections", "create", "docs", "--embedder", "hashing", *stack.args)
    assert again.code == 1
    assert "already exists" in again.err and "COLLECTION_EXISTS" in again.err
    bad = sluice("collections", "create", "Bad Name", *stack.args)
    assert bad.code == 2 and "collection name must be" in bad.err and "INVALID_COLLECTION_NAME" in bad.err
    missing = sluice("collections", "show", "nope", *stack.args)
    assert missing.code == 3 and "does not exist" in missing.err
    for result in (again, bad, missing):
        assert one_error_line(result) and result.err.startswith("error: "), result.err
    as_json = sluice("--json", "collections", "show", "nope", *stack.args)
    error = json.loads(as_json.err)["error"]
    assert as_json.code == 3 and error["exit_code"] == 3 and error["reason"] == "COLLECTION_NOT_FOUND"


def test_custom_model_needs_dimensions(sluice, stack):
    result = sluice("collections", "create", "x", "--embedder", "openai", "--model", "nomic-embed-text", *stack.args)
    assert result.code == 2 and "--dimensions" in result.err and one_error_line(result)
    assert json.loads(sluice("--json", "collections", "list", *stack.args).out)["collections"] == []


# ------------------------------------------------------------------ upload


def test_upload_folder_recursive_skips_hidden_and_waits_for_ready(sluice, stack, docs_folder):
    create(sluice, stack)
    result = sluice("upload", docs_folder, "--collection", "docs", *stack.args)
    assert result.code == 0, result.err
    assert "3 files → collection docs: 3 READY" in result.out
    # One line per finished document on stderr when there is no terminal.
    assert result.err.count("READY") == 3
    documents = json.loads(sluice("--json", "ls", "-c", "docs", *stack.args).out)["documents"]
    assert sorted(d["filename"] for d in documents) == ["alpha.md", "beta.txt", "gamma.html"]
    assert {d["status"] for d in documents} == {"DOCUMENT_STATUS_READY"}
    mime = {d["filename"]: d["mime_type"] for d in documents}
    assert mime["alpha.md"] == "text/markdown" and mime["gamma.html"] == "text/html"
    assert {d["chunk_count"] for d in documents} == {1, 2}  # alpha.md and gamma.html have two paragraphs


def test_upload_is_idempotent_by_request_id(sluice, stack, docs_folder):
    create(sluice, stack)
    first = upload(sluice, stack, docs_folder)
    second = upload(sluice, stack, docs_folder)
    ids = lambda results: sorted(r["document"]["id"] for r in results)  # noqa: E731
    assert ids(first) == ids(second)
    assert len(json.loads(sluice("--json", "ls", *stack.args).out)["documents"]) == 3
    with psycopg.connect(stack.database_url) as conn:
        request_ids = [row[0] for row in conn.execute("SELECT request_id FROM documents")]
    assert len(set(request_ids)) == 3 and all(r and 0 < len(r) <= 128 for r in request_ids)


def test_request_id_is_stable_and_depends_on_collection_path_and_content(tmp_path):
    path = tmp_path / "a.txt"
    assert request_id("docs", path, "0" * 64) == request_id("docs", path, "0" * 64)
    assert request_id("docs", path, "0" * 64) != request_id("other", path, "0" * 64)
    assert request_id("docs", path, "0" * 64) != request_id("docs", path, "1" * 64)
    assert request_id("docs", path, "0" * 64) != request_id("docs", tmp_path / "b.txt", "0" * 64)


def test_upload_json_summary_and_failed_document_exit_1(sluice, stack, docs_folder):
    create(sluice, stack)
    (docs_folder / "broken.txt").write_text("FAIL: this one cannot be parsed")
    result = sluice("--json", "upload", docs_folder, "--collection", "docs", *stack.args)
    assert result.code == 1
    summary = json.loads(result.out)
    assert summary["ready"] == 3 and summary["failed"] == 1 and summary["files"] == 4 and summary["exit_code"] == 1
    failed = [r for r in summary["results"] if r["status"] == "FAILED"]
    assert failed[0]["path"].endswith("broken.txt")
    assert "could not be parsed" in failed[0]["error"]
    assert failed[0]["document"]["error_code"] == CORRUPT_CODE

    human = sluice("upload", docs_folder / "broken.txt", "--collection", "docs", *stack.args)
    assert human.code == 1
    assert "1 FAILED" in human.out and "could not be parsed" in human.out and CORRUPT_CODE in human.out
    assert "sluice retry ID" in human.out


def test_upload_no_wait_returns_pending_documents(sluice, stack, docs_folder):
    create(sluice, stack)
    stack.worker.pause()
    result = sluice("upload", docs_folder, "--collection", "docs", "--no-wait", *stack.args)
    assert result.code == 0, result.err
    assert "3 PENDING" in result.out and "sluice ls" in result.out
    assert "3 document(s): 3 PENDING" in sluice("ls", *stack.args).out


def test_upload_timeout_is_exit_1_naming_the_document(sluice, stack, tmp_path):
    create(sluice, stack)
    stack.worker.pause()
    (tmp_path / "slow.txt").write_text("never processed")
    result = sluice("upload", tmp_path / "slow.txt", "-c", "docs", "--timeout", "0.5", *stack.args)
    assert result.code == 1
    assert "timed out waiting for slow.txt (still PENDING)" in result.out


def test_upload_to_unknown_collection_is_not_found(sluice, stack, docs_folder):
    result = sluice("upload", docs_folder, "--collection", "nope", *stack.args)
    assert result.code == 3 and one_error_line(result)
    assert "collection 'nope' does not exist" in result.err
    assert json.loads(sluice("--json", "ls", *stack.args).out)["documents"] == []


def test_upload_missing_path_is_a_usage_error(sluice, stack, tmp_path):
    create(sluice, stack)
    result = sluice("upload", tmp_path / "nowhere", "--collection", "docs", *stack.args)
    assert result.code == 2 and "no such file or directory" in result.err and one_error_line(result)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".only-hidden").write_text("x")
    result = sluice("upload", empty, "--collection", "docs", *stack.args)
    assert result.code == 2 and "nothing to upload" in result.err and one_error_line(result)


def test_unreadable_file_is_reported_and_the_rest_still_uploads(sluice, stack, docs_folder):
    create(sluice, stack)
    (docs_folder / "dangling.md").symlink_to(docs_folder / "gone.md")
    if os.geteuid() != 0:  # root reads everything, so only a broken link is unreadable there
        locked = docs_folder / "locked.txt"
        locked.write_text("secret")
        locked.chmod(0)
    result = sluice("upload", docs_folder, "--collection", "docs", *stack.args)
    assert result.code == 1
    assert "3 READY" in result.out
    # The line holds the path twice: a longer temporary directory (pytest-xdist adds popen-gwN/)
    # wraps it even at 200 columns, inside the path or at a space: compare without whitespace.
    expected = f"cannot read {docs_folder / 'dangling.md'}: broken symbolic link"
    assert "".join(expected.split()) in "".join(result.out.split())
    if os.geteuid() != 0:
        assert "Permission denied" in result.out
    assert "Traceback" not in result.out + result.err
    assert len(json.loads(sluice("--json", "ls", *stack.args).out)["documents"]) == 3


def test_empty_file_is_refused_with_a_message(sluice, stack, tmp_path):
    create(sluice, stack)
    (tmp_path / "empty.txt").write_text("")
    result = sluice("upload", tmp_path / "empty.txt", "-c", "docs", *stack.args)
    assert result.code == 1 and "empty.txt is empty" in result.out
    assert json.loads(sluice("--json", "ls", *stack.args).out)["documents"] == []


def test_upload_metadata_reaches_the_document(sluice, stack, tmp_path):
    create(sluice, stack)
    (tmp_path / "tagged.txt").write_text("tagged content")
    doc = upload(sluice, stack, tmp_path / "tagged.txt", "docs", "-m", "team=search", "-m", "lang=en")[0]["document"]
    assert doc["metadata"] == {"team": "search", "lang": "en"}
    bad = sluice("upload", tmp_path / "tagged.txt", "-c", "docs", "-m", "novalue", *stack.args)
    assert bad.code == 2


# ------------------------------------------------------------------ documents


def test_ls_summarises_statuses_and_filters(sluice, stack, tmp_path):
    create(sluice, stack)
    create(sluice, stack, "other")
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(7):
        (folder / f"doc{n}.txt").write_text(f"document number {n}")
    (folder / "bad.txt").write_text("FAIL")
    upload(sluice, stack, folder)
    (tmp_path / "elsewhere.txt").write_text("in the other collection")
    upload(sluice, stack, tmp_path / "elsewhere.txt", "other")

    table = sluice("ls", *stack.args)
    assert table.code == 0 and "doc6.txt" in table.out and "elsewhere.txt" in table.out
    assert "9 document(s): 1 FAILED, 8 READY" in table.out
    narrowed = sluice("ls", "--collection", "docs", *stack.args)
    assert "8 document(s): 1 FAILED, 7 READY" in narrowed.out and "elsewhere.txt" not in narrowed.out
    failed = json.loads(sluice("--json", "ls", "--status", "failed", *stack.args).out)["documents"]
    assert [d["filename"] for d in failed] == ["bad.txt"]
    assert json.loads(sluice("--json", "ls", "-c", "other", "--status", "FAILED", *stack.args).out)["documents"] == []
    assert "No documents." in sluice("ls", "-c", "other", "--status", "pending", *stack.args).out
    assert len(json.loads(sluice("--json", "ls", "--limit", "3", *stack.args).out)["documents"]) == 3
    missing = sluice("ls", "--collection", "nope", *stack.args)
    assert missing.code == 3 and one_error_line(missing)
    assert sluice("ls", "--status", "bogus", *stack.args).code == 2


def test_ls_and_references_page_through_every_document(sluice, stack, tmp_path):
    """More documents than the CLI's page size (1000): ls and reference lookups follow
    next_page_token to the end, and --limit stops across a page boundary."""
    create(sluice, stack)
    stack.worker.pause()  # 1005 documents stay PENDING: processing them is not the point here
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(1005):
        (folder / f"doc{n:04}.txt").write_text(f"document number {n}")
    # As a process of its own: the CLI and the in-process servers do not share one GIL.
    uploaded = run_sluice_process("--json", "upload", folder, "--collection", "docs", "--no-wait", *stack.args)
    assert uploaded.code == 0, uploaded.err
    assert json.loads(uploaded.out)["files"] == 1005

    listed = json.loads(sluice("--json", "ls", "--collection", "docs", *stack.args).out)["documents"]
    assert len(listed) == 1005 and len({d["id"] for d in listed}) == 1005
    assert sorted(d["filename"] for d in listed) == sorted(f"doc{n:04}.txt" for n in range(1005))
    table = sluice("ls", *stack.args)
    assert table.code == 0 and "1005 document(s): 1005 PENDING" in table.out
    assert len(json.loads(sluice("--json", "ls", "--limit", "1002", *stack.args).out)["documents"]) == 1002
    assert [d["id"] for d in json.loads(sluice("--json", "ls", "--limit", "3", *stack.args).out)["documents"]] == [
        d["id"] for d in listed[:3]
    ]

    oldest = listed[-1]  # newest first: the oldest document is on the second page
    for ref in (oldest["filename"], oldest["id"][:8]):
        shown = sluice("--json", "show", ref, *stack.args)
        assert shown.code == 0, (ref, shown.err)
        assert json.loads(shown.out)["id"] == oldest["id"]


def test_show_prints_fields_and_attempt_history_with_errors(sluice, stack, tmp_path):
    create(sluice, stack)
    (tmp_path / "bad.txt").write_text("FAIL")
    doc = upload(sluice, stack, tmp_path / "bad.txt")[0]["document"]
    assert doc["status"] == "DOCUMENT_STATUS_FAILED"
    result = sluice("show", doc["id"], *stack.args)
    assert result.code == 0
    for text in (
        "bad.txt",
        "FAILED",
        "the file could not be parsed",
        CORRUPT_CODE,
        "attempts",
        "PERMANENT_FAILURE",
        WORKER_ID,
        doc["id"],
    ):
        assert text in result.out, text
    as_json = json.loads(sluice("--json", "show", doc["id"], *stack.args).out)
    attempt = as_json["attempt_history"][0]
    assert attempt["outcome"] == "ATTEMPT_OUTCOME_PERMANENT_FAILURE" and attempt["worker_id"] == WORKER_ID
    assert attempt["error_code"] == CORRUPT_CODE


def test_document_reference_by_prefix_name_or_resource_name(sluice, stack, docs_folder):
    create(sluice, stack)
    doc = next(r["document"] for r in upload(sluice, stack, docs_folder) if r["document"]["filename"] == "alpha.md")
    for ref in (doc["id"][:8], "alpha.md", doc["name"], doc["id"].upper()):
        result = sluice("--json", "show", ref, *stack.args)
        assert result.code == 0, (ref, result.err)
        assert json.loads(result.out)["id"] == doc["id"]
    narrowed = sluice("--json", "show", "alpha.md", "--collection", "docs", *stack.args)
    assert json.loads(narrowed.out)["id"] == doc["id"]
    for ref in ("no-such-doc", "00000000-0000-0000-0000-000000000000"):
        missing = sluice("show", ref, *stack.args)
        assert missing.code == 3 and one_error_line(missing), (ref, missing.err)


def test_ambiguous_file_name_is_a_usage_error(sluice, stack, tmp_path):
    create(sluice, stack)
    create(sluice, stack, "other")
    (tmp_path / "same.txt").write_text("one name, two collections")
    upload(sluice, stack, tmp_path / "same.txt")
    upload(sluice, stack, tmp_path / "same.txt", "other")
    result = sluice("show", "same.txt", *stack.args)
    assert result.code == 2 and "matches 2 documents" in result.err and one_error_line(result)
    assert sluice("show", "same.txt", "-c", "other", *stack.args).code == 0


def test_watch_exit_codes_follow_the_outcome(sluice, stack, tmp_path):
    create(sluice, stack)
    stack.worker.step_seconds = 0.25
    stack.worker.pause()
    (tmp_path / "good.txt").write_text("fine content")
    (tmp_path / "bad.txt").write_text("FAIL content")
    good_id = upload(sluice, stack, tmp_path / "good.txt", "docs", "--no-wait")[0]["document"]["id"]
    bad_id = upload(sluice, stack, tmp_path / "bad.txt", "docs", "--no-wait")[0]["document"]["id"]
    # Processing starts once the watch has begun, so it sees the stages as they happen.
    threading.Timer(1.5, stack.worker.resume).start()  # generous: the watch connects in ms
    watched = sluice("watch", good_id, *stack.args)
    assert watched.code == 0, watched.err
    assert re.search(rf"good.txt READY \(1 chunks?\) {good_id}", watched.out), watched.out
    assert "PENDING" in watched.err and "PARSING" in watched.err and "EMBEDDING" in watched.err
    events = sluice("--json", "watch", bad_id, *stack.args)
    assert events.code == 1
    statuses = [json.loads(line)["status"] for line in events.out.splitlines()]
    assert statuses[-1] == "DOCUMENT_STATUS_FAILED"
    human = sluice("watch", bad_id, *stack.args)  # already FAILED: ends at once
    assert human.code == 1 and f"bad.txt FAILED: the file could not be parsed: it looks corrupt [{CORRUPT_CODE}]" in human.out
    assert sluice("watch", "00000000-0000-0000-0000-000000000000", *stack.args).code == 3


def test_watch_timeout_is_exit_1(sluice, stack, tmp_path):
    create(sluice, stack)
    stack.worker.pause()
    (tmp_path / "waiting.txt").write_text("stays pending")
    doc = upload(sluice, stack, tmp_path / "waiting.txt", "docs", "--no-wait")[0]["document"]
    result = sluice("watch", doc["id"], "--timeout", "0.5", *stack.args)
    assert result.code == 1 and "timed out waiting for waiting.txt (still PENDING)" in result.err


def test_retry_and_rm(sluice, stack, tmp_path):
    create(sluice, stack)
    (tmp_path / "bad.txt").write_text("FAIL")
    doc = upload(sluice, stack, tmp_path / "bad.txt")[0]["document"]
    assert doc["status"] == "DOCUMENT_STATUS_FAILED"
    retried = sluice("retry", doc["id"], "--wait", *stack.args)
    assert retried.code == 0 and "READY" in retried.out, retried.out + retried.err
    history = json.loads(sluice("--json", "show", doc["id"], *stack.args).out)["attempt_history"]
    assert history[-1]["outcome"] == "ATTEMPT_OUTCOME_SUCCEEDED"
    not_failed = sluice("retry", doc["id"], *stack.args)
    assert not_failed.code == 1 and "only a FAILED document can be retried" in not_failed.err and one_error_line(not_failed)
    removed = sluice("rm", doc["id"], *stack.args)
    assert removed.code == 0 and f"Deleted {doc['id']}" in removed.out
    gone = sluice("rm", doc["id"], *stack.args)
    assert gone.code == 3 and one_error_line(gone)
    assert sluice("show", doc["id"], *stack.args).code == 3


def test_retry_without_wait_and_rm_json(sluice, stack, tmp_path):
    create(sluice, stack)
    (tmp_path / "bad.txt").write_text("FAIL again")
    doc = upload(sluice, stack, tmp_path / "bad.txt")[0]["document"]
    stack.worker.pause()  # the retried document stays PENDING
    retried = sluice("retry", "bad.txt", *stack.args)
    assert (
        retried.code == 0
        and f"bad.txt ({doc['id']}) is PENDING again" in retried.out
        and f"sluice watch {doc['id']}" in retried.out
    )
    as_json = json.loads(sluice("--json", "retry", "bad.txt", *stack.args).err)["error"]
    assert as_json["exit_code"] == 1 and as_json["reason"] == "DOCUMENT_NOT_FAILED"
    missing = "00000000-0000-0000-0000-000000000000"
    partly = sluice("--json", "rm", doc["id"], missing, *stack.args)
    # The second reference is unknown (exit 3), yet stdout still says what was deleted.
    assert partly.code == 3 and json.loads(partly.err)["error"]["exit_code"] == 3
    assert [d["id"] for d in json.loads(partly.out)["deleted"]] == [doc["id"]]
    assert json.loads(sluice("--json", "ls", *stack.args).out)["documents"] == []


def test_collection_delete_needs_force_when_not_empty(sluice, stack, docs_folder):
    create(sluice, stack)
    upload(sluice, stack, docs_folder)
    refused = sluice("collections", "delete", "docs", *stack.args)
    assert refused.code == 1 and one_error_line(refused)
    forced = sluice("collections", "delete", "docs", "--force", *stack.args)
    assert forced.code == 0 and "Deleted collection docs and 3 document(s)" in forced.out
    missing = sluice("search", "chunks", "-c", "docs", *stack.args)
    assert missing.code == 3 and one_error_line(missing)


# ------------------------------------------------------------------ search


def test_search_prints_document_page_score_and_text(sluice, stack, docs_folder):
    create(sluice, stack)
    upload(sluice, stack, docs_folder)
    result = sluice("search", "hybrid search", "--collection", "docs", "-k", "3", *stack.args)
    assert result.code == 0, result.err
    first = result.out.splitlines()[0]
    assert "gamma.html" in first and "page 1" in first and re.search(r"score \d+\.\d{4}", first), result.out
    assert "Hybrid search fuses" in result.out
    assert re.search(r"\d+ hit\(s\), hybrid search, \d+ ms", result.out)

    keyword = json.loads(sluice("--json", "search", "chunks", "-c", "docs", "--mode", "keyword", *stack.args).out)
    assert keyword["mode"] == "KEYWORD"
    assert {h["filename"] for h in keyword["hits"]} == {"alpha.md", "beta.txt"}
    assert {"score", "text", "document_id", "page_number", "chunk_index"} <= set(keyword["hits"][0])

    vector = json.loads(
        sluice("--json", "search", "leased jobs pgvector", "-c", "docs", "--mode", "vector", "-k", "1", *stack.args).out
    )
    assert vector["mode"] == "VECTOR" and [h["filename"] for h in vector["hits"]] == ["beta.txt"]

    none = sluice("search", "zebra", "-c", "docs", "--mode", "keyword", *stack.args)
    assert none.code == 0 and "No matches in docs" in none.out
    missing = sluice("search", "x", "-c", "nope", *stack.args)
    assert missing.code == 3 and "does not exist" in missing.err and one_error_line(missing)
    empty = sluice("search", "  ", "-c", "docs", *stack.args)
    assert empty.code == 2 and "the query is empty" in empty.err


def test_search_only_finds_ready_documents_and_filters_metadata(sluice, stack, tmp_path):
    create(sluice, stack)
    (tmp_path / "red.txt").write_text("locks and weirs on the river")
    (tmp_path / "blue.txt").write_text("locks and weirs on the canal")
    (tmp_path / "broken.txt").write_text("FAIL locks and weirs")
    upload(sluice, stack, tmp_path / "red.txt", "docs", "-m", "colour=red")
    upload(sluice, stack, tmp_path / "blue.txt", "docs", "-m", "colour=blue")
    upload(sluice, stack, tmp_path / "broken.txt")
    hits = json.loads(sluice("--json", "search", "locks weirs", "-c", "docs", *stack.args).out)["hits"]
    assert {h["filename"] for h in hits} == {"red.txt", "blue.txt"}  # never the FAILED one
    filtered = json.loads(sluice("--json", "search", "locks weirs", "-c", "docs", "--filter", "colour=blue", *stack.args).out)
    assert [h["filename"] for h in filtered["hits"]] == ["blue.txt"]
    assert sluice("search", "locks", "-c", "docs", "--filter", "=x", *stack.args).code == 2
    too_many = sluice("search", "locks", "-c", "docs", "-k", "100000", *stack.args)
    assert too_many.code == 2 and one_error_line(too_many)


# ------------------------------------------------------------------ as a process


def test_server_down_is_exit_4_with_one_readable_line(tmp_path):
    env = {"SLUICE_INGEST_ADDRESS": "127.0.0.1:9", "SLUICE_SEARCH_ADDRESS": "127.0.0.1:9"}
    for args in (["ls"], ["collections", "list"], ["search", "q", "-c", "docs"], ["upload", str(tmp_path), "-c", "docs"]):
        result = run_sluice_process(*args, env=env, timeout=30)
        assert result.code == 4, (args, result)
        assert "cannot reach" in result.err and "127.0.0.1:9" in result.err
        assert one_error_line(result)
    as_json = run_sluice_process("--json", "ls", env=env, timeout=30)
    error = json.loads(as_json.err)["error"]
    assert error["exit_code"] == 4 and error["reason"] == "UNAVAILABLE"


def test_search_down_while_ingest_is_up_is_exit_4(sluice, stack):
    create(sluice, stack)
    result = sluice("search", "q", "-c", "docs", "--ingest-address", stack.ingest, "--search-address", "127.0.0.1:9")
    assert result.code == 4 and "cannot reach search at 127.0.0.1:9" in result.err and one_error_line(result)


def test_usage_errors_exit_2():
    assert run_sluice_process("upload", "x").code == 2  # --collection missing
    assert run_sluice_process("frobnicate").code == 2
    assert run_sluice_process("search", "q", "-c", "docs", "-k", "0").code == 2


def test_flags_work_after_the_subcommand_and_env_sets_addresses(stack):
    env = {"SLUICE_INGEST_ADDRESS": stack.ingest, "SLUICE_SEARCH_ADDRESS": stack.search}
    result = run_sluice_process("collections", "create", "envdocs", "--embedder", "hashing", "--json", env=env)
    assert result.code == 0, result.err
    assert json.loads(result.out)["name"] == "envdocs"
    searched = run_sluice_process("search", "anything", "-c", "envdocs", "--json", env=env)
    assert searched.code == 0, searched.err
    assert json.loads(searched.out)["hits"] == []


def test_sluice_dev_forgets_handles_of_dead_processes(tmp_path):
    from sluice_cli.dev import forget_dead_handles

    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / ".handle_pids.json").write_text(json.dumps([dead.pid, os.getpid()]))
    forget_dead_handles(tmp_path)
    assert json.loads((tmp_path / ".handle_pids.json").read_text()) == [os.getpid()]


def test_sluice_dev_refuses_a_busy_port_with_a_clear_message(tmp_path):
    import socket
    import sys
    from pathlib import Path

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {
            **os.environ,
            "SLUICE_DEV_HOME": str(tmp_path / "home"),
            "SLUICE_DEV_INGEST_PORT": str(port),
            "SLUICE_DEV_HOST": "127.0.0.1",
        }
        result = subprocess.run(
            [str(Path(sys.executable).parent / "sluice-dev")], env=env, capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 1
    assert f"port {port} for ingest-api is in use" in result.stdout and "SLUICE_DEV_INGEST_PORT" in result.stdout
    assert not (tmp_path / "home" / "pg").exists()  # refused before starting anything
