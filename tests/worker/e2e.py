"""Helpers of the end-to-end tests: a DocumentService client, workers in-process and as
subprocesses, bounded waits, and a look at the database to count what was written.

Every document the client reads and every error a call answers is checked on the spot for
server internals (`assert_fit_for_client`): no worker test can see a path, a traceback, an
object address, SQL or a secret in a message without failing."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import auth_keys
import grpc
import psycopg
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status
from sluice.v1 import collection_pb2, document_pb2, document_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice_common.worker_errors import internals_in
from sluice_worker.main import build_worker
from sluice_worker.settings import WorkerSettings

D = document_pb2
TERMINAL = {D.DOCUMENT_STATUS_READY, D.DOCUMENT_STATUS_FAILED}
REPO = Path(__file__).resolve().parents[2]


def client_visible_texts(item) -> list[str]:
    """The texts a client can read in a Document (its error and every attempt's) or in a failed
    call (the status message and every string of its rich details)."""
    if isinstance(item, grpc.RpcError):
        texts = [item.details() or ""]
        for key, value in item.trailing_metadata() or ():
            if key == rpc_status.GRPC_DETAILS_METADATA_KEY:
                status = status_pb2.Status.FromString(value)
                texts.append(status.message)
                for detail in status.details:
                    texts.extend(_strings_of(_unpacked(detail)))
        return texts
    return [item.error_message, *(a.error_message for a in item.attempt_history)]


def _unpacked(detail):
    """A google.rpc error detail (ErrorInfo, BadRequest, RetryInfo, …) out of its Any."""
    name = detail.type_url.rsplit("/", 1)[-1].rsplit(".", 1)[-1]
    message = getattr(error_details_pb2, name, None)
    assert message is not None, f"an error detail of an unknown type: {detail.type_url}"
    unpacked = message()
    assert detail.Unpack(unpacked)
    return unpacked


def _strings_of(message) -> list[str]:
    """Every string field of a protobuf message, nested ones and map values included."""
    out = []
    for field, value in message.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            values = list(value.values())
        elif isinstance(value, (str, bytes)) or hasattr(value, "ListFields"):
            values = [value]
        else:
            try:
                values = list(value)  # a repeated field
            except TypeError:
                values = [value]
        for item in values:
            if isinstance(item, str):
                out.append(item)
            elif hasattr(item, "ListFields"):
                out.extend(_strings_of(item))
    return out


def assert_fit_for_client(item) -> None:
    found = [f"{text[:200]!r}: {', '.join(internals_in(text))}" for text in client_visible_texts(item) if internals_in(text)]
    assert not found, "a client-visible message carries server internals:\n" + "\n".join(found)


class _CheckedStub:
    """A DocumentService stub whose failed calls are checked before they are raised."""

    def __init__(self, stub) -> None:
        self._stub = stub

    def __getattr__(self, name: str):
        method = getattr(self._stub, name)

        def call(*args, **kwargs):
            return _CheckedCall(method(*args, **kwargs))

        return call


class _CheckedCall:
    def __init__(self, call) -> None:
        self._call = call

    def __getattr__(self, name: str):  # cancel(), code(), … of the call itself
        return getattr(self._call, name)

    def __await__(self):
        try:
            return (yield from self._call.__await__())
        except grpc.RpcError as error:
            assert_fit_for_client(error)
            raise

    def __aiter__(self):
        return self._iterate()

    async def _iterate(self):
        try:
            async for item in self._call:
                yield item
        except grpc.RpcError as error:
            assert_fit_for_client(error)
            raise


class Docs:
    """DocumentService over grpc.aio (every document read and every error checked, see above)."""

    def __init__(self, address: str) -> None:
        self.channel = auth_keys.aio_channel(address)
        self.stub = _CheckedStub(document_service_pb2_grpc.DocumentServiceStub(self.channel))

    async def close(self) -> None:
        await self.channel.close()

    async def create_collection(
        self,
        name: str,
        *,
        provider=collection_pb2.EMBEDDER_PROVIDER_HASHING,
        model: str = "hashing-v1",
        dimensions: int = 64,
        max_characters: int = 400,
        new_after: int = 300,
        overlap: int = 0,
        max_attempts: int = 3,
    ) -> collection_pb2.Collection:
        collection = collection_pb2.Collection(
            name=name,
            embedder=collection_pb2.EmbedderConfig(provider=provider, model=model, dimensions=dimensions),
            chunking=collection_pb2.ChunkingConfig(max_characters=max_characters, new_after_n_chars=new_after, overlap=overlap),
            max_attempts=max_attempts,
        )
        return await self.stub.CreateCollection(ds.CreateCollectionRequest(collection=collection))

    async def upload(self, collection: str, filename: str, content: bytes) -> D.Document:
        async def messages():
            yield ds.UploadDocumentRequest(metadata=ds.UploadDocumentMetadata(collection=collection, filename=filename))
            for start in range(0, len(content), 256 * 1024):
                yield ds.UploadDocumentRequest(data=content[start : start + 256 * 1024])
            yield ds.UploadDocumentRequest(
                trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
            )

        return await self.stub.UploadDocument(messages())

    async def get(self, document_id: str) -> D.Document:
        document = await self.stub.GetDocument(ds.GetDocumentRequest(id=document_id))
        assert_fit_for_client(document)
        return document

    async def delete(self, document_id: str):
        return await self.stub.DeleteDocument(ds.DeleteDocumentRequest(id=document_id))

    async def wait(self, document_id: str, statuses=TERMINAL, timeout: float = 90.0, predicate=None) -> D.Document:
        """Poll until the document is in one of `statuses` (bounded; fails with the last state)."""
        deadline = time.monotonic() + timeout
        while True:
            document = await self.get(document_id)
            if document.status in statuses and (predicate is None or predicate(document)):
                return document
            if time.monotonic() > deadline:
                raise AssertionError(f"document {document.filename} still {D.DocumentStatus.Name(document.status)}: {document}")
            await asyncio.sleep(0.05)

    async def wait_all(self, ids, timeout: float = 120.0) -> list[D.Document]:
        return list(await asyncio.gather(*(self.wait(i, timeout=timeout) for i in ids)))

    async def watch(self, document_id: str) -> list[D.Document]:
        events = []
        async for event in self.stub.WatchDocument(ds.WatchDocumentRequest(id=document_id)):
            assert_fit_for_client(event.document)
            events.append(event.document)
        return events


def worker_settings(address: str, **overrides) -> WorkerSettings:
    values = {
        "ingest_address": address,
        "api_key": auth_keys.KEYS["worker"],
        "worker_id": "test-worker",
        "worker_concurrency": 2,
        "claim_wait_seconds": 0.5,
        "claim_error_backoff_seconds": 0.2,
        "progress_interval_seconds": 0.0,
        "parse_timeout_seconds": 60.0,
        "shutdown_grace_seconds": 5.0,
        "openai_retry_base_seconds": 0.01,
        "log_json": False,
        **overrides,
    }
    return WorkerSettings(**values)


class InProcessWorker:
    """A Worker running in the test's event loop, sharing the session's warm sandboxes."""

    def __init__(self, settings: WorkerSettings, pool) -> None:
        self.worker, self.pool, self.client = build_worker(settings, pool=pool)
        self.task: asyncio.Task | None = None

    async def __aenter__(self) -> InProcessWorker:
        self.task = asyncio.create_task(self.worker.run())
        return self

    async def stop(self) -> None:
        self.worker.request_stop()
        if self.task is not None:
            await asyncio.wait_for(self.task, 60)
            self.task = None
        await self.client.close()

    async def __aexit__(self, *exc) -> None:
        await self.stop()


class WorkerProcess:
    """`python -m sluice_worker.main` as a real subprocess, logging JSON lines to a file."""

    def __init__(self, address: str, log_path: Path, **env: str) -> None:
        self.log_path = log_path
        environment = {
            **os.environ,
            "SLUICE_INGEST_ADDRESS": address,
            "SLUICE_API_KEY": auth_keys.KEYS["worker"],
            "SLUICE_CLAIM_WAIT_SECONDS": "0.5",
            "SLUICE_PROGRESS_INTERVAL_SECONDS": "0",
            "SLUICE_LOG_LEVEL": "INFO",
            "SLUICE_LOG_JSON": "true",
            **env,
        }
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sluice_worker.main"], env=environment, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO
        )

    def signal(self, sig: int) -> None:
        self.process.send_signal(sig)

    async def wait_exit(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while self.process.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError("worker process did not exit")
            await asyncio.sleep(0.05)
        self._log.close()
        return self.process.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._log.close()


def chunk_rows(database_url: str, document_id: str) -> list[tuple]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT chunk_index, text, page_number, element_type, section_title, text_as_html, vector_dims(embedding)"
            " FROM chunks WHERE document_id = %s ORDER BY chunk_index",
            (document_id,),
        ).fetchall()


def snapshot_count(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        return conn.execute("SELECT count(*) FROM chunk_snapshots").fetchone()[0]
