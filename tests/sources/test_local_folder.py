"""Sources of kind LOCAL_FOLDER, end to end: a real ingest-api (SourceService), the real runner
over the test's PostgreSQL, real files (docs/sources.md)."""

from __future__ import annotations

import grpc
import pytest
from helpers import expect_error
from sluice.v1 import source_service_pb2 as src

from .helpers import Sources, live_documents, run_pending


def write(folder, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_folder_is_synced_and_a_second_sync_of_it_unchanged_uploads_nothing(api, root, database_url):
    s = Sources(api.address)
    s.clients.create_collection("docs")
    handbook = root / "handbook"
    write(handbook, {"a.md": "# alpha\namber signal", "b.txt": "bravo", "sub/c.txt": "charlie", ".hidden": "no"})
    source = s.create_folder("docs", str(handbook), display_name="handbook")
    assert source.name == f"collections/docs/sources/{source.id}"
    assert source.kind == src.SOURCE_KIND_LOCAL_FOLDER and source.local_folder.path == str(handbook)
    assert source.max_delete_share == pytest.approx(0.2)

    run = s.sync(source)
    assert run.state == src.SOURCE_RUN_STATE_PENDING
    assert s.sync(source).id == run.id  # one active run per source: asking again returns it
    assert run_pending(database_url, source_local_roots=str(root)) == 1
    first = s.last_run(source)
    assert first.id == run.id and first.state == src.SOURCE_RUN_STATE_SUCCEEDED, first.error_message
    assert (first.listed, first.uploaded, first.unchanged, first.deleted, first.failed) == (3, 3, 0, 0, 0)
    assert first.attempts == 1 and first.HasField("end_time")
    live = live_documents(database_url)
    assert sorted(live) == ["a.md", "b.txt", "sub/c.txt"] and all(len(v) == 1 for v in live.values())

    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    second = s.last_run(source)
    assert second.state == src.SOURCE_RUN_STATE_SUCCEEDED
    assert (second.listed, second.uploaded, second.unchanged, second.deleted) == (3, 0, 3, 0)
    assert live_documents(database_url) == live

    # An edit, a removal and a new file: a new version, a deletion, a new document.
    write(handbook, {"a.md": "# alpha\nviolet signal", "d.txt": "delta"})
    (handbook / "b.txt").unlink()
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    third = s.last_run(source)
    assert (third.state, third.listed, third.uploaded, third.unchanged, third.deleted) == (
        src.SOURCE_RUN_STATE_SUCCEEDED,
        3,
        2,
        1,
        1,
    )
    after = live_documents(database_url)
    assert sorted(after) == ["a.md", "d.txt", "sub/c.txt"]
    assert [v for v, _ in after["a.md"]] == [1, 2]  # version 2 pending beside the serving version 1

    runs = s.stub.ListSourceRuns(src.ListSourceRunsRequest(name=source.name)).runs
    assert [r.id for r in runs][-1] == run.id and len(runs) == 3


def test_a_document_deleted_by_hand_is_uploaded_again_and_the_glob_filters(api, root, database_url):
    s = Sources(api.address)
    s.clients.create_collection("docs")
    write(root / "f", {"keep.md": "k", "skip.txt": "s", "deep/er/x.md": "x"})
    source = s.create_folder("docs", str(root / "f"), glob="**/*.md")
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    assert sorted(live_documents(database_url)) == ["deep/er/x.md", "keep.md"]
    s.clients.docs.DeleteDocument(
        __import__("sluice.v1.document_service_pb2", fromlist=["x"]).DeleteDocumentRequest(
            collection="docs", source_uri="keep.md"
        )
    )
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    run = s.last_run(source)
    assert (run.uploaded, run.unchanged) == (1, 1)
    assert sorted(live_documents(database_url)) == ["deep/er/x.md", "keep.md"]


def test_a_sync_that_would_delete_too_much_stops_until_allowed(api, root, database_url):
    s = Sources(api.address)
    s.clients.create_collection("docs")
    folder = root / "many"
    write(folder, {f"{i:02}.txt": f"file {i}" for i in range(10)})
    source = s.create_folder("docs", str(folder))
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    for i in range(6):
        (folder / f"{i:02}.txt").unlink()
    write(folder, {"new.txt": "new"})
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    blocked = s.last_run(source)
    assert blocked.state == src.SOURCE_RUN_STATE_BLOCKED_MASS_DELETE
    assert blocked.would_delete == 6 and blocked.uploaded == 0 and blocked.deleted == 0
    assert "would delete 6" in blocked.error_message and "allow_mass_delete" in blocked.error_message
    assert len(live_documents(database_url)) == 10  # nothing deleted, nothing uploaded

    s.sync(source, allow_mass_delete=True)
    run_pending(database_url, source_local_roots=str(root))
    allowed = s.last_run(source)
    assert allowed.state == src.SOURCE_RUN_STATE_SUCCEEDED and allowed.allow_mass_delete
    assert (allowed.deleted, allowed.uploaded) == (6, 1)
    assert sorted(live_documents(database_url)) == ["06.txt", "07.txt", "08.txt", "09.txt", "new.txt"]

    # An emptied folder (an unmounted disk looks the same) always asks, whatever the share.
    for path in folder.iterdir():
        path.unlink()
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    assert s.last_run(source).state == src.SOURCE_RUN_STATE_BLOCKED_MASS_DELETE
    assert len(live_documents(database_url)) == 5


def test_documents_of_other_sources_and_plain_uploads_are_never_deleted(api, root, database_url):
    s = Sources(api.address)
    s.clients.create_collection("docs")
    write(root / "one", {"a.txt": "one a", "b.txt": "one b"})
    write(root / "two", {"z.txt": "two z"})
    one, two = s.create_folder("docs", str(root / "one")), s.create_folder("docs", str(root / "two"))
    s.clients.upload("docs", b"a plain upload", "plain.txt")
    s.sync(one), s.sync(two)
    assert run_pending(database_url, source_local_roots=str(root)) == 2
    (root / "one" / "b.txt").unlink()
    s.sync(one)
    run_pending(database_url, source_local_roots=str(root))
    assert s.last_run(one).deleted == 1
    assert sorted(k for k in live_documents(database_url) if k) == ["a.txt", "z.txt"]
    assert None in live_documents(database_url)  # the plain upload stays


def test_every_field_is_validated_and_the_server_is_not_readable(api, root):
    s = Sources(api.address)
    s.clients.create_collection("docs")
    (root / "ok").mkdir()
    (root / "escape").symlink_to("/etc")
    create = s.stub.CreateSource
    cases = [
        (src.Source(collection="docs"), "INVALID_SOURCE", "kind is required"),
        (src.Source(collection="docs", local_folder=src.LocalFolderSource(path="relative/path")), "INVALID_SOURCE", "absolute"),
        (src.Source(collection="docs", local_folder=src.LocalFolderSource(path="/etc")), "SOURCE_NOT_ALLOWED", "not under"),
        (
            src.Source(collection="docs", local_folder=src.LocalFolderSource(path=str(root / "escape"))),
            "SOURCE_NOT_ALLOWED",
            "not under",
        ),
        (
            src.Source(collection="docs", local_folder=src.LocalFolderSource(path=str(root / "ok" / ".." / ".."))),
            "SOURCE_NOT_ALLOWED",
            "not under",
        ),
        (
            src.Source(collection="docs", local_folder=src.LocalFolderSource(path=str(root / "missing"))),
            "INVALID_SOURCE",
            "not an existing folder",
        ),
        (
            src.Source(collection="docs", local_folder=src.LocalFolderSource(path=str(root / "ok"), glob="../*")),
            "INVALID_SOURCE",
            "'..'",
        ),
        (
            src.Source(collection="docs", local_folder=src.LocalFolderSource(path=str(root / "ok")), schedule_interval_seconds=5),
            "INVALID_SOURCE",
            "schedule",
        ),
        (
            src.Source(collection="docs", local_folder=src.LocalFolderSource(path=str(root / "ok")), max_delete_share=1.5),
            "INVALID_SOURCE",
            "max_delete_share",
        ),
        (src.Source(collection="docs", s3=src.S3Source(endpoint="ftp://x", bucket="b-1")), "INVALID_SOURCE", "http or https"),
        (
            src.Source(collection="docs", s3=src.S3Source(endpoint="https://s3.example.com", bucket="B!")),
            "INVALID_SOURCE",
            "bucket",
        ),
        (
            src.Source(
                collection="docs",
                s3=src.S3Source(
                    endpoint="https://s3.example.com",
                    bucket="bkt",
                    access_key_id_env="AKIA/secret+value",
                    secret_access_key_env="X",
                ),
            ),
            "INVALID_SOURCE",
            "environment variable",
        ),
        (
            src.Source(collection="docs", s3=src.S3Source(endpoint="https://user:pw@s3.example.com", bucket="bkt")),
            "INVALID_SOURCE",
            "credentials",
        ),
        (src.Source(collection="docs", http=src.HttpSource()), "INVALID_SOURCE", "exactly one"),
        (
            src.Source(collection="docs", http=src.HttpSource(start_url="https://example.com", max_pages=20000)),
            "INVALID_SOURCE",
            "max_pages",
        ),
        (src.Source(collection="docs", git=src.GitSource(repository="/etc")), "SOURCE_NOT_ALLOWED", "not under"),
        (
            src.Source(collection="docs", git=src.GitSource(repository="https://example.com/r.git", ref="--upload-pack=x")),
            "INVALID_SOURCE",
            "ref",
        ),
        (
            src.Source(collection="docs", git=src.GitSource(repository="https://example.com/r.git", subpath="../x")),
            "INVALID_SOURCE",
            "'..'",
        ),
    ]
    for source, reason, words in cases:
        error = expect_error(
            lambda source=source: create(src.CreateSourceRequest(source=source)), grpc.StatusCode.INVALID_ARGUMENT, reason
        )
        assert words in error.details(), error.details()
        assert "/etc" not in error.details() or "path" in words
    missing = expect_error(lambda: s.create_folder("nope", str(root / "ok")), grpc.StatusCode.NOT_FOUND, "COLLECTION_NOT_FOUND")
    assert "nope" in missing.details()


def test_private_addresses_and_local_folders_need_the_operators_settings(ingest_api_factory, root):
    api = ingest_api_factory()  # no roots, private networks refused: the defaults
    s = Sources(api.address)
    s.clients.create_collection("docs")
    error = expect_error(lambda: s.create_folder("docs", str(root)), grpc.StatusCode.INVALID_ARGUMENT, "SOURCE_NOT_ALLOWED")
    assert "SLUICE_SOURCE_LOCAL_ROOTS" in error.details()
    for source in (
        src.Source(collection="docs", http=src.HttpSource(start_url="http://127.0.0.1:9/")),
        src.Source(collection="docs", s3=src.S3Source(endpoint="http://169.254.169.254", bucket="bkt")),
        src.Source(collection="docs", git=src.GitSource(repository="http://10.0.0.1/r.git")),
        src.Source(collection="docs", http=src.HttpSource(sitemap_url="http://localhost:9/sitemap.xml")),
    ):
        error = expect_error(
            lambda source=source: s.stub.CreateSource(src.CreateSourceRequest(source=source)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "SOURCE_NOT_ALLOWED",
        )
        assert "SLUICE_SOURCE_ALLOW_PRIVATE_NETWORKS" in error.details()


def test_items_the_upload_refuses_are_counted_failed_and_the_run_goes_on(api, root, database_url):
    s = Sources(api.address)
    s.clients.create_collection("docs")
    write(root / "mixed", {"a-ok.txt": "fine", "b-big.txt": "x" * 500, "c-empty.txt": ""})
    source = s.create_folder("docs", str(root / "mixed"))
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root), max_upload_bytes=100)
    run = s.last_run(source)
    assert run.state == src.SOURCE_RUN_STATE_SUCCEEDED
    assert (run.listed, run.uploaded, run.failed) == (3, 1, 2)
    assert run.error_message == "b-big.txt: larger than the upload limit of 100 bytes"
    assert sorted(live_documents(database_url)) == ["a-ok.txt"]
