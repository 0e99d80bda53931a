"""Helpers of the end-to-end tests: a DocumentService client, workers in-process and as
subprocesses, bounded waits, and a look at the database to count what was written.

Every document the client reads and every error a call answers is scanned for server
internals, as in every test of the suite (tests/client_messages.py)."""

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
import psycopg
from sluice.v1 import collection_pb2, document_pb2, document_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice_worker.main import build_worker
from sluice_worker.settings import WorkerSettings

D = document_pb2
TERMINAL = {D.DOCUMENT_STATUS_READY, D.DOCUMENT_STATUS_FAILED}
REPO = Path(__file__).resolve().parents[2]


class Docs:
    """DocumentService over grpc.aio."""

    def __init__(self, address: str) -> None:
        self.channel = auth_keys.aio_channel(address)
        self.stub = document_service_pb2_grpc.DocumentServiceStub(self.channel)

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
        overlap: int | None = None,
        max_attempts: int = 3,
    ) -> collection_pb2.Collection:
        collection = collection_pb2.Collection(
            name=name,
            embedder=collection_pb2.EmbedderConfig(provider=provider, model=model, dimensions=dimensions),
            # overlap None: unset, the server's default; 0: none.
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
        return await self.stub.GetDocument(ds.GetDocumentRequest(id=document_id))

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

    async def watch(self, document_id: str, subscribed: asyncio.Event | None = None) -> list[D.Document]:
        """Every event of one document; `subscribed` is set once its first (current state) has come."""
        events = []
        async for event in self.stub.WatchDocument(ds.WatchDocumentRequest(id=document_id)):
            events.append(event.document)
            if subscribed is not None:
                subscribed.set()
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
