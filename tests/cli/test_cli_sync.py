"""`sluice sync DIR --collection NAME [--delete]` and the SDK's `documents.sync_folder`
(docs/cli.md, "sync"; docs/clients.md; docs/architecture.md#document-versions), against the real
services with the ScriptedWorker."""

from __future__ import annotations

import json

import auth_keys
import pytest
from sluice_client import Client, MassDeleteRefused

FILES = {
    "alpha.md": "Alpha notes about leases and heartbeats.",
    "beta.txt": "Beta notes about the embedding queue.",
    "gamma.txt": "Gamma notes about keyword search.",
    "delta.txt": "Delta notes about retention.",
    "sub/notes.txt": "The night shift logs the amber signal.",
    "sub/deep/epsilon.txt": "Epsilon notes about fencing tokens.",
}


@pytest.fixture
def synced(sluice, stack, tmp_path):
    """A collection `docs` with one plain upload, and a folder of FILES synced into it once."""
    assert sluice("collections", "create", "docs", "--embedder", "hashing", *stack.args).code == 0
    folder = tmp_path / "corpus"
    for name, text in FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / ".hidden.txt").write_text("never synced")
    plain = tmp_path / "plain.txt"
    plain.write_text("A plain upload without a source, about the amber lantern.")
    assert sluice("upload", plain, "-c", "docs", *stack.args).code == 0
    first = sync(sluice, stack, folder)
    assert first["counts"] == {"new": 6, "updated": 0, "unchanged": 0, "deleted": 0, "failed": 0}, first
    assert first["exit_code"] == 0
    return folder


def sync(sluice, stack, folder, *extra: str, code: int = 0) -> dict:
    result = sluice("--json", "sync", folder, "-c", "docs", *extra, *stack.args)
    assert result.code == code, (result.out, result.err)
    return {**(json.loads(result.out) if result.out.strip() else {}), "err": result.err}


def client(stack) -> Client:
    return Client(stack.ingest, search_address=stack.search, api_key=auth_keys.KEYS["client"])


def live(stack) -> dict[str, tuple[str, int]]:
    """source_uri (or "plain:" + filename) -> (document id, version) of every live document."""
    with client(stack) as c:
        return {d.source_uri or f"plain:{d.filename}": (d.id, d.version) for d in c.documents.list("docs")}


def found(stack, query: str) -> list[str]:
    with client(stack) as c:
        return [hit.text for hit in c.search("docs", query, mode="keyword", top_k=20)]


def test_the_first_sync_uploads_every_file_named_by_its_relative_path(synced, stack):
    documents = live(stack)
    assert set(documents) == {*FILES, "plain:plain.txt"}  # a subfolder's path is its source_uri; hidden files skipped
    assert all(version == 1 for uri, (_, version) in documents.items() if not uri.startswith("plain:"))


def test_a_second_sync_of_an_unchanged_folder_uploads_nothing(synced, sluice, stack):
    before = live(stack)
    processed = len(stack.worker.processed)
    again = sync(sluice, stack, synced)
    assert again["counts"] == {"new": 0, "updated": 0, "unchanged": 6, "deleted": 0, "failed": 0}
    assert live(stack) == before  # the same documents, no new version
    assert len(stack.worker.processed) == processed  # and nothing was processed again


def test_an_edited_file_is_one_new_version_and_search_serves_only_the_new_text(synced, sluice, stack):
    assert any("amber signal" in text for text in found(stack, "amber"))
    before = live(stack)
    (synced / "sub" / "notes.txt").write_text("The night shift logs the violet signal.")
    result = sluice("sync", synced, "-c", "docs", *stack.args)  # the human summary
    assert result.code == 0, result.err
    assert f"{synced} → collection docs: 0 new, 1 updated, 5 unchanged, 0 deleted" in " ".join(result.out.split())

    after = live(stack)
    assert after["sub/notes.txt"][1] == 2 and after["sub/notes.txt"][0] != before["sub/notes.txt"][0]
    assert {k: v for k, v in after.items() if k != "sub/notes.txt"} == {k: v for k, v in before.items() if k != "sub/notes.txt"}
    assert any("violet signal" in text for text in found(stack, "violet"))
    amber = found(stack, "amber")
    assert not any("amber signal" in text for text in amber)
    assert any("amber lantern" in text for text in amber)  # the plain upload is untouched


def test_a_removed_file_stays_without_delete_and_goes_with_it(synced, sluice, stack):
    (synced / "delta.txt").unlink()
    kept = sync(sluice, stack, synced)
    assert kept["counts"]["deleted"] == 0 and kept["kept"] == ["delta.txt"]
    assert "delta.txt" in live(stack)

    deleted = sync(sluice, stack, synced, "--delete")
    assert deleted["counts"] == {"new": 0, "updated": 0, "unchanged": 5, "deleted": 1, "failed": 0}
    assert deleted["deleted"] == ["delta.txt"]
    documents = live(stack)
    assert "delta.txt" not in documents and "plain:plain.txt" in documents
    assert not any("Delta notes" in text for text in found(stack, "retention"))


def test_a_mass_deletion_is_refused_until_allowed_and_plain_uploads_are_never_deleted(synced, sluice, stack):
    for name in ["alpha.md", "beta.txt", "gamma.txt", "sub/deep/epsilon.txt"]:
        (synced / name).unlink()
    (synced / "sub" / "notes.txt").write_text("The night shift logs the violet signal.")
    before = live(stack)
    refused = sync(sluice, stack, synced, "--delete", code=1)
    assert "refusing to delete 4 of the 6 sources" in refused["err"] and "--allow-mass-delete" in refused["err"]
    assert live(stack) == before  # nothing deleted, nothing uploaded

    allowed = sync(sluice, stack, synced, "--delete", "--allow-mass-delete")
    assert allowed["counts"] == {"new": 0, "updated": 1, "unchanged": 1, "deleted": 4, "failed": 0}
    documents = live(stack)
    assert set(documents) == {"sub/notes.txt", "delta.txt", "plain:plain.txt"}
    assert documents["sub/notes.txt"][1] == 2


def test_the_sdk_refuses_a_mass_deletion_with_the_counts(synced, stack):
    for name in FILES:
        (synced / name).unlink()
    with client(stack) as c:
        with pytest.raises(MassDeleteRefused) as refused:
            c.documents.sync_folder("docs", synced, delete=True)
        assert (refused.value.would_delete, refused.value.sources) == (6, 6)
        assert sorted(refused.value.source_uris) == sorted(FILES)
        with pytest.raises(MassDeleteRefused):  # an empty folder always asks, whatever the share
            c.documents.sync_folder("docs", synced, delete=True, max_delete_share=1.0)
        report = c.documents.sync_folder("docs", synced, delete=True, allow_mass_delete=True)
    assert report.counts["deleted"] == 6 and report.ok
    assert set(live(stack)) == {"plain:plain.txt"}


def test_a_failed_version_is_reported_and_exits_1_while_the_current_one_serves(synced, sluice, stack):
    (synced / "beta.txt").write_text("Beta notes, now FAIL on the first processing.")
    failed = sync(sluice, stack, synced, code=1)
    assert failed["counts"] == {"new": 0, "updated": 0, "unchanged": 5, "deleted": 0, "failed": 1}
    again = sync(sluice, stack, synced, code=1)  # unchanged since it failed: still reported, not sent again
    assert again["counts"]["failed"] == 1 and again["failures"][0]["source_uri"] == "beta.txt"
    assert "retry" in again["failures"][0]["error"]
    assert any("Beta notes about the embedding queue" in text for text in found(stack, "embedding queue"))
