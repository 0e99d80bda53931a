"""The plan of `documents.sync_folder` (sluice_client/sync.py) on hand-made listings, no server:
what is unchanged, uploaded or gone, and the mass-delete guard (docs/clients.md#syncing-a-folder)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sluice_client import MassDeleteRefused, uploads
from sluice_client.protos import document_pb2
from sluice_client.sync import check_mass_delete, folder_files, hash_file, plan
from sluice_client.types import Document

READY, FAILED = document_pb2.DOCUMENT_STATUS_READY, document_pb2.DOCUMENT_STATUS_FAILED


def doc(source_uri: str, sha256: str, version: int = 1, status: int = READY) -> Document:
    return Document.from_proto(
        document_pb2.Document(
            id=f"{source_uri}-{version}", source_uri=source_uri, content_sha256=sha256, version=version, status=status
        )
    )


def test_files_are_named_by_their_relative_path_and_hidden_ones_skipped(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c.txt").write_text("c")
    (tmp_path / "top.md").write_text("t")
    (tmp_path / ".env").write_text("secret")
    assert set(folder_files(tmp_path)) == {"a/b/c.txt", "top.md"}
    assert set(folder_files(tmp_path, include_hidden=True)) == {"a/b/c.txt", "top.md", ".env"}
    assert uploads.source_uri_of(tmp_path / "top.md", [tmp_path / "elsewhere"]) == "top.md"  # named directly
    with pytest.raises(NotADirectoryError):
        folder_files(tmp_path / "top.md")


def test_the_plan_compares_with_the_newest_live_version_and_ignores_plain_uploads(tmp_path):
    files = {name: tmp_path / name for name in ["same", "changed", "new", "back", "failed", "empty"]}
    hashes = {
        "same": ("h1", ""),
        "changed": ("h2-new", ""),
        "new": ("h3", ""),
        "back": ("h4", ""),
        "failed": ("h5", ""),
        "empty": ("", "empty is empty: nothing to index"),
    }
    listed = [
        doc("same", "h1"),
        doc("changed", "h2"),
        doc("back", "h4", 1),
        doc("back", "h4-next", 2),
        doc("failed", "h5", 2, FAILED),
        doc("failed", "h5-old", 1),
        doc("gone", "h6"),
        doc("", "plain"),
    ]
    result = plan(files, hashes, listed)
    assert result.unchanged == ["same"]
    assert [(u.source_uri, u.new) for u in result.uploads] == [("changed", False), ("new", True), ("back", False)]
    assert [(f.source_uri, f.document is not None) for f in result.failed] == [("failed", True), ("empty", False)]
    assert result.gone == ["gone"] and result.sources == 5  # the plain upload is neither a source nor gone


def test_the_guard_refuses_more_than_the_share_of_sources():
    listed = [doc(f"f{i}", "h") for i in range(20)]
    files = {f"f{i}": Path(f"f{i}") for i in range(16)}
    four_gone = plan(files, dict.fromkeys(files, ("h", "")), listed)
    check_mass_delete("docs", four_gone, 0.2)  # 4 of 20 is not more than 20 %
    with pytest.raises(MassDeleteRefused) as refused:
        check_mass_delete("docs", four_gone, 0.1)
    assert (refused.value.would_delete, refused.value.sources, refused.value.reason) == (4, 20, "MASS_DELETE_REFUSED")
    assert "allow_mass_delete" in refused.value.message


def test_a_few_deletions_pass_the_guard_but_never_all_of_the_sources():
    listed = [doc(f"f{i}", "h") for i in range(3)]
    one_gone = plan({"f0": Path("f0"), "f1": Path("f1")}, {"f0": ("h", ""), "f1": ("h", "")}, listed)
    check_mass_delete("docs", one_gone, 0.2)  # 1 of 3 is 33 %, but no more than MASS_DELETE_FLOOR
    everything_gone = plan({}, {}, listed)
    with pytest.raises(MassDeleteRefused) as refused:
        check_mass_delete("docs", everything_gone, 0.2)  # an empty (unmounted?) folder: never without asking
    assert (refused.value.would_delete, refused.value.sources) == (3, 3)


def test_an_empty_or_unreadable_file_is_a_failure_not_an_upload(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert hash_file("empty", tmp_path / "empty")[2].endswith("is empty: nothing to index")
    assert "cannot read" in hash_file("missing", tmp_path / "missing")[2]
