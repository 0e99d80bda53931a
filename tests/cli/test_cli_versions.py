"""`sluice upload --source-uri-from-path`, `sluice show/rm --source-uri` and the SDK's
source_uri (docs/cli.md, docs/clients.md; docs/architecture.md#document-versions), against the
real services with the ScriptedWorker."""

from __future__ import annotations

import json

import auth_keys
from sluice_client import Client


def test_a_changed_file_uploaded_again_is_a_new_version_that_replaces_the_old(sluice, stack, tmp_path):
    assert sluice("collections", "create", "docs", "--embedder", "hashing", *stack.args).code == 0
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "notes.txt").write_text("logs the amber signal")
    (folder / "other.txt").write_text("logs the amber signal")  # the same bytes under another path
    first = sluice("--json", "upload", folder, "-c", "docs", "--source-uri-from-path", *stack.args)
    assert first.code == 0, first.err
    (folder / "sub" / "notes.txt").write_text("logs the violet signal")
    second = sluice("--json", "upload", folder, "-c", "docs", "--source-uri-from-path", *stack.args)
    assert second.code == 0, second.err

    shown = sluice("--json", "show", "-c", "docs", "--source-uri", "sub/notes.txt", *stack.args)
    assert shown.code == 0, shown.err
    doc = json.loads(shown.out)
    assert doc["source_uri"] == "sub/notes.txt" and doc["version"] == 2 and doc["status"] == "DOCUMENT_STATUS_READY"
    assert [v["state"] for v in doc["versions"]["history"]] == ["VERSION_STATE_CURRENT", "VERSION_STATE_REPLACED"]
    with Client(stack.ingest, api_key=auth_keys.KEYS["client"]) as client:
        listed = list(client.documents.list("docs"))
        assert sorted((d.source_uri, d.version) for d in listed) == [("other.txt", 1), ("sub/notes.txt", 2)]
        assert client.documents.get(collection="docs", source_uri="other.txt").version == 1
        again = client.documents.upload("docs", b"logs the violet signal", filename="notes.txt", source_uri="sub/notes.txt")
        assert again.id == doc["id"]  # the same content again is not a new version

    removed = sluice("rm", "-c", "docs", "--source-uri", "sub/notes.txt", *stack.args)
    assert removed.code == 0, removed.err
    missing = sluice("show", "-c", "docs", "--source-uri", "sub/notes.txt", *stack.args)
    assert missing.code != 0
    assert sluice("rm", *stack.args).code != 0  # neither documents nor --source-uri


def test_show_by_source_uri_prints_the_failed_version_and_the_history(sluice, stack, tmp_path):
    """A user who runs `sluice show` (no --json) after a new version failed sees it: the
    version served, the failed one with its error, and the history (issue 20: the failure is
    visible on the document)."""
    assert sluice("collections", "create", "docs", "--embedder", "hashing", *stack.args).code == 0
    notes = tmp_path / "notes.txt"
    notes.write_text("logs the amber signal")
    assert sluice("upload", notes, "-c", "docs", "--source-uri-from-path", *stack.args).code == 0
    notes.write_text("logs the violet signal")
    assert sluice("upload", notes, "-c", "docs", "--source-uri-from-path", *stack.args).code == 0
    notes.write_text("logs the FAIL signal")  # the ScriptedWorker fails this content permanently
    assert sluice("upload", notes, "-c", "docs", "--source-uri-from-path", *stack.args).code != 0

    shown = sluice("show", "-c", "docs", "--source-uri", "notes.txt", *stack.args)
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert any(line.split()[:2] == ["source", "uri"] and line.split()[-1] == "notes.txt" for line in lines), shown.out
    assert any(line.split() == ["version", "2"] for line in lines), shown.out
    titles = [line.strip() for line in lines]
    assert "versions" in titles, shown.out
    after = lines[titles.index("versions") :]
    rows = {line.split()[0]: line for line in after if line.split() and line.split()[0].isdigit()}
    assert sorted(rows) == ["1", "2", "3"], shown.out
    assert "CURRENT" in rows["2"] and "READY" in rows["2"]
    assert "FAILED" in rows["3"] and "FAIL" in rows["3"]
    assert "REPLACED" in rows["1"]


def test_upload_with_a_source_uri_names_one_file_and_its_next_content_is_a_new_version(sluice, stack, tmp_path):
    """`sluice upload FILE --source-uri URI`: the document is named by the URL it has in its source,
    whatever the local file is called; other content under the same URI is version 2."""
    assert sluice("collections", "create", "docs", "--embedder", "hashing", *stack.args).code == 0
    uri = "https://wiki.example.com/runbooks/night-shift"
    first, second = tmp_path / "export-1.txt", tmp_path / "export-2.txt"
    first.write_text("logs the amber signal")
    second.write_text("logs the violet signal")
    assert sluice("upload", first, "-c", "docs", "--source-uri", uri, *stack.args).code == 0
    assert sluice("upload", second, "-c", "docs", "--source-uri", uri, *stack.args).code == 0

    shown = sluice("--json", "show", "-c", "docs", "--source-uri", uri, *stack.args)
    assert shown.code == 0, shown.err
    doc = json.loads(shown.out)
    assert (doc["source_uri"], doc["version"], doc["filename"]) == (uri, 2, "export-2.txt")
    with Client(stack.ingest, api_key=auth_keys.KEYS["client"]) as client:
        assert [(d.source_uri, d.version) for d in client.documents.list("docs")] == [(uri, 2)]

    # One file only, and not beside --source-uri-from-path: nothing is sent.
    assert sluice("upload", first, second, "-c", "docs", "--source-uri", uri, *stack.args).code == 2
    assert sluice("upload", tmp_path, "-c", "docs", "--source-uri", uri, *stack.args).code == 2
    both = sluice("upload", first, "-c", "docs", "--source-uri", uri, "--source-uri-from-path", *stack.args)
    assert both.code == 2 and "--source-uri" in both.err
