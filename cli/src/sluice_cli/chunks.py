"""`sluice chunks …` and `sluice documents download`: a document's chunks as search sees them
(list, disable, enable, edit; docs/cli.md, "Chunks") and its original bytes back."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.markup import escape
from rich.text import Text
from sluice_client import Chunk, Client
from sluice_client.downloads import safe_filename

from . import render
from .commands import resolve_document_id
from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError

# `chunks list` shows its first page of FIRST_PAGE chunks; --all reads every page, PAGE_SIZE at a time (the server's largest).
FIRST_PAGE, PAGE_SIZE = 100, 1000


def _non_negative(value: str) -> int:
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return number


def chunks_list(client: Client, args: argparse.Namespace) -> int:
    document_id = resolve_document_id(client, args.document, args.collection or "")
    size = PAGE_SIZE if args.all else FIRST_PAGE
    page = client.documents.list_chunks(document_id, page_size=size, generation=args.generation)
    chunks = list(page.chunks)
    if args.all and page.next_page_token:
        token = page.next_page_token
        while token:
            more = client.documents.list_chunks(document_id, page_size=PAGE_SIZE, page_token=token, generation=args.generation)
            chunks.extend(more.chunks)
            token = more.next_page_token
        rest = ""
    else:
        rest = page.next_page_token
    if args.json:
        render.print_json(
            {
                "document_id": document_id,
                "generation": page.generation,
                "total_size": page.total_size,
                "chunks": [render.to_dict(c.raw) for c in chunks],
                "next_page_token": rest,
            }
        )
        return EXIT_OK
    if not chunks:
        render.out.print(f"No chunks: document {document_id} has none in generation {page.generation} (only READY ones do).")
        return EXIT_OK
    render.out.print(render.chunks_table(c.raw for c in chunks))
    disabled = sum(1 for c in chunks if not c.enabled)
    summary = f"{len(chunks)} of {page.total_size} chunk(s), generation {page.generation}"
    summary += f", {disabled} disabled" if disabled else ""
    summary += "; --all for every one" if rest else ""
    render.out.print(Text(summary, style="dim"))
    return EXIT_OK


def _print_chunk(chunk: Chunk, done: str, as_json: bool) -> None:
    if as_json:
        render.print_json(render.to_dict(chunk.raw))
        return
    state = "enabled" if chunk.enabled else "disabled"
    edited = ", edited" if chunk.edited else ""
    render.out.print(
        f"{done} chunk #{chunk.chunk_index} of {chunk.document_id} ({chunk.id}): {state}{edited}, "
        f"{chunk.token_count} tokens, etag {escape(chunk.etag)}",
        soft_wrap=True,
    )


def chunks_disable(client: Client, args: argparse.Namespace) -> int:
    chunk = client.documents.disable_chunk(args.chunk_id, etag=args.etag)
    _print_chunk(chunk, "Disabled", args.json)
    return EXIT_OK


def chunks_enable(client: Client, args: argparse.Namespace) -> int:
    chunk = client.documents.enable_chunk(args.chunk_id, etag=args.etag)
    _print_chunk(chunk, "Enabled", args.json)
    return EXIT_OK


def _new_text(args: argparse.Namespace) -> str:
    if args.text is not None:
        return str(args.text)
    if args.file is not None:
        try:
            return Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise CliError(f"cannot read {args.file}: {getattr(err, 'strerror', None) or err}", EXIT_USAGE, "USAGE") from None
    if args.stdin == "-":
        return sys.stdin.read()
    raise CliError("give the new text: --text TEXT, --file PATH, or - to read it from stdin", EXIT_USAGE, "MISSING_ARGUMENT")


def chunks_edit(client: Client, args: argparse.Namespace) -> int:
    if args.stdin not in (None, "-"):
        raise CliError(f"unexpected argument {args.stdin!r}: only - (read the text from stdin)", EXIT_USAGE, "USAGE")
    chunk = client.documents.edit_chunk(args.chunk_id, _new_text(args), etag=args.etag)
    _print_chunk(chunk, "Edited", args.json)
    return EXIT_OK


def documents_download(client: Client, args: argparse.Namespace) -> int:
    """The original bytes into -o (a file or a folder; default the document's file name here),
    never over an existing file without --force; `-o -` writes them to stdout."""
    document_id = resolve_document_id(client, args.document, args.collection or "")
    if args.output == "-":
        if args.json:
            raise CliError("-o - writes the bytes to stdout: leave out --json", EXIT_USAGE, "USAGE")
        client.documents.download(document_id, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return EXIT_OK  # a mismatch is raised after the bytes went out; the exit code says so
    document = client.documents.get(document_id)
    name = safe_filename(document.filename, document.id)
    target = Path(args.output) if args.output else Path.cwd() / name
    if target.is_dir():
        target = target / name
    if target.exists() and not args.force:
        raise CliError(f"{target} exists already; --force overwrites it", EXIT_FAILED, "FILE_EXISTS")
    if not target.parent.is_dir():
        raise CliError(f"{target.parent} is not a folder", EXIT_USAGE, "USAGE")
    try:
        written = client.documents.download(document_id, target)
    except OSError as err:  # the folder is not writable, the disk is full: ours, not the server's
        raise CliError(f"cannot write {target}: {err.strerror or err}", EXIT_FAILED, "WRITE_FAILED") from None
    if args.json:
        render.print_json(
            {
                "document_id": document_id,
                "path": str(written.path),
                "filename": written.filename,
                "mime_type": written.mime_type,
                "size_bytes": str(written.size_bytes),  # int64 as in the contract's JSON
                "content_sha256": written.content_sha256,
            }
        )
    else:
        render.out.print(
            f"Downloaded {escape(written.filename)} ({render.human_bytes(written.size_bytes)}, SHA-256 checked) "
            f"to {escape(str(written.path))}",
            soft_wrap=True,
        )
    return EXIT_OK


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """`sluice chunks list/disable/enable/edit` and `sluice documents download`."""
    chunks = sub.add_parser("chunks", help="a document's chunks: list, disable, enable, edit", parents=[common])
    chunks_sub = chunks.add_subparsers(dest="chunks_command", metavar="ACTION")
    chunks_sub.required = True
    clist = chunks_sub.add_parser(
        "list", aliases=["ls"], help="a document's chunks: index, page, tokens, enabled, text", parents=[common]
    )
    clist.add_argument("document", metavar="DOC", help="document id (or unique id prefix or file name)")
    clist.add_argument("--collection", "-c", help="narrow a prefix or file name to this collection")
    clist.add_argument(
        "--generation",
        type=_non_negative,
        default=0,
        metavar="N",
        help="the index generation to list (e.g. the BUILDING one of a reindex); default the ACTIVE one",
    )
    clist.add_argument("--all", action="store_true", help=f"every chunk (default: the first {FIRST_PAGE})")
    clist.set_defaults(handler=chunks_list)
    for name, help_text, handler in (
        ("disable", "take a chunk out of search (nothing is re-embedded)", chunks_disable),
        ("enable", "put a disabled chunk back into search", chunks_enable),
    ):
        p = chunks_sub.add_parser(name, help=help_text, parents=[common])
        p.add_argument("chunk_id", metavar="CHUNK_ID", help="the chunk's id (`sluice chunks list`, or a hit's chunk_id)")
        p.add_argument("--etag", help="refuse the change if the chunk changed since this etag was read")
        p.set_defaults(handler=handler)
    edit = chunks_sub.add_parser("edit", help="replace a chunk's text (embedded again, this chunk alone)", parents=[common])
    edit.add_argument("chunk_id", metavar="CHUNK_ID")
    source = edit.add_mutually_exclusive_group()
    source.add_argument("--text", help="the new text")
    source.add_argument("--file", metavar="PATH", help="read the new text from this file (UTF-8)")
    source.add_argument("stdin", nargs="?", metavar="-", help="- reads the new text from stdin")
    edit.add_argument("--etag", help="refuse the edit if the chunk changed since this etag was read")
    edit.set_defaults(handler=chunks_edit)

    documents = sub.add_parser("documents", help="a document's original bytes", parents=[common])
    documents_sub = documents.add_subparsers(dest="documents_command", metavar="ACTION")
    documents_sub.required = True
    download = documents_sub.add_parser(
        "download", help="download a document's original file (its SHA-256 checked)", parents=[common]
    )
    download.add_argument("document", metavar="DOC", help="document id (or unique id prefix or file name)")
    download.add_argument("--collection", "-c", help="narrow a prefix or file name to this collection")
    download.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write it: a file, a folder, or - for stdout (default: its file name here)",
    )
    download.add_argument("--force", action="store_true", help="overwrite an existing file")
    download.set_defaults(handler=documents_download)
