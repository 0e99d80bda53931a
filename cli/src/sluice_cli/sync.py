"""`sluice sync DIR --collection NAME [--delete]`: bring a collection up to date with a folder,
once (docs/cli.md, "sync").

The SDK's `documents.sync_folder` does the work (the plan, the uploads, the wait, the
deletions and the mass-delete guard); this module shows its progress with `sluice upload`'s
reporters and prints one summary line, or the counts as JSON. Exit code 1 when anything
failed or the guard refused.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.markup import escape
from rich.text import Text
from sluice_client import Client, Document, MassDeleteRefused, SyncReport, UploadResult
from sluice_client.sync import DEFAULT_MAX_DELETE_SHARE, SyncPlan

from . import render
from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from .files import Candidate
from .upload import INTERRUPTED, MAX_UPLOADS, Outcome, Reporter, UploadJob, make_reporter


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    sync = sub.add_parser(
        "sync",
        help="bring a collection up to date with a folder: upload new and changed files, "
        "optionally delete the documents of removed ones",
        parents=[common],
    )
    sync.add_argument("folder", metavar="DIR")
    sync.add_argument("--collection", "-c", required=True)
    sync.add_argument(
        "--delete",
        action="store_true",
        help="delete the collection's sources (documents with a source_uri) that have no file any more",
    )
    sync.add_argument(
        "--allow-mass-delete",
        action="store_true",
        help="delete even when more than --max-delete-share of the collection's sources would go",
    )
    sync.add_argument(
        "--max-delete-share",
        type=_share,
        default=DEFAULT_MAX_DELETE_SHARE,
        metavar="SHARE",
        help=f"without --allow-mass-delete, refuse a run that would delete more than this share of the "
        f"collection's sources (default {DEFAULT_MAX_DELETE_SHARE})",
    )
    sync.add_argument("--include-hidden", action="store_true", help="take hidden files and folders too (.git, .env)")
    sync.add_argument("--no-wait", action="store_true", help="return once uploaded, without following processing")
    sync.add_argument(
        "--timeout", type=float, default=0, metavar="SECONDS", help="stop waiting after this long (exit 1); 0 waits forever"
    )
    sync.set_defaults(handler=_sync)


def _share(value: str) -> float:
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if not 0.0 <= share <= 1.0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a share between 0 and 1")
    return share


def _sync(client: Client, args: argparse.Namespace) -> int:
    return run_sync(
        client,
        args.folder,
        args.collection,
        delete=args.delete,
        allow_mass_delete=args.allow_mass_delete,
        max_delete_share=args.max_delete_share,
        include_hidden=args.include_hidden,
        wait=not args.no_wait,
        timeout=args.timeout,
        as_json=args.json,
    )


class SyncProgress:
    """Feeds `sluice upload`'s reporter from the SDK's hooks: the uploads are known once planned."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.waiting = False
        self.reporter: Reporter | None = None
        self.job: UploadJob | None = None

    def planned(self, plan: SyncPlan) -> None:
        if not plan.uploads:
            return
        candidates = [Candidate(item.path, item.source_uri, item.source_uri) for item in plan.uploads]
        self.reporter = make_reporter(len(candidates), as_json=self.as_json)
        self.job = UploadJob(candidates, self.reporter)
        for candidate in candidates:
            self.reporter.added(candidate)

    def starting(self, path: object) -> None:
        if self.job is not None:
            self.job.starting(path)

    def uploaded(self, result: UploadResult) -> None:
        """An upload ended; its document is followed (the SDK tracks it) until READY or FAILED."""
        job = self.job
        if job is None:
            return
        if result.document is None:
            job.uploaded(result, None)  # the failure path: finished at once
            return
        outcome = Outcome(job.by_path[result.source], result.document)
        with job.lock:
            job.outcomes[outcome.candidate] = outcome
            job.by_id.setdefault(result.document.id, []).append(outcome)
        job.changed(result.document, final=not self.waiting)

    def changed(self, document: Document) -> None:
        if self.job is not None:
            self.job.changed(document)

    def finish(self, report: SyncReport) -> None:
        """Every file the wait left unfinished (a timeout) gets its line too."""
        job = self.job
        if job is None:
            return
        errors = {failure.path: failure.error for failure in report.failed if failure.path is not None}
        for candidate, outcome in list(job.outcomes.items()):
            if candidate not in job.finished:
                if candidate.path in errors and not outcome.error:
                    outcome.error, outcome.exit_code = errors[candidate.path], EXIT_FAILED
                job.finish(outcome)

    def close(self) -> None:
        if self.reporter is not None:
            self.reporter.close()


def run_sync(
    client: Client,
    folder: str,
    collection: str,
    *,
    delete: bool,
    allow_mass_delete: bool,
    max_delete_share: float,
    include_hidden: bool,
    wait: bool,
    timeout: float,
    as_json: bool,
) -> int:
    # The collection first: an unknown name is exit 3 before anything is read or sent.
    client.collections.get(collection)
    path = Path(folder)
    if not path.is_dir():
        raise CliError(
            f"{folder} is not a folder: `sluice sync` takes one folder (upload single files with `sluice upload`)",
            EXIT_USAGE,
            "PATH_NOT_FOUND",
        )
    progress = SyncProgress(as_json)
    progress.waiting = wait
    started = time.monotonic()
    try:
        report = client.documents.sync_folder(
            collection,
            path,
            delete=delete,
            allow_mass_delete=allow_mass_delete,
            max_delete_share=max_delete_share,
            concurrency=MAX_UPLOADS,
            include_hidden=include_hidden,
            wait=wait,
            timeout=timeout if timeout > 0 else None,
            on_plan=progress.planned,
            on_start=progress.starting,
            on_uploaded=progress.uploaded,
            on_change=progress.changed,
        )
        progress.finish(report)
    except MassDeleteRefused as refused:
        message = (
            f"refusing to delete {refused.would_delete} of the {refused.sources} sources of collection {collection} "
            f"({refused.would_delete / refused.sources:.0%}, more than --max-delete-share "
            f"{refused.max_delete_share:g}): nothing was uploaded or deleted. If {folder} really lost these files, "
            "run again with --allow-mass-delete"
        )
        raise CliError(message, EXIT_FAILED, refused.reason) from None
    except KeyboardInterrupt:
        progress.close()
        client.close()  # ends the uploads in flight; what was stored stays
        render.err.print(
            "interrupted: uploaded documents keep processing on the server; nothing was deleted unless reported; see `sluice ls`"
        )
        return INTERRUPTED
    finally:
        progress.close()
    return summarize(report, folder, seconds=time.monotonic() - started, as_json=as_json)


def summarize(report: SyncReport, folder: str, *, seconds: float, as_json: bool) -> int:
    code = EXIT_FAILED if report.failed else EXIT_OK
    if as_json:
        render.print_json(
            {
                "folder": folder,
                "collection": report.collection,
                "counts": report.counts,
                "new": [d.source_uri for d in report.new],
                "updated": [d.source_uri for d in report.updated],
                "deleted": report.deleted,
                "kept": report.kept,
                "failures": [
                    {
                        "source_uri": f.source_uri,
                        "path": str(f.path) if f.path else None,
                        "error": f.error,
                        "document_id": f.document.id if f.document else None,
                    }
                    for f in report.failed
                ],
                "waited": report.waited,
                "seconds": round(seconds, 3),
                "exit_code": code,
            }
        )
        return code
    counts = report.counts
    parts = [
        f"{counts['new']} new",
        f"{counts['updated']} updated",
        f"{counts['unchanged']} unchanged",
        f"{counts['deleted']} deleted",
    ]
    if counts["failed"]:
        parts.append(f"{counts['failed']} failed")
    render.out.print(
        Text(f"{folder} → collection {report.collection}: ", style="bold")
        + Text(", ".join(parts), style="red" if report.failed else "green")
    )
    if report.failed:
        render.out.print(Text("Failures:", style="bold red"))
        for failure in report.failed:
            ident = f" ({failure.document.id})" if failure.document is not None else ""
            render.out.print(f"  {escape(failure.source_uri)}{ident}: {escape(failure.error)}", highlight=False)
        if any(f.document is not None and f.document.failed for f in report.failed):
            render.out.print("Details: `sluice show ID`; process a FAILED document again: `sluice retry ID`.")
    if report.kept:
        noun = "source has" if len(report.kept) == 1 else "sources have"
        render.out.print(
            f"{len(report.kept)} {noun} no file any more and stayed in the collection (delete them with --delete).",
            highlight=False,
        )
    if not report.waited and (report.new or report.updated):
        render.out.print("Not waiting for processing: follow with `sluice ls` or `sluice watch ID`.")
    return code
