"""`sluice upload`: stream files to ingest-api, then follow each document with WatchDocument.

Uploads run a few at a time; every uploaded document gets a watch stream (up to
MAX_WATCHES at once) that feeds its progress bar. The summary counts READY and FAILED
documents and lists every failure with its message. Exit code 1 when anything failed.
"""

from __future__ import annotations

import hashlib
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import grpc
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from sluice.v1 import document_pb2, document_service_pb2

from sluice_common.reasons import Reason

from . import render
from .client import Clients
from .errors import EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, CliError
from .files import CHUNK_BYTES, Candidate, content_sha256, find_files, guess_mime_type, read_error, request_id

MAX_UPLOADS = 4
MAX_WATCHES = 32
WATCH_RECONNECTS = 5
# A server at its upload limit (TOO_MANY_UPLOADS) is asked again this many times, backing off.
BUSY_RETRIES = 5


@dataclass
class Outcome:
    candidate: Candidate
    document: document_pb2.Document | None = None
    error: str = ""
    exit_code: int = EXIT_OK

    @property
    def status(self) -> str:
        """The document's status; ERROR when the file never became a document."""
        return render.status_name(self.document.status) if self.document is not None else "ERROR"

    def as_json(self) -> dict:
        return {
            "path": self.candidate.display,
            "status": self.status,
            "error": self.error or (self.document.error_message if self.document else ""),
            "document": render.to_dict(self.document) if self.document is not None else None,
        }


@dataclass
class UploadJob:
    clients: Clients
    collection: str
    wait: bool
    deadline: float | None
    metadata: dict[str, str] = field(default_factory=dict)
    typed_metadata: dict = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)
    calls: set = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def cancel_all(self) -> None:
        self.stopping.set()
        with self.lock:
            for call in list(self.calls):
                call.cancel()


def run_upload(clients: Clients, paths: list[str], collection: str, *, wait: bool, timeout: float, as_json: bool, metadata: dict[str, str],
               typed_metadata: dict | None = None) -> int:
    # The collection first: an unknown name is exit 3 before anything is read or sent.
    clients.call(clients.documents.GetCollection, document_service_pb2.GetCollectionRequest(name=collection))
    candidates = find_files(paths)
    if not candidates:
        raise CliError("nothing to upload: the given folders hold no files (hidden files are skipped)", EXIT_USAGE, "NO_FILES")
    job = UploadJob(clients, collection, wait, time.monotonic() + timeout if timeout > 0 else None, metadata, typed_metadata or {})
    reporter: Reporter
    if as_json:
        reporter = Reporter()
    elif render.err.is_terminal:
        reporter = BarReporter(len(candidates))
    else:
        reporter = LineReporter()
    outcomes: dict[Candidate, Outcome] = {}
    uploads = ThreadPoolExecutor(max_workers=min(MAX_UPLOADS, len(candidates)), thread_name_prefix="upload")
    watches = ThreadPoolExecutor(max_workers=min(MAX_WATCHES, len(candidates)), thread_name_prefix="watch")
    pending: list[Future] = []
    pending_lock = threading.Lock()

    def upload_then_watch(candidate: Candidate) -> None:
        outcome = upload_one(job, candidate, reporter)
        outcomes[candidate] = outcome
        if outcome.error or not wait or job.stopping.is_set():
            reporter.finished(outcome)
            return
        with pending_lock:
            pending.append(watches.submit(watch_one, job, outcome, reporter))

    with reporter:
        for candidate in candidates:
            reporter.added(candidate)
        with pending_lock:
            pending.extend(uploads.submit(upload_then_watch, c) for c in candidates)
        try:
            while True:
                with pending_lock:
                    open_futures = [f for f in pending if not f.done()]
                if not open_futures:
                    break
                time.sleep(0.1)
        except KeyboardInterrupt:
            job.cancel_all()
            uploads.shutdown(wait=False, cancel_futures=True)
            watches.shutdown(wait=False, cancel_futures=True)
            reporter.close()
            render.err.print("interrupted: uploaded documents keep processing on the server; see `sluice ls`")
            return 130
        uploads.shutdown()
        watches.shutdown()
        with pending_lock:
            for future in pending:
                if future.exception() is not None:  # a bug in a thread must not vanish silently
                    raise future.exception()
    results = [outcomes[c] for c in candidates if c in outcomes]
    return summarize(results, collection, wait=wait, as_json=as_json)


def upload_one(job: UploadJob, candidate: Candidate, reporter: Reporter) -> Outcome:
    path = candidate.path
    try:
        sha256, size = content_sha256(path)
    except OSError as error:
        return Outcome(candidate, error=read_error(path, error), exit_code=EXIT_FAILED)
    if size == 0:
        return Outcome(candidate, error=f"{path} is empty: nothing to index", exit_code=EXIT_FAILED)
    reporter.uploading(candidate, size)
    metadata = document_service_pb2.UploadDocumentMetadata(
        collection=job.collection,
        filename=path.name,
        mime_type=guess_mime_type(path),
        metadata=job.metadata,
        typed_metadata=job.typed_metadata,
        request_id=request_id(job.collection, path, sha256),
        expected_size_bytes=size,
        expected_sha256=sha256,
    )
    read_failure: list[OSError] = []
    changed: list[bool] = []

    def messages():
        """Metadata, the file hashed as it is streamed, then the trailer that confirms it whole.

        A file that changed since it was hashed for the request_id gets no trailer: the
        stream is abandoned and the server stores nothing (the server would refuse it too).
        """
        yield document_service_pb2.UploadDocumentRequest(metadata=metadata)
        digest = hashlib.sha256()
        sent = 0
        try:
            with open(path, "rb") as handle:
                while block := handle.read(CHUNK_BYTES):
                    digest.update(block)
                    sent += len(block)
                    yield document_service_pb2.UploadDocumentRequest(data=block)
        except OSError as error:  # the file changed under us: abandon the stream
            read_failure.append(error)
            raise
        if (sent, digest.hexdigest()) != (size, sha256):
            changed.append(True)
            raise RuntimeError(f"{path} changed while it was being uploaded")
        yield document_service_pb2.UploadDocumentRequest(
            trailer=document_service_pb2.UploadDocumentTrailer(size_bytes=sent, sha256=digest.hexdigest())
        )

    for attempt in range(BUSY_RETRIES + 1):
        try:
            future = job.clients.documents.UploadDocument.future(messages(), timeout=max(60.0, size / (1024 * 1024)))
            with job.lock:
                job.calls.add(future)
            try:
                document = future.result()
            finally:
                with job.lock:
                    job.calls.discard(future)
        except grpc.RpcError as error:
            if read_failure:
                return Outcome(candidate, error=read_error(path, read_failure[0]), exit_code=EXIT_FAILED)
            if changed:
                return Outcome(candidate, error=f"{path} changed while it was being uploaded; nothing was stored, upload"
                               " it again", exit_code=EXIT_FAILED)
            failure = job.clients.rpc_error(error)
            if failure.reason == Reason.TOO_MANY_UPLOADS and attempt < BUSY_RETRIES and not job.stopping.is_set():
                # Nothing was stored: the same stream (same request_id) is safe to send again.
                time.sleep(min(8.0, 0.5 * 2**attempt))
                continue
            return Outcome(candidate, error=f"upload of {path} failed: {failure.message}", exit_code=failure.exit_code)
        except grpc.FutureCancelledError:
            return Outcome(candidate, error="upload cancelled", exit_code=EXIT_FAILED)
        break
    reporter.update(candidate, document)
    return Outcome(candidate, document=document)


def watch_one(job: UploadJob, outcome: Outcome, reporter: Reporter) -> None:
    """Follow the document until READY or FAILED (or the deadline), updating `outcome`."""
    try:
        outcome.document = follow(job.clients, outcome.document, job.deadline, lambda doc: reporter.update(outcome.candidate, doc), job)
    except CliError as error:
        outcome.error = error.message
        outcome.exit_code = error.exit_code
    reporter.finished(outcome)


def follow(clients: Clients, document: document_pb2.Document, deadline: float | None, on_event, job: UploadJob | None = None) -> document_pb2.Document:
    """Consume WatchDocument events until a terminal status; reconnect if the stream drops."""
    failures = 0
    while document.status not in render.TERMINAL:
        if job is not None and job.stopping.is_set():
            return document
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise CliError(f"timed out waiting for {document.filename or document.id} (still {render.status_name(document.status)})", EXIT_FAILED, "TIMEOUT")
        call = clients.documents.WatchDocument(document_service_pb2.WatchDocumentRequest(id=document.id), timeout=remaining)
        if job is not None:
            with job.lock:
                job.calls.add(call)
        events = 0
        try:
            for event in call:
                document = event.document
                failures = 0
                events += 1
                on_event(document)
                if document.status in render.TERMINAL:
                    break
            if events == 0 and document.status not in render.TERMINAL:
                time.sleep(0.5)  # a stream that ends at once must not become a busy loop
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.CANCELLED and job is not None and job.stopping.is_set():
                return document
            if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                continue  # the loop reports the timeout
            if error.code() != grpc.StatusCode.UNAVAILABLE or failures >= WATCH_RECONNECTS:
                raise clients.rpc_error(error) from None
            failures += 1
            time.sleep(min(5.0, 0.5 * 2**failures))
        finally:
            if job is not None:
                with job.lock:
                    job.calls.discard(call)
    return document


def summarize(results: list[Outcome], collection: str, *, wait: bool, as_json: bool) -> int:
    counts: dict[str, int] = {}
    for outcome in results:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    failed = [o for o in results if o.error or (o.document is not None and o.document.status == document_pb2.DOCUMENT_STATUS_FAILED)]
    if any(o.exit_code == EXIT_UNAVAILABLE for o in failed):
        code = EXIT_UNAVAILABLE
    elif failed or (wait and any(o.status != "READY" for o in results)):
        code = EXIT_FAILED
    else:
        code = EXIT_OK
    if as_json:
        render.print_json(
            {
                "collection": collection,
                "files": len(results),
                "ready": counts.get("READY", 0),
                "failed": len(failed),
                "counts": counts,
                "exit_code": code,
                "results": [o.as_json() for o in results],
            }
        )
        return code
    parts = [f"{n} {name}" for name, n in sorted(counts.items(), key=lambda kv: _status_order(kv[0]))]
    noun = "file" if len(results) == 1 else "files"
    style = "red" if failed else "green"
    render.out.print(Text(f"{len(results)} {noun} → collection {collection}: ", style="bold") + Text(", ".join(parts), style=style))
    if failed:
        render.out.print(Text("Failures:", style="bold red"))
        for o in failed:
            message = o.error or f"{o.document.error_message}" + (f" [{o.document.error_code}]" if o.document.error_code else "")
            ident = f" ({o.document.id})" if o.document is not None else ""
            render.out.print(f"  {escape(o.candidate.display)}{ident}: {escape(message)}", highlight=False)
        if any(o.document is not None and o.document.status == document_pb2.DOCUMENT_STATUS_FAILED for o in failed):
            render.out.print("Details: `sluice show ID`; process a FAILED document again: `sluice retry ID`.")
    if not wait:
        render.out.print("Not waiting for processing: follow with `sluice ls` or `sluice watch ID`.")
    return code


def _status_order(name: str) -> int:
    order = ["READY", "FAILED", "ERROR", "PENDING", "PARSING", "CHUNKING", "EMBEDDING", "INDEXING"]
    return order.index(name) if name in order else len(order)


class Reporter:
    """Shows upload progress; the base class shows nothing (--json)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def added(self, candidate: Candidate) -> None: ...

    def uploading(self, candidate: Candidate, size: int) -> None: ...

    def update(self, candidate: Candidate, document: document_pb2.Document) -> None: ...

    def finished(self, outcome: Outcome) -> None: ...

    def close(self) -> None: ...


def _result_line(outcome: Outcome) -> Text:
    doc = outcome.document
    if outcome.error:
        return Text("✗ ", style="red") + Text(outcome.candidate.display) + Text(f"  {outcome.error}", style="red")
    status = render.status_name(doc.status)
    line = Text("✓ " if status == "READY" else ("✗ " if status == "FAILED" else "• "), style=render.STATUS_STYLE.get(status, "cyan"))
    line += Text(outcome.candidate.display) + Text("  ") + render.styled_status(doc.status)
    if status == "READY":
        line += Text(f"  {render.chunks_label(doc.chunk_count)}", style="dim")
    if doc.error_message:
        line += Text(f"  {doc.error_message}", style="red" if status == "FAILED" else "yellow")
    line += Text(f"  {doc.id}", style="dim")
    return line


class LineReporter(Reporter):
    """Without a terminal: one line per finished document, nothing animated."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def finished(self, outcome: Outcome) -> None:
        with self._lock:
            render.err.print(_result_line(outcome), soft_wrap=True)


class BarReporter(Reporter):
    """On a terminal: one progress bar per document, replaced by a result line when done."""

    def __init__(self, total: int) -> None:
        self._progress = Progress(
            TextColumn("{task.description}", table_column=None),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[status]}"),
            TextColumn("[dim]{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=render.err,
            transient=True,
        )
        self._tasks: dict[Candidate, int] = {}
        self._lock = threading.Lock()
        self._progress.start()

    def added(self, candidate: Candidate) -> None:
        name = candidate.display if len(candidate.display) <= 40 else "…" + candidate.display[-39:]
        self._tasks[candidate] = self._progress.add_task(escape(name), total=1000, status="[dim]queued", detail="")

    def uploading(self, candidate: Candidate, size: int) -> None:
        self._progress.update(self._tasks[candidate], status="[cyan]uploading", detail=render.human_bytes(size))

    def update(self, candidate: Candidate, document: document_pb2.Document) -> None:
        name = render.status_name(document.status)
        style = render.STATUS_STYLE.get(name, "cyan")
        self._progress.update(
            self._tasks[candidate],
            completed=int(render.fraction_done(document) * 1000),
            status=f"[{style}]{name}",
            detail=escape(render.progress_text(document) or (document.error_message[:60] if document.error_message else "")),
        )

    def finished(self, outcome: Outcome) -> None:
        with self._lock:
            task = self._tasks.get(outcome.candidate)
            if task is not None:
                self._progress.remove_task(task)
            self._progress.console.print(_result_line(outcome), soft_wrap=True)

    def close(self) -> None:
        self._progress.stop()
