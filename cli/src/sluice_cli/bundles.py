"""`sluice collections export` and `sluice collections import`: a collection as a bundle file and
back (docs/bundles.md), streamed a piece at a time through the SDK (docs/cli.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.markup import escape
from sluice_client import Client

from . import render
from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError


def collections_export(client: Client, args: argparse.Namespace) -> int:
    """The bundle into -o (`-` for stdout), never over an existing file without --force; a file
    appears under its name only once its size and SHA-256 matched the trailer."""
    if args.output == "-":
        if args.json:
            raise CliError("-o - writes the bundle to stdout: leave out --json", EXIT_USAGE, "USAGE")
        client.collections.export_collection(args.name, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return EXIT_OK
    target = Path(args.output)
    if target.is_dir():
        raise CliError(f"{target} is a folder: -o names the bundle file", EXIT_USAGE, "USAGE")
    if target.exists() and not args.force:
        raise CliError(f"{target} exists already; --force overwrites it", EXIT_FAILED, "FILE_EXISTS")
    if not target.parent.is_dir():
        raise CliError(f"{target.parent} is not a folder", EXIT_USAGE, "USAGE")
    try:
        bundle = client.collections.export_collection(args.name, target)
    except OSError as err:  # the folder is not writable, the disk is full: ours, not the server's
        raise CliError(f"cannot write {target}: {err.strerror or err}", EXIT_FAILED, "WRITE_FAILED") from None
    if args.json:
        render.print_json(
            {
                "collection": bundle.collection,
                "path": str(bundle.path),
                "format_version": bundle.format_version,
                "documents": bundle.document_count,
                "chunks": bundle.chunk_count,
                "size_bytes": str(bundle.size_bytes),  # int64 as in the contract's JSON
                "sha256": bundle.sha256,
            }
        )
    else:
        render.out.print(
            f"Exported {escape(bundle.collection)}: {bundle.document_count:,} documents, {bundle.chunk_count:,} chunks"
            f" to {escape(str(bundle.path))} ({render.human_bytes(bundle.size_bytes)}, SHA-256 checked)",
            soft_wrap=True,
        )
    return EXIT_OK


def collections_import(client: Client, args: argparse.Namespace) -> int:
    """The bundle FILE (`-` for stdin) as the collection --as; nothing is stored unless all of it
    arrived and checked out."""
    if args.file == "-":
        collection = client.collections.import_collection(sys.stdin.buffer, args.as_name, reembed=args.reembed)
    else:
        source = Path(args.file)
        if not source.is_file():
            raise CliError(f"{source} is not a file", EXIT_USAGE, "USAGE")
        try:
            collection = client.collections.import_collection(source, args.as_name, reembed=args.reembed)
        except OSError as err:
            raise CliError(f"cannot read {source}: {err.strerror or err}", EXIT_FAILED, "READ_FAILED") from None
    if args.json:
        render.print_json({"collection": collection.name, "document_count": collection.document_count, "reembed": args.reembed})
    else:
        what = "the workers embed every document again" if args.reembed else "its vectors kept"
        render.out.print(f"Imported {escape(collection.name)}: {collection.document_count:,} documents ({what})", soft_wrap=True)
    return EXIT_OK


def register(coll_sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """`sluice collections export NAME -o FILE` and `sluice collections import FILE --as NAME`."""
    export = coll_sub.add_parser(
        "export", help="write a collection to a bundle file (documents, originals, chunks, vectors)", parents=[common]
    )
    export.add_argument("name")
    export.add_argument("--output", "-o", required=True, metavar="FILE", help="the bundle file, or - for stdout")
    export.add_argument("--force", action="store_true", help="overwrite an existing file")
    export.set_defaults(handler=collections_export)
    imp = coll_sub.add_parser("import", help="create a collection from a bundle file", parents=[common])
    imp.add_argument("file", metavar="FILE", help="the bundle file, or - for stdin")
    imp.add_argument("--as", dest="as_name", required=True, metavar="NAME", help="the new collection's name")
    imp.add_argument(
        "--reembed",
        action="store_true",
        help="embed every document again with this deployment's embedder instead of keeping the bundle's vectors",
    )
    imp.set_defaults(handler=collections_import)
