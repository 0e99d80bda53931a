"""UploadDocument integrity: only an upload confirmed whole by its trailer is stored.

Real gRPC, real PostgreSQL: killed clients, half-closed streams, size and checksum
mismatches, idle streams, the concurrency limit and NUL characters all store nothing,
and the same request_id can be sent again afterwards.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import threading

import auth_keys
import grpc
import pytest
from helpers import expect_error, wait_for
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js
from sluice_common.errors import reason_of

from .helpers import Clients, upload_messages
from .test_documents import rows

TABLES = ("documents", "document_contents", "ingestion_jobs")
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def stored(database_url) -> dict[str, int]:
    return {table: rows(database_url, table) for table in TABLES}


NOTHING = dict.fromkeys(TABLES, 0)


def spool_files(spool_dir) -> list[str]:
    """Open file descriptors of this process (the in-process ingest-api) on spool files."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(spool_dir)):
            found.append(target)
    return found


@pytest.fixture
def api(ingest_api_factory, tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    # A tiny in-memory threshold so that every test upload goes through a spool file.
    server = ingest_api_factory(upload_spool_memory_bytes=1024, upload_spool_dir=str(spool))
    server.spool = spool
    return server


@pytest.fixture
def c(api):
    clients = Clients(api.address)
    clients.create_collection()
    yield clients
    clients.close()


def active_uploads(api) -> int:
    return api.app.documents.uploads.active


# ---------------------------------------------------------------- the trailer


def test_stream_that_half_closes_without_trailer_stores_nothing_and_can_be_sent_again(c, api, database_url):
    content = os.urandom(300_000)
    err = expect_error(lambda: c.upload(content=content, request_id="r-1", trailer=False), INVALID, "UPLOAD_INCOMPLETE")
    assert "300000 bytes" in err.details() and "send it again" in err.details()
    assert stored(database_url) == NOTHING
    # Metadata alone, then a half-close: also incomplete, not "empty".
    expect_error(lambda: c.upload(content=b"", request_id="r-1", trailer=False), INVALID, "UPLOAD_INCOMPLETE")

    document = c.upload(content=content, request_id="r-1")
    assert document.size_bytes == len(content)
    assert document.content_sha256 == hashlib.sha256(content).hexdigest()
    assert stored(database_url) == dict.fromkeys(TABLES, 1)
    assert c.upload(content=content, request_id="r-1").id == document.id  # idempotent as before
    assert spool_files(api.spool) == [] and active_uploads(api) == 0


def test_checksum_mismatch_stores_nothing_and_the_request_id_stays_usable(c, database_url):
    content = b"the real content " * 1000
    wrong = hashlib.sha256(b"something else").hexdigest()
    err = expect_error(lambda: c.upload(content=content, request_id="r-2", sha256=wrong), INVALID, "CHECKSUM_MISMATCH")
    assert hashlib.sha256(content).hexdigest() in err.details()
    assert stored(database_url) == NOTHING
    assert c.upload(content=content, request_id="r-2").size_bytes == len(content)
    assert rows(database_url, "documents") == 1


def test_size_mismatch_stores_nothing_either_way(c, database_url):
    content = b"0123456789" * 5000
    # The trailer claims more than arrived: bytes were lost on the way.
    expect_error(lambda: c.upload(content=content, request_id="r-3", size=len(content) + 1), INVALID, "UPLOAD_INCOMPLETE")
    # The trailer claims less than arrived.
    expect_error(lambda: c.upload(content=content, request_id="r-3", size=len(content) - 1), INVALID, "SIZE_MISMATCH")
    assert stored(database_url) == NOTHING
    assert c.upload(content=content, request_id="r-3").size_bytes == len(content)


def test_expected_size_and_checksum_in_the_metadata(ingest_api_factory, database_url):
    api = ingest_api_factory(max_upload_bytes=10_000)
    c = Clients(api.address)
    c.create_collection()
    content = b"known up front " * 100

    def upload(expected_size=0, expected_sha256="", data=content, sha256=None):
        def messages():
            stream = upload_messages("docs", data, sha256=sha256)
            first = next(stream)
            first.metadata.expected_size_bytes = expected_size
            first.metadata.expected_sha256 = expected_sha256
            yield first
            yield from stream

        return c.docs.UploadDocument(messages())

    sent: list[int] = []

    def counted():  # a too-large file announced up front is refused before its bytes are read
        yield ds.UploadDocumentRequest(
            metadata=ds.UploadDocumentMetadata(collection="docs", filename="a.txt", expected_size_bytes=10_001)
        )
        for _ in range(3):
            sent.append(1)
            yield ds.UploadDocumentRequest(data=b"x")

    expect_error(lambda: c.docs.UploadDocument(counted()), grpc.StatusCode.RESOURCE_EXHAUSTED, "UPLOAD_TOO_LARGE")
    expect_error(lambda: upload(expected_size=len(content) - 1), INVALID, "SIZE_MISMATCH")
    expect_error(lambda: upload(expected_size=len(content) + 1), INVALID, "UPLOAD_INCOMPLETE")
    expect_error(lambda: upload(expected_sha256="ab" * 32), INVALID, "CHECKSUM_MISMATCH")
    expect_error(lambda: upload(expected_sha256="not-hex"), INVALID, "INVALID_CHECKSUM")
    expect_error(lambda: upload(sha256="abc"), INVALID, "INVALID_CHECKSUM")
    assert stored(database_url) == NOTHING
    digest = hashlib.sha256(content).hexdigest()
    document = upload(expected_size=len(content), expected_sha256=digest.upper())
    assert document.content_sha256 == digest and document.size_bytes == len(content)
    c.close()


def test_trailer_without_checksum_is_accepted_and_the_server_records_the_hash(c):
    content = b"a client that cannot hash " * 50
    document = c.upload(content=content, sha256="")
    assert document.content_sha256 == hashlib.sha256(content).hexdigest()


def test_trailer_must_be_last_and_messages_must_carry_something(c, database_url):
    def after_trailer():
        yield from upload_messages("docs", b"complete")
        yield ds.UploadDocumentRequest(data=b" and more")

    expect_error(lambda: c.docs.UploadDocument(after_trailer()), INVALID, "TRAILER_NOT_LAST")

    def empty_message():
        stream = upload_messages("docs", b"complete")
        yield next(stream)
        yield ds.UploadDocumentRequest()

    expect_error(lambda: c.docs.UploadDocument(empty_message()), INVALID, "EMPTY_MESSAGE")
    expect_error(lambda: c.upload(content=b""), INVALID, "EMPTY_UPLOAD")  # a confirmed empty file
    assert stored(database_url) == NOTHING


def test_spooled_upload_reads_back_byte_for_byte(c, api):
    """The binary COPY from the spool file stores exactly the bytes sent (odd sizes, many pieces)."""
    content = os.urandom(3 * 1024 * 1024 + 12_345)
    document = c.upload(content=content, filename="blob.bin", piece=200_001)
    assert document.size_bytes == len(content)
    job = c.claim()
    assert job.document_id == document.id
    read = b"".join(r.data for r in c.jobs.ReadDocumentContent(js.ReadDocumentContentRequest(lease=job.lease)))
    assert read == content
    assert c.upload(content=content, filename="again.bin").id == document.id  # dedup by content, as before
    assert spool_files(api.spool) == []


# ---------------------------------------------------------------- killed clients

CLIENT_SCRIPT = textwrap.dedent(
    """
    import hashlib, sys, time
    import grpc
    from sluice.v1 import document_service_pb2 as ds, document_service_pb2_grpc

    address, request_id, key = sys.argv[1], sys.argv[2], sys.argv[3]
    piece = (request_id.encode() * 4096)[:16384]

    def messages():
        yield ds.UploadDocumentRequest(metadata=ds.UploadDocumentMetadata(
            collection="docs", filename="slow.txt", request_id=request_id))
        for i in range(100_000):  # would take far longer than the test: it is killed first
            yield ds.UploadDocumentRequest(data=piece)
            if i == 3:
                print("streaming", flush=True)
            time.sleep(0.02)
        yield ds.UploadDocumentRequest(trailer=ds.UploadDocumentTrailer(size_bytes=0))

    stub = document_service_pb2_grpc.DocumentServiceStub(grpc.insecure_channel(address))
    stub.UploadDocument(messages(), metadata=[("authorization", "Bearer " + key)])
    """
)


def test_clients_killed_mid_stream_store_nothing_and_can_upload_again(c, api, database_url, tmp_path):
    """20 client processes SIGKILLed mid-stream. The server usually sees a cancellation here; a
    stream that ends cleanly without its trailer is the half-close test above."""
    script = tmp_path / "slow_client.py"
    script.write_text(CLIENT_SCRIPT)
    processes = [
        subprocess.Popen(
            [sys.executable, str(script), api.address, f"killed-{i}", auth_keys.KEYS["client"]], stdout=subprocess.PIPE, text=True
        )
        for i in range(20)
    ]
    try:
        for process in processes:
            assert process.stdout.readline().strip() == "streaming"
        wait_for(lambda: active_uploads(api) == 20, what="all 20 streams are being received")
        assert spool_files(api.spool), "the streams are spooled to files"
        for process in processes:
            process.send_signal(signal.SIGKILL)
        for process in processes:
            assert process.wait(30) == -signal.SIGKILL
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
            process.stdout.close()
    wait_for(lambda: active_uploads(api) == 0, what="the server noticed every killed client")
    assert stored(database_url) == NOTHING
    assert spool_files(api.spool) == []  # every spool file closed (they were never linked in the directory)
    assert list(api.spool.iterdir()) == []

    # The same request_ids again, now whole: each one is a new document.
    for i in range(20):
        c.upload(content=f"killed-{i}".encode() * 1000, request_id=f"killed-{i}")
    assert stored(database_url) == dict.fromkeys(TABLES, 20)


# ---------------------------------------------------------------- idle streams and the limit


class HeldUpload:
    """An upload in a thread that sends its metadata and some bytes, then waits for `release`."""

    def __init__(self, clients: Clients, content: bytes, *, before_metadata: bool = False) -> None:
        self.release = threading.Event()
        self.result: object = None
        self.error: grpc.RpcError | None = None

        def messages():
            stream = upload_messages("docs", content, piece=len(content) // 2)
            if before_metadata:
                self.release.wait(60)
            yield next(stream)
            yield next(stream)
            self.release.wait(60)
            yield from stream

        def run():
            try:
                self.result = clients.docs.UploadDocument(messages())
            except grpc.RpcError as error:
                self.error = error

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def finish(self):
        self.release.set()
        self.thread.join(60)
        return self.result


def test_idle_uploads_are_cancelled_and_release_everything(ingest_api_factory, database_url, tmp_path):
    api = ingest_api_factory(upload_idle_timeout_seconds=0.5, upload_spool_memory_bytes=1024, upload_spool_dir=str(tmp_path))
    c = Clients(api.address)
    c.create_collection()
    silent_midway = HeldUpload(c, os.urandom(100_000))
    silent_from_start = HeldUpload(c, os.urandom(100_000), before_metadata=True)
    for held in (silent_midway, silent_from_start):
        held.thread.join(60)  # the server ends the call; the client's sender stays blocked
        assert held.error is not None and held.error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert reason_of(held.error) == "UPLOAD_IDLE_TIMEOUT"
        assert "nothing was stored" in held.error.details()
        held.release.set()
    assert active_uploads(api) == 0 and spool_files(tmp_path) == []
    assert stored(database_url) == NOTHING
    assert c.upload(content=b"an upload that keeps talking").size_bytes == 28
    c.close()


def test_concurrent_upload_limit_answers_resource_exhausted(ingest_api_factory, database_url):
    api = ingest_api_factory(max_concurrent_uploads=2)
    c = Clients(api.address)
    c.create_collection()
    held = [HeldUpload(c, os.urandom(10_000)) for _ in range(2)]
    wait_for(lambda: active_uploads(api) == 2, what="both held uploads admitted")
    err = expect_error(lambda: c.upload(), grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_UPLOADS")
    assert "try again" in err.details()
    documents = [h.finish() for h in held]
    assert all(d is not None and d.size_bytes == 10_000 for d in documents), [h.error for h in held]
    assert c.upload().size_bytes > 0  # slots are given back
    assert active_uploads(api) == 0 and rows(database_url, "documents") == 3
    c.close()


# ---------------------------------------------------------------- NUL characters


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"metadata": {"team": "se\x00arch"}}, "INVALID_METADATA"),
        ({"metadata": {"te\x00am": "search"}}, "INVALID_METADATA"),
        ({"filename": "re\x00port.pdf"}, "INVALID_FILENAME"),
        ({"request_id": "req\x001"}, "INVALID_REQUEST_ID"),
        ({"collection": "do\x00cs"}, "INVALID_COLLECTION_NAME"),
    ],
)
def test_nul_characters_are_invalid_arguments_not_internal_errors(c, database_url, kwargs, reason):
    err = expect_error(lambda: c.upload(**kwargs), INVALID, reason)
    assert "NUL" in err.details()
    assert stored(database_url) == NOTHING
