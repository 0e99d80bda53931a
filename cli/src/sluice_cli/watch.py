"""`sluice watch --collection C`: follow every document event of a collection (WatchCollection).

One line per event (time, file or id, status, progress, cursor), or one JSON object per event
with --json. The stream is resumable: when the connection drops (UNAVAILABLE: the server
restarted, the network went away) the command reconnects after the last cursor it received, so
no event is missed or shown twice. Ctrl-C prints that cursor for `--cursor` to resume later.
Heartbeats are not shown; they only move the cursor.
"""

from __future__ import annotations

import time

import grpc
from rich.markup import escape

from sluice.v1 import document_pb2, document_service_pb2 as ds

from . import render
from .client import Clients
from .errors import EXIT_FAILED, EXIT_USAGE, CliError

STATUS_VALUES = {
    name: document_pb2.DocumentStatus.Value("DOCUMENT_STATUS_" + name.upper())
    for name in ("pending", "parsing", "chunking", "embedding", "indexing", "ready", "failed")
}
MAX_BACKOFF_SECONDS = 5.0
INTERRUPTED = 130


def parse_statuses(text: str | None) -> list[int]:
    if not text:
        return []
    names = [part.strip().lower() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in STATUS_VALUES]
    if unknown:
        raise CliError(f"unknown status {', '.join(unknown)}; use {', '.join(STATUS_VALUES)}", EXIT_USAGE, "INVALID_STATUS")
    return [STATUS_VALUES[name] for name in names]


def event_line(event: ds.CollectionEvent) -> str:
    doc = event.document
    status = "DELETED" if event.type == ds.COLLECTION_EVENT_TYPE_DELETED else render.status_name(doc.status)
    detail = render.progress_text(doc) or (doc.error_message[:80] if doc.status == document_pb2.DOCUMENT_STATUS_FAILED else "")
    parts = [render.timestamp(event.create_time), doc.filename or doc.id, status, detail, f"cursor={event.cursor}"]
    return "  ".join(part for part in parts if part)


def watch_collection(clients: Clients, args) -> int:
    """Print the collection's events until Ctrl-C; reconnect with the last cursor when dropped."""
    request = ds.WatchCollectionRequest(
        collection=args.collection, after_cursor=args.cursor or "", start_from_oldest=args.from_start,
        statuses=parse_statuses(args.status), terminal_only=args.terminal,
    )
    cursor = args.cursor or ""
    connected_once = False
    failures = 0
    call = None
    try:
        while True:
            if cursor:  # every connection after the first message resumes where the last one ended
                request.after_cursor, request.start_from_oldest = cursor, False
            try:
                call = clients.documents.WatchCollection(request)
                for event in call:
                    connected_once, failures = True, 0
                    cursor = event.cursor
                    if event.type == ds.COLLECTION_EVENT_TYPE_HEARTBEAT:
                        continue
                    if args.json:
                        render.print_json_line(render.to_dict(event))
                    else:
                        render.out.print(escape(event_line(event)), soft_wrap=True, highlight=False)
                # A stream that ends without an error (a proxy closing it): reconnect, not too fast.
                if not connected_once:
                    raise CliError("ingest-api ended the stream before sending anything", EXIT_FAILED, "STREAM_ENDED")
                time.sleep(0.2)
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or not connected_once:
                    raise clients.rpc_error(error) from None
                failures += 1
                render.err.print(escape(f"connection lost; reconnecting after cursor {cursor or '(start)'}"), soft_wrap=True)
                time.sleep(min(MAX_BACKOFF_SECONDS, 0.2 * 2**failures))
    except KeyboardInterrupt:
        if call is not None:
            call.cancel()  # end the stream now: an open call can hold the process at exit
        hint = f"sluice watch --collection {args.collection} --cursor {cursor}" if cursor else "nothing received yet"
        render.err.print(escape(f"stopped; last cursor {cursor or '-'}; resume with: {hint}"), soft_wrap=True)
        return INTERRUPTED
