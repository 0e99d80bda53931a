"""The sluice CLI against an in-memory fake of the two services: output, JSON, exit codes.

These run in a few seconds; the same commands against the real services are in
test_e2e_dev.py.
"""

from __future__ import annotations

import json
import os
import subprocess

from sluice_cli.files import request_id

from .conftest import run_sluice_process


def addr(fake) -> list[str]:
    return ["--ingest-address", fake.address, "--search-address", fake.address]


def create(sluice, fake, name="docs", *extra):
    result = sluice("collections", "create", name, "--embedder", "hashing", *extra, *addr(fake))
    assert result.code == 0, result.err
    return result


# ------------------------------------------------------------------ collections


def test_collections_create_list_delete(sluice, fake):
    result = create(sluice, fake, "docs", "--chunk-size", "600", "--overlap", "50")
    assert "Created collection docs" in result.out
    created = fake.collections["docs"]
    assert created.embedder.model == "hashing" and created.embedder.dimensions == 256
    assert created.chunking.max_characters == 600 and created.chunking.overlap == 50
    assert 1 <= created.chunking.new_after_n_chars <= 600

    listed = sluice("collections", "list", *addr(fake))
    assert listed.code == 0 and "docs" in listed.out and "hashing" in listed.out

    as_json = json.loads(sluice("--json", "collections", "list", *addr(fake)).out)
    assert [c["name"] for c in as_json["collections"]] == ["docs"]
    assert as_json["collections"][0]["embedder"]["provider"] == "EMBEDDER_PROVIDER_HASHING"

    deleted = sluice("collections", "delete", "docs", *addr(fake))
    assert deleted.code == 0 and "Deleted collection docs" in deleted.out
    assert sluice("collections", "delete", "docs", *addr(fake)).code == 3


def test_default_embedder_is_the_local_model(sluice, fake):
    assert sluice("collections", "create", "local", *addr(fake)).code == 0
    embedder = fake.collections["local"].embedder
    assert (embedder.model, embedder.dimensions) == ("all-MiniLM-L6-v2", 384)
    assert embedder.provider == 2  # EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS


def test_collection_errors_have_readable_messages_and_codes(sluice, fake):
    create(sluice, fake, "docs")
    again = sluice("collections", "create", "docs", "--embedder", "hashing", *addr(fake))
    assert again.code == 1
    assert "already exists" in again.err and "COLLECTION_EXISTS" in again.err
    bad = sluice("collections", "create", "Bad Name", *addr(fake))
    assert bad.code == 2 and "invalid collection name" in bad.err
    missing = sluice("collections", "show", "nope", *addr(fake))
    assert missing.code == 3 and "does not exist" in missing.err
    assert "Traceback" not in again.err + bad.err + missing.err


def test_custom_model_needs_dimensions(sluice, fake):
    result = sluice("collections", "create", "x", "--embedder", "openai", "--model", "nomic-embed-text", *addr(fake))
    assert result.code == 2 and "--dimensions" in result.err


# ------------------------------------------------------------------ upload


def test_upload_folder_recursive_skips_hidden_and_waits_for_ready(sluice, fake, docs_folder):
    create(sluice, fake)
    result = sluice("upload", docs_folder, "--collection", "docs", *addr(fake))
    assert result.code == 0, result.err
    assert "3 files → collection docs: 3 READY" in result.out
    names = sorted(m.filename for m in fake.uploads)
    assert names == ["alpha.md", "beta.txt", "gamma.html"]
    mime = {m.filename: m.mime_type for m in fake.uploads}
    assert mime["alpha.md"] == "text/markdown" and mime["gamma.html"] == "text/html"
    # One line per finished document on stderr when there is no terminal.
    assert result.err.count("READY") == 3


def test_upload_is_idempotent_by_request_id(sluice, fake, docs_folder):
    create(sluice, fake)
    first = json.loads(sluice("--json", "upload", docs_folder, "-c", "docs", *addr(fake)).out)
    second = json.loads(sluice("--json", "upload", docs_folder, "-c", "docs", *addr(fake)).out)
    ids = lambda r: sorted(x["document"]["id"] for x in r["results"])  # noqa: E731
    assert ids(first) == ids(second)
    assert len(fake.documents) == 3
    request_ids = [m.request_id for m in fake.uploads]
    assert len(set(request_ids)) == 3 and all(0 < len(r) <= 128 for r in request_ids)


def test_request_id_is_stable_and_depends_on_collection_path_and_content(tmp_path):
    path = tmp_path / "a.txt"
    assert request_id("docs", path, "0" * 64) == request_id("docs", path, "0" * 64)
    assert request_id("docs", path, "0" * 64) != request_id("other", path, "0" * 64)
    assert request_id("docs", path, "0" * 64) != request_id("docs", path, "1" * 64)
    assert request_id("docs", path, "0" * 64) != request_id("docs", tmp_path / "b.txt", "0" * 64)


def test_upload_json_summary_and_failed_document_exit_1(sluice, fake, docs_folder):
    create(sluice, fake)
    (docs_folder / "broken.txt").write_text("FAIL: this one cannot be parsed")
    result = sluice("--json", "upload", docs_folder, "--collection", "docs", *addr(fake))
    assert result.code == 1
    summary = json.loads(result.out)
    assert summary["ready"] == 3 and summary["failed"] == 1 and summary["files"] == 4
    failed = [r for r in summary["results"] if r["status"] == "FAILED"]
    assert failed[0]["path"].endswith("broken.txt")
    assert "could not be parsed" in failed[0]["error"]

    human = sluice("upload", docs_folder / "broken.txt", "--collection", "docs", *addr(fake))
    assert human.code == 1
    assert "1 FAILED" in human.out and "could not be parsed" in human.out and "DOCUMENT_CORRUPT" in human.out


def test_upload_no_wait_returns_pending_documents(sluice, fake, docs_folder):
    fake.step_seconds = 5
    create(sluice, fake)
    result = sluice("upload", docs_folder, "--collection", "docs", "--no-wait", *addr(fake))
    assert result.code == 0, result.err
    assert "3 PENDING" in result.out and "sluice ls" in result.out


def test_upload_to_unknown_collection_is_not_found(sluice, fake, docs_folder):
    result = sluice("upload", docs_folder, "--collection", "nope", *addr(fake))
    assert result.code == 3
    assert "collection 'nope' does not exist" in result.err
    assert fake.uploads == []


def test_upload_missing_path_is_a_usage_error(sluice, fake, tmp_path):
    create(sluice, fake)
    result = sluice("upload", tmp_path / "nowhere", "--collection", "docs", *addr(fake))
    assert result.code == 2 and "no such file or directory" in result.err
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".only-hidden").write_text("x")
    result = sluice("upload", empty, "--collection", "docs", *addr(fake))
    assert result.code == 2 and "nothing to upload" in result.err


def test_unreadable_file_is_reported_and_the_rest_still_uploads(sluice, fake, docs_folder):
    create(sluice, fake)
    (docs_folder / "dangling.md").symlink_to(docs_folder / "gone.md")
    if os.geteuid() != 0:  # root reads everything, so only a broken link is unreadable there
        locked = docs_folder / "locked.txt"
        locked.write_text("secret")
        locked.chmod(0)
    result = sluice("upload", docs_folder, "--collection", "docs", *addr(fake))
    assert result.code == 1
    assert "3 READY" in result.out
    assert f"cannot read {docs_folder / 'dangling.md'}: broken symbolic link" in result.out
    if os.geteuid() != 0:
        assert "Permission denied" in result.out
    assert "Traceback" not in result.out + result.err


def test_empty_file_is_refused_with_a_message(sluice, fake, tmp_path):
    create(sluice, fake)
    (tmp_path / "empty.txt").write_text("")
    result = sluice("upload", tmp_path / "empty.txt", "-c", "docs", *addr(fake))
    assert result.code == 1 and "empty.txt is empty" in result.out


# ------------------------------------------------------------------ documents


def upload(sluice, fake, folder) -> list[dict]:
    result = sluice("--json", "upload", folder, "--collection", "docs", *addr(fake))
    return json.loads(result.out)["results"]


def test_ls_pages_through_every_document_and_filters(sluice, fake, tmp_path):
    create(sluice, fake)
    folder = tmp_path / "many"
    folder.mkdir()
    for n in range(7):
        (folder / f"doc{n}.txt").write_text(f"document number {n}")
    upload(sluice, fake, folder)
    fake.max_page_size = 2
    listed = json.loads(sluice("--json", "ls", "--collection", "docs", *addr(fake)).out)
    assert len(listed["documents"]) == 7
    table = sluice("ls", *addr(fake))
    assert table.code == 0 and "doc6.txt" in table.out and "7 document(s): 7 READY" in table.out
    assert json.loads(sluice("--json", "ls", "--status", "failed", *addr(fake)).out)["documents"] == []
    assert len(json.loads(sluice("--json", "ls", "--limit", "3", *addr(fake)).out)["documents"]) == 3
    assert sluice("ls", "--collection", "nope", *addr(fake)).code == 3
    assert sluice("ls", "--status", "bogus", *addr(fake)).code == 2


def test_show_prints_fields_and_attempt_history_with_errors(sluice, fake, tmp_path):
    create(sluice, fake)
    (tmp_path / "bad.txt").write_text("FAIL")
    doc = upload(sluice, fake, tmp_path / "bad.txt")[0]["document"]
    result = sluice("show", doc["id"], *addr(fake))
    assert result.code == 0
    for text in ("bad.txt", "FAILED", "the file could not be parsed", "DOCUMENT_CORRUPT", "attempts", "PERMANENT_FAILURE", "fake-worker"):
        assert text in result.out
    as_json = json.loads(sluice("--json", "show", doc["id"], *addr(fake)).out)
    assert as_json["attempt_history"][0]["outcome"] == "ATTEMPT_OUTCOME_PERMANENT_FAILURE"


def test_document_reference_by_prefix_name_or_resource_name(sluice, fake, docs_folder):
    create(sluice, fake)
    doc = next(r["document"] for r in upload(sluice, fake, docs_folder) if r["document"]["filename"] == "alpha.md")
    for ref in (doc["id"][:8], "alpha.md", doc["name"], doc["id"].upper()):
        result = sluice("--json", "show", ref, *addr(fake))
        assert result.code == 0, (ref, result.err)
        assert json.loads(result.out)["id"] == doc["id"]
    assert sluice("show", "no-such-doc", *addr(fake)).code == 3
    assert sluice("show", "00000000-0000-0000-0000-000000000000", *addr(fake)).code == 3


def test_watch_exit_codes_follow_the_outcome(sluice, fake, tmp_path):
    fake.step_seconds = 0.2
    create(sluice, fake)
    (tmp_path / "good.txt").write_text("fine content")
    (tmp_path / "bad.txt").write_text("FAIL content")
    good = sluice("--json", "upload", tmp_path / "good.txt", "-c", "docs", "--no-wait", *addr(fake))
    bad = sluice("--json", "upload", tmp_path / "bad.txt", "-c", "docs", "--no-wait", *addr(fake))
    good_id = json.loads(good.out)["results"][0]["document"]["id"]
    bad_id = json.loads(bad.out)["results"][0]["document"]["id"]
    watched = sluice("watch", good_id, *addr(fake))
    assert watched.code == 0 and "READY" in watched.out
    assert "PARSING" in watched.err  # the stages as they happen
    events = sluice("--json", "watch", bad_id, *addr(fake))
    assert events.code == 1
    statuses = [json.loads(line)["status"] for line in events.out.splitlines()]
    assert statuses[-1] == "DOCUMENT_STATUS_FAILED"


def test_retry_and_rm(sluice, fake, tmp_path):
    create(sluice, fake)
    (tmp_path / "bad.txt").write_text("FAIL")
    doc = upload(sluice, fake, tmp_path / "bad.txt")[0]["document"]
    retried = sluice("retry", doc["id"], "--wait", *addr(fake))
    assert retried.code == 0 and "READY" in retried.out
    not_failed = sluice("retry", doc["id"], *addr(fake))
    assert not_failed.code == 1 and "only a FAILED document can be retried" in not_failed.err
    removed = sluice("rm", doc["id"], *addr(fake))
    assert removed.code == 0 and f"Deleted {doc['id']}" in removed.out
    assert sluice("rm", doc["id"], *addr(fake)).code == 3


# ------------------------------------------------------------------ search


def test_search_prints_document_page_score_and_text(sluice, fake, docs_folder):
    create(sluice, fake)
    upload(sluice, fake, docs_folder)
    result = sluice("search", "hybrid search", "--collection", "docs", "-k", "3", *addr(fake))
    assert result.code == 0, result.err
    assert "gamma.html" in result.out and "Hybrid search fuses" in result.out
    assert "page 1" in result.out and "score 1.0000" in result.out
    hits = json.loads(sluice("--json", "search", "chunks", "-c", "docs", "--mode", "keyword", *addr(fake)).out)
    assert hits["mode"] == "KEYWORD"
    assert {h["filename"] for h in hits["hits"]} == {"alpha.md", "beta.txt"}
    assert {"score", "text", "document_id", "page_number"} <= set(hits["hits"][0])
    assert "No matches" in sluice("search", "zebra", "-c", "docs", *addr(fake)).out
    missing = sluice("search", "x", "-c", "nope", *addr(fake))
    assert missing.code == 3 and "does not exist" in missing.err


# ------------------------------------------------------------------ as a process


def test_server_down_is_exit_4_with_one_readable_line(tmp_path):
    env = {"SLUICE_INGEST_ADDRESS": "127.0.0.1:9", "SLUICE_SEARCH_ADDRESS": "127.0.0.1:9"}
    for args in (["ls"], ["collections", "list"], ["search", "q", "-c", "docs"], ["upload", str(tmp_path), "-c", "docs"]):
        result = run_sluice_process(*args, env=env, timeout=30)
        assert result.code == 4, (args, result)
        assert "cannot reach" in result.err and "127.0.0.1:9" in result.err
        assert "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1
    as_json = run_sluice_process("--json", "ls", env=env, timeout=30)
    error = json.loads(as_json.err)["error"]
    assert error["exit_code"] == 4 and error["reason"] == "UNAVAILABLE"


def test_usage_errors_exit_2():
    assert run_sluice_process("upload", "x").code == 2  # --collection missing
    assert run_sluice_process("frobnicate").code == 2
    assert run_sluice_process("search", "q", "-c", "docs", "-k", "0").code == 2


def test_flags_work_after_the_subcommand_and_env_sets_addresses(fake):
    create_env = {"SLUICE_INGEST_ADDRESS": fake.address}
    result = run_sluice_process("collections", "create", "envdocs", "--embedder", "hashing", "--json", env=create_env)
    assert result.code == 0, result.err
    assert json.loads(result.out)["name"] == "envdocs"


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
        env = {**os.environ, "SLUICE_DEV_HOME": str(tmp_path / "home"), "SLUICE_DEV_INGEST_PORT": str(port), "SLUICE_DEV_HOST": "127.0.0.1"}
        result = subprocess.run([str(Path(sys.executable).parent / "sluice-dev")], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"port {port} for ingest-api is in use" in result.stdout and "SLUICE_DEV_INGEST_PORT" in result.stdout
    assert not (tmp_path / "home" / "pg").exists()  # refused before starting anything
