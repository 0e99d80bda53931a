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
