"""The SDK's side of the console API (issue 34) without Sluice's servers: what a download checks
and where it writes, how an explanation tells an unset score from 0, what UpdateChunk sends.

The download tests that need a stream run a stand-in DocumentService in this process that sends
what a real server never would (a wrong SHA-256, an early end, bytes before the header, a dropped
first attempt): the real ingest-api cannot be made to, and these are the SDK's checks."""

from __future__ import annotations

import hashlib
import inspect
import io
from concurrent import futures

import auth_keys
import grpc
import pytest
from sluice_client import AsyncClient, Client, DownloadError, HitExplanation, _core, downloads
from sluice_client.aio import AsyncDocuments
from sluice_client.client import Documents
from sluice_client.protos import document_service_pb2, document_service_pb2_grpc, search_service_pb2
from sluice_client.types import Hit

CONTENT = b"the original bytes of report.txt\n" * 1000


def header(content: bytes = CONTENT, **fields) -> document_service_pb2.DownloadDocumentResponse:
    values = {
        "filename": "report.txt",
        "mime_type": "text/plain",
        "size_bytes": len(content),
        "content_sha256": hashlib.sha256(content).hexdigest(),
        **fields,
    }
    return document_service_pb2.DownloadDocumentResponse(header=document_service_pb2.DownloadDocumentHeader(**values))


def data(piece: bytes) -> document_service_pb2.DownloadDocumentResponse:
    return document_service_pb2.DownloadDocumentResponse(data=piece)


def stream(content: bytes = CONTENT, piece: int = 4096, **fields) -> list[document_service_pb2.DownloadDocumentResponse]:
    return [header(content, **fields)] + [data(content[i : i + piece]) for i in range(0, len(content), piece)]


class StandIn(document_service_pb2_grpc.DocumentServiceServicer):
    """Answers each DownloadDocument with the next scripted stream; a stream that is an int
    aborts with UNAVAILABLE after that many of the good stream's messages."""

    def __init__(self, scripts: list) -> None:
        self.scripts = scripts
        self.calls = 0

    def DownloadDocument(self, request, context):
        script = self.scripts[min(self.calls, len(self.scripts) - 1)]
        self.calls += 1
        if isinstance(script, int):
            yield from stream()[:script]
            context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
        yield from script


@pytest.fixture
def stand_in():
    servers = []

    def start(*scripts) -> tuple[StandIn, str]:
        servicer = StandIn(list(scripts))
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        document_service_pb2_grpc.add_DocumentServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return servicer, f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(0)


def client_of(address: str) -> Client:
    return Client(address, api_key=auth_keys.KEYS["client"], timeout=10)


# ---------------------------------------------------------------------- downloads


def test_a_download_returns_the_bytes_or_writes_them_where_asked(stand_in, tmp_path):
    _, address = stand_in(stream())
    with client_of(address) as client:
        assert client.documents.download("d1") == CONTENT
        written = client.documents.download("d1", tmp_path / "copy.txt")
        assert (tmp_path / "copy.txt").read_bytes() == CONTENT
        assert (written.filename, written.mime_type, written.size_bytes) == ("report.txt", "text/plain", len(CONTENT))
        assert written.content_sha256 == hashlib.sha256(CONTENT).hexdigest() and written.path == tmp_path / "copy.txt"
        into_folder = client.documents.download("d1", tmp_path)  # a folder: the document's file name in it
        assert into_folder.path == tmp_path / "report.txt" and into_folder.path.read_bytes() == CONTENT
        target = io.BytesIO()
        assert client.documents.download("d1", target).path is None and target.getvalue() == CONTENT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.txt", "report.txt"]  # no temporary file left


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (stream(content_sha256=hashlib.sha256(b"other bytes").hexdigest()), "CHECKSUM_MISMATCH"),
        (stream()[:-1], "SIZE_MISMATCH"),  # ended early, cleanly
        (stream(size_bytes=len(CONTENT) - 1), "SIZE_MISMATCH"),  # more than announced
        ([data(b"bytes"), *stream()], "DOWNLOAD_MALFORMED"),
        ([], "DOWNLOAD_MALFORMED"),
    ],
    ids=["wrong-sha256", "ended-early", "ran-long", "bytes-before-header", "no-header"],
)
def test_bytes_that_are_not_the_announced_ones_are_refused_and_leave_no_file(stand_in, tmp_path, script, reason):
    servicer, address = stand_in(script)
    existing = tmp_path / "report.txt"
    existing.write_bytes(b"what was there before")
    with client_of(address) as client:
        with pytest.raises(DownloadError) as refused:
            client.documents.download("d1", existing)
        assert refused.value.reason == reason and refused.value.code is None
        with pytest.raises(DownloadError):
            client.documents.download("d1")
    assert servicer.calls == 2  # an integrity failure is not retried
    assert existing.read_bytes() == b"what was there before"  # never replaced, nothing beside it
    assert [p.name for p in tmp_path.iterdir()] == ["report.txt"]


def test_a_dropped_download_starts_again_unless_a_file_object_cannot_go_back(stand_in, tmp_path):
    servicer, address = stand_in(5, stream())  # the first attempt breaks after the header and 4 pieces
    with client_of(address) as client:
        assert client.documents.download("d1", tmp_path / "a.txt").size_bytes == len(CONTENT)
        assert servicer.calls == 2 and (tmp_path / "a.txt").read_bytes() == CONTENT
        servicer.calls = 0
        seekable = io.BytesIO(b"kept:")
        seekable.seek(5)
        client.documents.download("d1", seekable)
        assert seekable.getvalue() == b"kept:" + CONTENT  # rewound to where it started, not before

        class Pipe(io.RawIOBase):  # written once, cannot seek: a retry would repeat bytes
            def __init__(self) -> None:
                self.received = b""

            def writable(self) -> bool:
                return True

            def write(self, b) -> int:
                self.received += bytes(b)
                return len(b)

        servicer.calls = 0
        pipe = Pipe()
        with pytest.raises(Exception) as broke:
            client.documents.download("d1", pipe)
        assert broke.value.reason == "UNAVAILABLE" and servicer.calls == 1


async def test_the_asyncio_download_checks_the_same(stand_in, tmp_path):
    _, good = stand_in(5, stream())
    _, bad = stand_in(stream(content_sha256="0" * 64))
    async with AsyncClient(good, api_key=auth_keys.KEYS["client"], timeout=10) as client:
        assert await client.documents.download("d1") == CONTENT
        assert (await client.documents.download("d1", tmp_path)).path.read_bytes() == CONTENT
    async with AsyncClient(bad, api_key=auth_keys.KEYS["client"], timeout=10) as client:
        with pytest.raises(DownloadError, match="SHA-256"):
            await client.documents.download("d1", tmp_path / "bad.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.txt"]


def test_a_file_name_from_the_server_never_leaves_the_folder():
    assert downloads.safe_filename("../../etc/passwd", "d1") == "passwd"
    assert downloads.safe_filename("a\\b\\c.txt", "d1") == "c.txt"
    assert downloads.safe_filename("..", "d1") == "d1" and downloads.safe_filename("", "d1") == "d1"


# ---------------------------------------------------------------------- explanations and UpdateChunk


def test_an_explanation_tells_an_unset_score_from_zero():
    explained = search_service_pb2.SearchHit(
        chunk_id="c1",
        explanation=search_service_pb2.HitExplanation(
            keyword_score=0.0, keyword_rank=3, fused_score=0.5, first_stage_rank=2, matched_terms=["leas"]
        ),
    )
    hit = Hit.from_proto(explained)
    assert isinstance(hit.explanation, HitExplanation) and hit.chunk_id == "c1"
    e = hit.explanation
    assert (e.keyword_score, e.keyword_rank, e.vector_similarity, e.vector_rank) == (0.0, 3, None, None)
    assert (e.fused_score, e.first_stage_rank, e.rerank_score, e.rerank_status) == (0.5, 2, None, "UNSPECIFIED")
    assert e.matched_terms == ["leas"] and e.vector_weight is None
    assert Hit.from_proto(search_service_pb2.SearchHit()).explanation is None  # not asked for


def test_update_chunk_sends_only_what_changes():
    disable = _core.update_chunk_request("c1", enabled=False)
    assert disable.HasField("enabled") and not disable.enabled and not disable.HasField("text") and disable.etag == ""
    edit = _core.update_chunk_request("c1", text="", etag="e1")
    assert edit.HasField("text") and not edit.HasField("enabled") and edit.etag == "e1"  # empty text: the server refuses it
    with pytest.raises(ValueError, match="chunk id"):
        _core.update_chunk_request("", enabled=True)
    request = _core.search_request(
        "docs",
        "q",
        top_k=3,
        mode=None,
        filter=None,
        where=None,
        filenames=None,
        document_ids=None,
        neighbors=0,
        max_per_document=0,
        min_score=None,
        rerank=None,
        query_vector=None,
        explain=True,
        generation=2,
    )
    assert request.explain and request.generation == 2


def test_the_asyncio_client_has_the_sync_clients_console_methods():
    for name in ("list_chunks", "iter_chunks", "disable_chunk", "enable_chunk", "edit_chunk", "download"):
        sync_parameters = inspect.signature(Documents.__dict__[name]).parameters
        async_parameters = inspect.signature(AsyncDocuments.__dict__[name]).parameters
        assert list(sync_parameters) == list(async_parameters), name
    for client_class in (Client, AsyncClient):
        assert {"explain", "generation"} <= set(inspect.signature(client_class.search).parameters)
