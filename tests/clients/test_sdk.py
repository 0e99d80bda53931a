"""The Python SDK (clients/python) against the real services: typed results, uploads that never
duplicate, pages, errors with code and reason, retries by RetryInfo and after UNAVAILABLE."""

from __future__ import annotations

import collections
import io
import threading

import auth_keys
import grpc
import psycopg
import pytest
from helpers import free_port
from sluice_client import (
    Client,
    ConnectionFailed,
    Document,
    DocumentStatus,
    NotFound,
    SearchMode,
    UploadSourceError,
    WaitTimeout,
)


def stored(database_url: str) -> list[tuple]:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT filename, request_id, size_bytes, content_sha256 FROM documents ORDER BY filename").fetchall()


def test_upload_wait_search_as_typed_results(client, services, tmp_path):
    collection = client.collections.create("docs", embedder="hashing")
    assert (collection.name, collection.embedder.dimensions, collection.document_count) == ("docs", 256, 0)
    path = tmp_path / "leases.md"
    path.write_text("# Leases\n\nA lease expires when the worker stops renewing it.\n")
    doc = client.documents.upload("docs", path)
    assert isinstance(doc, Document) and doc.status is DocumentStatus.PENDING and doc.filename == "leases.md"
    assert doc.mime_type == "text/markdown" and doc.size_bytes == path.stat().st_size
    ready = client.documents.wait(doc.id, timeout=60)
    assert ready.ready and ready.chunk_count == 2 and ready.create_time is not None
    hits = client.search("docs", "how do leases expire", top_k=5)
    assert hits.mode is SearchMode.HYBRID and len(hits) >= 1
    assert hits[0].filename == "leases.md" and "lease expires" in " ".join(h.text for h in hits)
    assert hits[0].document_id == doc.id and hits[0].page_number == 1 and hits[0].score > 0
    keyword = client.search("docs", "renewing", mode="keyword", where=["lang not-exists"])
    assert [h.chunk_index for h in keyword] == [1]


def test_uploads_send_size_hash_and_request_id_so_a_repeat_never_duplicates(client, services, tmp_path):
    client.collections.create("docs", embedder="hashing")
    services.worker.pause()
    path = tmp_path / "a.txt"
    path.write_text("the same bytes")
    first = client.documents.upload("docs", path)
    again = client.documents.upload("docs", path)  # as a retry would send it: same request_id
    as_bytes = client.documents.upload(
        "docs",
        b"other bytes",
        filename="b.txt",
        metadata={"team": "x"},
        typed_metadata={"year": 2024, "draft": False, "tags": ["a", "b"]},
    )
    as_file = client.documents.upload("docs", io.BytesIO(b"from a file object"), filename="c.txt")
    assert first.id == again.id and len({first.id, as_bytes.id, as_file.id}) == 3
    assert as_bytes.metadata["team"] == "x" and as_bytes.typed_metadata == {
        "team": "x",
        "year": 2024.0,
        "draft": False,
        "tags": ["a", "b"],
    }
    rows = stored(services.database_url)
    assert [r[0] for r in rows] == ["a.txt", "b.txt", "c.txt"]
    assert all(r[1].startswith("py-") and r[2] > 0 and len(r[3]) == 64 for r in rows)


def test_a_source_that_changes_while_sent_stores_nothing(client, services):
    client.collections.create("docs", embedder="hashing")

    class Shifty(io.BytesIO):
        """Reads differently the second time (after the SDK hashed it)."""

        reads = 0

        def seek(self, *args):
            Shifty.reads += 1
            if Shifty.reads == 1:
                self.write(b"XXXX")  # the bytes change between hashing and sending
            return super().seek(*args)

    with pytest.raises(UploadSourceError) as raised:
        client.documents.upload("docs", Shifty(b"original content"), filename="shifty.txt")
    assert raised.value.reason == "SOURCE_CHANGED" and "changed while it was being uploaded" in str(raised.value)
    assert stored(services.database_url) == []
    with pytest.raises(UploadSourceError) as empty:
        client.documents.upload("docs", b"", filename="empty.txt")
    assert empty.value.reason == "SOURCE_EMPTY"


def test_lists_are_iterators_over_pages(client, services):
    for name in ("c1", "c2", "c3"):
        client.collections.create(name, embedder="hashing")
    assert [c.name for c in client.collections.list(page_size=2)] == ["c1", "c2", "c3"]
    services.worker.pause()
    ids = {client.documents.upload("c1", f"document {n}".encode(), filename=f"d{n}.txt").id for n in range(5)}
    listed = list(client.documents.list("c1", page_size=2))
    assert {d.id for d in listed} == ids and all(d.status is DocumentStatus.PENDING for d in listed)
    assert len(list(client.documents.list(page_size=2, limit=3))) == 3
    assert list(client.documents.list("c1", status="ready")) == []


def test_errors_carry_code_reason_and_metadata(client, services):
    import grpc

    with pytest.raises(NotFound) as missing:
        client.collections.get("nope")
    error = missing.value
    assert error.code == grpc.StatusCode.NOT_FOUND and error.reason == "COLLECTION_NOT_FOUND"
    assert "nope" in error.message and error.service == "ingest-api" and error.address == services.ingest
    with pytest.raises(NotFound):
        client.documents.get("00000000-0000-0000-0000-000000000000")
    with Client(f"127.0.0.1:{free_port()}", api_key="x", timeout=5) as nowhere, pytest.raises(ConnectionFailed) as down:
        nowhere.collections.list().__next__()
    assert "cannot reach ingest-api" in str(down.value) and down.value.code == grpc.StatusCode.UNAVAILABLE


def test_every_call_honours_retry_info_and_paces_itself(ingest_api_factory, services):
    """A limit of 5 calls a second (burst 2): 15 calls all succeed, because the SDK waits as
    RetryInfo says and then keeps under 90 % of the limit the server reported."""
    from prometheus_client import REGISTRY

    limited = ingest_api_factory(rate_limit_per_second=5, rate_limit_burst=2)
    refused_before = REGISTRY.get_sample_value("sluice_rate_limited_calls_total") or 0
    with Client(limited.address, api_key=auth_keys.KEYS["client"]) as client:
        client.collections.create("docs", embedder="hashing")
        for n in range(14):
            client.collections.get("docs") if n % 2 else client.documents.upload("docs", f"doc {n}".encode(), filename=f"{n}.txt")
        assert client.settings.pacer.rate == pytest.approx(4.5)
    assert (REGISTRY.get_sample_value("sluice_rate_limited_calls_total") or 0) > refused_before  # the limit did bite


def test_unavailable_is_retried_with_backoff_within_the_deadline(ingest_api_factory, database_url):
    port = free_port()
    started = []
    threading.Timer(1.0, lambda: started.append(ingest_api_factory(bind=f"127.0.0.1:{port}"))).start()
    with Client(f"127.0.0.1:{port}", api_key=auth_keys.KEYS["client"], timeout=20) as client:
        # Nothing listens for the first second: the SDK retries until the server is there.
        assert client.collections.create("late", embedder="hashing").name == "late"


def test_watch_and_wait_follow_a_document_and_time_out_readably(client, services):
    client.collections.create("docs", embedder="hashing")
    services.worker.pause()
    doc = client.documents.upload("docs", b"waits for a worker", filename="slow.txt")
    with pytest.raises(WaitTimeout) as timed_out:
        client.documents.wait(doc.id, timeout=0.5)
    assert "timed out waiting for slow.txt (still PENDING)" in str(timed_out.value)
    assert timed_out.value.documents[0].id == doc.id
    services.worker.step_seconds = 0.05
    services.worker.resume()
    states = [d.status for d in client.documents.watch(doc.id, timeout=60)]
    assert states[0] in (DocumentStatus.PENDING, DocumentStatus.PARSING) and states[-1] is DocumentStatus.READY
    assert DocumentStatus.EMBEDDING in states


def test_folder_upload_follows_every_document_through_one_watch(client, services, tmp_path):
    client.collections.create("docs", embedder="hashing")
    folder = tmp_path / "many"
    (folder / "sub").mkdir(parents=True)
    for n in range(24):
        (folder / ("sub" if n % 2 else "") / f"doc{n:02}.txt").write_text(f"document number {n}\n\nsecond paragraph")
    (folder / ".hidden").write_text("skipped")
    (folder / "bad.txt").write_text("FAIL this one")
    changes: list[Document] = []
    results = client.documents.upload_folder("docs", folder, concurrency=3, on_change=changes.append, timeout=120)
    assert len(results) == 25 and all(r.error is None for r in results)
    by_name = {r.document.filename: r.document for r in results}
    assert by_name["bad.txt"].failed and by_name["bad.txt"].error_code == "DOCUMENT_CORRUPT"
    assert sum(d.ready for d in by_name.values()) == 24
    assert {d.id for d in changes} >= {d.id for d in by_name.values() if d.ready}
    # Uploading the same folder again creates nothing and ends at once.
    again = client.documents.upload_folder("docs", folder, timeout=60)
    assert {r.document.id for r in again} == {d.id for d in by_name.values()}
    assert client.collections.get("docs").document_count == 25


class CallCounter(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Counts the calls a client makes, by method name (a real interceptor on the real channel)."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()

    def intercept_unary_unary(self, continuation, details, request):
        self.calls[details.method.rsplit("/", 1)[-1]] += 1
        return continuation(details, request)

    def intercept_unary_stream(self, continuation, details, request):
        self.calls[details.method.rsplit("/", 1)[-1]] += 1
        return continuation(details, request)


def test_wait_all_reads_once_what_finished_before_its_watches_opened(services, monkeypatch):
    """Documents READY before wait_all is called, given as their stale PENDING upload answers (and
    one as an id), in two collections: each watch opens, then each document still PENDING is read
    once by GetDocument, so no wait for an event that came before the watch (without that read, the
    trackers would list the collections after 60 quiet seconds). Past REFRESH_BY_GET documents, one
    listing per collection instead. The answers are whole documents: source_uri, SHA-256, metadata."""
    from sluice_client.client import DocumentTracker

    counter = CallCounter()
    with Client(
        services.ingest,
        search_address=services.search,
        api_key=auth_keys.KEYS["client"],
        wrap_channel=lambda channel: grpc.intercept_channel(channel, counter),
    ) as client:
        client.collections.create("docs", embedder="hashing")
        client.collections.create("more", embedder="hashing")
        uploaded = [
            client.documents.upload(
                "docs", f"document {n}".encode(), filename=f"d{n}.txt", source_uri=f"guide/d{n}.txt", metadata={"team": "ops"}
            )
            for n in range(3)
        ]
        uploaded.append(client.documents.upload("more", b"another document", filename="m.txt"))
        for document in uploaded:
            assert client.documents.wait(document.id, timeout=60).ready
        assert all(d.status is DocumentStatus.PENDING for d in uploaded)  # what wait_all is given
        given = [uploaded[0].id, *uploaded[1:]]
        counter.calls.clear()
        final = client.documents.wait_all(given, timeout=120)
        assert [d.id for d in final] == [d.id for d in uploaded] and all(d.ready for d in final)
        # One GetDocument for the id (READY: not read again), then one for each PENDING document
        # once its collection's watch is open.
        assert (counter.calls["GetDocument"], counter.calls["WatchCollection"], counter.calls["ListDocuments"]) == (4, 2, 0)
        assert [d.source_uri for d in final[:3]] == ["guide/d0.txt", "guide/d1.txt", "guide/d2.txt"]
        assert all(d.content_sha256 == u.content_sha256 and len(d.content_sha256) == 64 for d, u in zip(final, uploaded))
        assert final[0].metadata == {"team": "ops"} and final[0].create_time == uploaded[0].create_time

        monkeypatch.setattr(DocumentTracker, "REFRESH_BY_GET", 0)
        counter.calls.clear()
        assert all(d.ready for d in client.documents.wait_all(uploaded, timeout=120))
        assert (counter.calls["GetDocument"], counter.calls["ListDocuments"]) == (0, 2)


def test_documents_from_collection_events_are_whole(client, services, tmp_path):
    """A document taken from a WatchCollection event is what GetDocument answers (its source_uri,
    SHA-256, size, metadata, create time), and so are upload_folder's and sync_folder's results."""
    client.collections.create("docs", embedder="hashing")
    services.worker.pause()
    with client.collections.watch("docs", heartbeats=True) as watch:
        assert next(watch).kind == "HEARTBEAT"  # the stream is open: it starts before the upload
        uploaded = client.documents.upload(
            "docs", b"the amber signal", filename="notes.txt", source_uri="notes.txt", metadata={"team": "ops"}
        )
        event = next(e for e in watch if e.kind == "CHANGED")
    assert event.document is not None and event.document.id == uploaded.id
    for name in ("source_uri", "version", "content_sha256", "size_bytes", "metadata", "create_time", "mime_type"):
        assert getattr(event.document, name) == getattr(uploaded, name), name
    services.worker.resume()
    (done,) = client.documents.wait_all([event.document], timeout=60)
    assert done.ready and done.source_uri == "notes.txt" and done.content_sha256 == uploaded.content_sha256
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("first file")
    (folder / "b.txt").write_text("second file")
    results = client.documents.upload_folder("docs", folder, timeout=60)
    assert all(r.document.ready and len(r.document.content_sha256) == 64 and r.document.create_time for r in results)
    report = client.documents.sync_folder("docs", folder, timeout=60)
    assert sorted(d.source_uri for d in report.new) == ["a.txt", "b.txt"]
    assert all(d.ready and len(d.content_sha256) == 64 for d in report.new)


def test_a_call_without_any_key_says_how_to_give_one(services, monkeypatch, tmp_path):
    """The server's API_KEY_MISSING speaks of gRPC metadata; the SDK's user is told what to set
    (issue 37, defect 6, as the TypeScript SDK does)."""
    from sluice_client import Client, Unauthenticated
    from sluice_client.errors import NO_KEY_MESSAGE

    monkeypatch.delenv("SLUICE_API_KEY", raising=False)
    monkeypatch.delenv("SLUICE_DEV_HOME", raising=False)
    monkeypatch.setenv("SLUICE_CREDENTIALS", str(tmp_path / "none"))
    monkeypatch.chdir(tmp_path)  # no ./.sluice/credentials either
    with Client(services.ingest, search_address=services.search) as keyless, pytest.raises(Unauthenticated) as refused:
        keyless.collections.get("docs")
    assert refused.value.reason == "API_KEY_MISSING" and refused.value.message == NO_KEY_MESSAGE
    assert "set SLUICE_API_KEY, or pass api_key=" in str(refused.value)
