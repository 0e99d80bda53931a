"""`sluice watch --collection C`: follow every document event of a collection (WatchCollection),
and the sync runs of its sources (started, progress, finished; `--source-runs`).

One line per event (time, file or id, status, progress, cursor; for a run: its source, what
happened and its counts), or one JSON object per event with --json. The stream is resumable: when the connection drops (the server restarted, the
network went away) the SDK reconnects after the last cursor it received, so no event is
missed or shown twice. Ctrl-C prints that cursor for `--cursor` to resume later. Heartbeats are
not shown; they only move the cursor.
"""

from __future__ import annotations

import argparse

from rich.markup import escape
from sluice_client import Client, CollectionEvent, DocumentStatus, SluiceError

from . import render
from .errors import EXIT_USAGE, CliError
from .sources import run_line

STATUS_NAMES = ("pending", "parsing", "chunking", "embedding", "indexing", "ready", "failed")
INTERRUPTED = 130


def parse_statuses(text: str | None) -> list[DocumentStatus]:
    if not text:
        return []
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in STATUS_NAMES]
    if unknown:
        raise CliError(f"unknown status {', '.join(unknown)}; use {', '.join(STATUS_NAMES)}", EXIT_USAGE, "INVALID_STATUS")
    return [DocumentStatus.of(name) for name in names]


def run_event_line(event: CollectionEvent) -> str:
    """`… source handbook  run progress  running: listed 120, uploaded 30, … cursor=…`."""
    assert event.source_run is not None
    run = event.source_run.run
    label = event.source_run.source_display_name or event.source_run.source.rsplit("/", 1)[-1]
    happened = event.kind.removeprefix("SOURCE_RUN_").lower()
    parts = [
        render.timestamp(event.raw.create_time),
        f"source {label}",
        f"run {happened}",
        run_line(run),
        run.error_message[:200] if happened == "finished" else "",
        f"cursor={event.cursor}",
    ]
    return "  ".join(part for part in parts if part)


def event_line(event: CollectionEvent) -> str:
    if event.source_run is not None:
        return run_event_line(event)
    doc = event.document
    if doc is None:
        return f"cursor={event.cursor}"
    status = "DELETED" if event.kind == "DELETED" else doc.status.name
    detail = render.progress_text(doc.raw) or (doc.error_message[:80] if doc.failed else "")
    parts = [render.timestamp(event.raw.create_time), doc.filename or doc.id, status, detail, f"cursor={event.cursor}"]
    return "  ".join(part for part in parts if part)


def watch_collection(client: Client, args: argparse.Namespace) -> int:
    """Print the collection's events until Ctrl-C; reconnect with the last cursor when dropped."""

    def reconnecting(cursor: str, error: SluiceError) -> None:
        render.err.print(escape(f"connection lost; reconnecting after cursor {cursor or '(start)'}"), soft_wrap=True)

    events = client.collections.watch(
        args.collection,
        cursor=args.cursor or "",
        from_start=args.from_start,
        statuses=parse_statuses(args.status),
        terminal_only=args.terminal,
        on_reconnect=reconnecting,
        source_runs=args.source_runs,
    )
    try:
        for event in events:
            if args.json:
                render.print_json_line(render.to_dict(event.raw))
            else:
                render.out.print(escape(event_line(event)), soft_wrap=True, highlight=False)
    except KeyboardInterrupt:
        events.close()  # end the stream now: an open call can hold the process at exit
        cursor = events.cursor
        hint = f"sluice watch --collection {args.collection} --cursor {cursor}" if cursor else "nothing received yet"
        render.err.print(escape(f"stopped; last cursor {cursor or '-'}; resume with: {hint}"), soft_wrap=True)
        return INTERRUPTED
    return 0
