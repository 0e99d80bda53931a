"""`sluice upload`: stream files to ingest-api a few at a time, then follow every document to
READY or FAILED through one watch of the collection.

Built for bulk work (docs/clients.md, "Rate limits and bulk jobs"): the SDK paces the uploads
under the server's per-key rate limit and waits as its RetryInfo says; one WatchCollection
stream follows every document (not one watch per file), so 10,000 files cost 10,000 uploads
and one stream; documents still processing are waited for until --timeout (by default as long
as it takes), never given up. The summary counts READY and FAILED documents and lists every
failure with its message. Exit code 1 when anything failed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text
from sluice_client import Client, Document, DocumentStatus, DocumentTracker, SluiceError, UploadResult, WaitTimeout

from . import render
from .errors import EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, CliError, from_sdk_error
from .files import Candidate, find_files
from .files import source_uri_from_path as source_uri_from_path_of

MAX_UPLOADS = 4
INTERRUPTED = 130


@dataclass
class Outcome:
    candidate: Candidate
    document: Document | None = None
    error: str = ""
    exit_code: int = EXIT_OK

    @property
    def status(self) -> str:
        """The document's status; ERROR when the file never became a document."""
        return self.document.status.name if self.document is not None else "ERROR"

    @property
    def failed(self) -> bool:
        return bool(self.error) or (self.document is not None and self.document.failed)

    def as_json(self) -> dict[str, object]:
        return {
            "path": self.candidate.display,
            "status": self.status,
            "error": self.error or (self.document.error_message if self.document else ""),
            "document": render.to_dict(self.document.raw) if self.document is not None else None,
        }


class UploadJob:
    """The outcome of every file, fed by upload results (main thread) and by the tracker (its thread)."""

    def __init__(self, candidates: list[Candidate], reporter: Reporter) -> None:
        self.reporter = reporter
        self.by_path = {c.path: c for c in candidates}
        self.outcomes: dict[Candidate, Outcome] = {}
        # Several files with the same bytes are one document (the server deduplicates).
        self.by_id: dict[str, list[Outcome]] = {}
        self.finished: set[Candidate] = set()
        self.lock = threading.Lock()

    def starting(self, path: Any) -> None:
        candidate = self.by_path[path]
        try:
            size = candidate.path.stat().st_size
        except OSError:
            size = 0
        self.reporter.uploading(candidate, size)

    def uploaded(self, result: UploadResult, tracker: DocumentTracker | None) -> None:
        candidate = self.by_path[result.source]
        if result.error is not None or result.document is None:
            failure = from_sdk_error(result.error) if result.error is not None else CliError("no document")
            message = (
                failure.message
                if result.error is not None and result.error.code is None
                else f"upload of {candidate.path} failed: {failure.message}"
            )
            outcome = Outcome(candidate, error=message, exit_code=failure.exit_code)
            with self.lock:
                self.outcomes[candidate] = outcome
            self.finish(outcome)
            return
        outcome = Outcome(candidate, result.document)
        with self.lock:
            self.outcomes[candidate] = outcome
            self.by_id.setdefault(result.document.id, []).append(outcome)
        self.changed(tracker.track(result.document) if tracker is not None else result.document, final=tracker is None)

    def changed(self, document: Document, final: bool = False) -> None:
        with self.lock:
            outcomes = list(self.by_id.get(document.id, ()))
            for outcome in outcomes:
                outcome.document = document
        for outcome in outcomes:
            self.reporter.update(outcome.candidate, document)
            if final or document.done:
                self.finish(outcome)

    def finish(self, outcome: Outcome) -> None:
        with self.lock:
            if outcome.candidate in self.finished:
                return
            self.finished.add(outcome.candidate)
        self.reporter.finished(outcome)

    def wait(self, tracker: DocumentTracker, deadline: float | None) -> None:
        """Until every document is READY or FAILED, or the deadline; then every outcome is final."""
        remaining = None if deadline is None else max(0.001, deadline - time.monotonic())
        timed_out = False
        failure: CliError | None = None
        try:
            final = tracker.wait(remaining)
        except WaitTimeout as error:
            final, timed_out = error.documents, True
        except SluiceError as error:  # the watch failed for good (e.g. the collection was deleted)
            final, failure = tracker.documents, from_sdk_error(error)
        for document in final:
            with self.lock:
                outcomes = list(self.by_id.get(document.id, ()))
                for outcome in outcomes:
                    outcome.document = document
                    if not document.done and timed_out:
                        outcome.error = f"timed out waiting for {document.filename or document.id} (still {document.status.name})"
                        outcome.exit_code = EXIT_FAILED
                    elif not document.done and failure is not None:
                        outcome.error, outcome.exit_code = failure.message, failure.exit_code
            for outcome in outcomes:
                self.finish(outcome)


def run_upload(
    client: Client,
    paths: list[str],
    collection: str,
    *,
    wait: bool,
    timeout: float,
    as_json: bool,
    metadata: dict[str, str],
    typed_metadata: Mapping[str, object] | None = None,
    source_uri_from_path: bool = False,
    source_uri: str | None = None,
) -> int:
    if source_uri is not None and (source_uri_from_path or len(paths) != 1 or not os.path.isfile(paths[0])):
        raise CliError(
            "--source-uri names one file: give exactly one file, without --source-uri-from-path", EXIT_USAGE, "INVALID_ARGUMENT"
        )
    # The collection first: an unknown name is exit 3 before anything is read or sent.
    client.collections.get(collection)
    candidates = find_files(paths)
    if source_uri_from_path:
        candidates = [source_uri_from_path_of(c, paths) for c in candidates]
    if source_uri is not None:
        candidates = [Candidate(c.path, c.display, source_uri) for c in candidates]
    source_uris = {c.path: c.source_uri for c in candidates}
    if not candidates:
        raise CliError("nothing to upload: the given folders hold no files (hidden files are skipped)", EXIT_USAGE, "NO_FILES")
    deadline = time.monotonic() + timeout if timeout > 0 else None
    reporter = make_reporter(len(candidates), as_json=as_json)
    job = UploadJob(candidates, reporter)
    tracker = client.documents.tracker(collection, on_change=job.changed) if wait else None
    with reporter:
        for candidate in candidates:
            reporter.added(candidate)
        try:
            if tracker is not None:
                tracker.start()  # before the first upload, so that no event is missed
            results = client.documents.upload_many(
                collection,
                [c.path for c in candidates],
                concurrency=MAX_UPLOADS,
                metadata=metadata,
                typed_metadata=typed_metadata,
                on_start=job.starting,
                source_uri_of=source_uris.get,
            )
            try:
                for result in results:
                    job.uploaded(result, tracker)
            finally:
                results.close()
            if tracker is not None:
                job.wait(tracker, deadline)
        except KeyboardInterrupt:
            if tracker is not None:
                tracker.close()
            client.close()  # ends the uploads in flight; what was stored stays
            reporter.close()
            render.err.print("interrupted: uploaded documents keep processing on the server; see `sluice ls`")
            return INTERRUPTED
        finally:
            if tracker is not None:
                tracker.close()
    results_in_order = [job.outcomes[c] for c in candidates if c in job.outcomes]
    return summarize(results_in_order, collection, wait=wait, as_json=as_json)


def summarize(results: list[Outcome], collection: str, *, wait: bool, as_json: bool) -> int:
    counts: dict[str, int] = {}
    for outcome in results:
        counts[outcome.status] = counts.get(outcome.status, 0) + 1
    failed = [o for o in results if o.failed]
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
    render.out.print(
        Text(f"{len(results)} {noun} → collection {collection}: ", style="bold") + Text(", ".join(parts), style=style)
    )
    if failed:
        render.out.print(Text("Failures:", style="bold red"))
        for o in failed:
            if o.error or o.document is None:
                message = o.error
            else:
                message = o.document.error_message + (f" [{o.document.error_code}]" if o.document.error_code else "")
            ident = f" ({o.document.id})" if o.document is not None else ""
            render.out.print(f"  {escape(o.candidate.display)}{ident}: {escape(message)}", highlight=False)
        if any(o.document is not None and o.document.failed for o in failed):
            render.out.print("Details: `sluice show ID`; process a FAILED document again: `sluice retry ID`.")
    if not wait:
        render.out.print("Not waiting for processing: follow with `sluice ls` or `sluice watch ID`.")
    return code


def _status_order(name: str) -> int:
    order = ["READY", "FAILED", "ERROR", "PENDING", "PARSING", "CHUNKING", "EMBEDDING", "INDEXING"]
    return order.index(name) if name in order else len(order)


def make_reporter(total: int, *, as_json: bool) -> Reporter:
    """Bars on a terminal, a line per finished file otherwise, nothing with --json."""
    if as_json:
        return Reporter()
    if render.err.is_terminal:
        return BarReporter(total)
    return LineReporter()


class Reporter:
    """Shows upload progress; the base class shows nothing (--json)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def added(self, candidate: Candidate) -> None: ...

    def uploading(self, candidate: Candidate, size: int) -> None: ...

    def update(self, candidate: Candidate, document: Document) -> None: ...

    def finished(self, outcome: Outcome) -> None: ...

    def close(self) -> None: ...


def _result_line(outcome: Outcome) -> Text:
    doc = outcome.document
    if outcome.error or doc is None:
        return Text("✗ ", style="red") + Text(outcome.candidate.display) + Text(f"  {outcome.error}", style="red")
    status = doc.status.name
    line = Text("✓ " if doc.ready else ("✗ " if doc.failed else "• "), style=render.STATUS_STYLE.get(status, "cyan"))
    line += Text(outcome.candidate.display) + Text("  ") + render.styled_status_name(status)
    if doc.ready:
        line += Text(f"  {render.chunks_label(doc.chunk_count)}", style="dim")
    if doc.error_message:
        line += Text(f"  {doc.error_message}", style="red" if doc.failed else "yellow")
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
    """On a terminal: one bar for the whole upload, a bar for each file being uploaded or
    processed (at most MAX_BARS at once), and a line per finished file (only per failure when
    there are more than SHOW_ALL_LIMIT files)."""

    MAX_BARS = 8
    SHOW_ALL_LIMIT = 50

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
        self._total = total
        self._done = {"READY": 0, "FAILED": 0, "ERROR": 0}
        self._overall = self._progress.add_task(f"[bold]{total} files", total=total, status="", detail="")
        self._tasks: dict[Candidate, Any] = {}
        self._lock = threading.Lock()
        self._progress.start()

    def _bar(self, candidate: Candidate) -> Any:
        task = self._tasks.get(candidate)
        if task is None and len(self._tasks) < self.MAX_BARS:
            name = candidate.display if len(candidate.display) <= 40 else "…" + candidate.display[-39:]
            task = self._tasks[candidate] = self._progress.add_task(escape(name), total=1000, status="", detail="")
        return task

    def uploading(self, candidate: Candidate, size: int) -> None:
        with self._lock:
            task = self._bar(candidate)
            if task is not None:
                self._progress.update(task, status="[cyan]uploading", detail=render.human_bytes(size))

    def update(self, candidate: Candidate, document: Document) -> None:
        with self._lock:
            if document.status is DocumentStatus.PENDING or document.done:
                # Waiting for a worker (or done): its bar makes room for a file that is moving.
                task = self._tasks.pop(candidate, None)
                if task is not None:
                    self._progress.remove_task(task)
                return
            task = self._bar(candidate)
            if task is None:
                return
            name = document.status.name
            self._progress.update(
                task,
                completed=int(render.fraction_done(document.raw) * 1000),
                status=f"[{render.STATUS_STYLE.get(name, 'cyan')}]{name}",
                detail=escape(render.progress_text(document.raw) or document.error_message[:60]),
            )

    def finished(self, outcome: Outcome) -> None:
        with self._lock:
            task = self._tasks.pop(outcome.candidate, None)
            if task is not None:
                self._progress.remove_task(task)
            key = "ERROR" if outcome.error else outcome.status
            self._done[key] = self._done.get(key, 0) + 1
            done = sum(self._done.values())
            self._progress.update(
                self._overall, completed=done, status=", ".join(f"{n} {name}" for name, n in self._done.items() if n), detail=""
            )
            if self._total <= self.SHOW_ALL_LIMIT or outcome.failed:
                self._progress.console.print(_result_line(outcome), soft_wrap=True)

    def close(self) -> None:
        self._progress.stop()
