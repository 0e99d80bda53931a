"""`sluice sources …`: folders, buckets, sites and repositories kept in step with a collection by
the server (docs/sources.md). `sluice sync DIR` stays the client-side sync of a local folder."""

from __future__ import annotations

import argparse
import time

from rich.markup import escape
from rich.table import Table
from sluice_client import Client
from sluice_client.sources import Source, SourceRun

from . import render
from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError


def _where(source: Source) -> str:
    raw = source.raw
    field = raw.WhichOneof("spec")
    if field == "local_folder":
        return raw.local_folder.path + (f" ({raw.local_folder.glob})" if raw.local_folder.glob else "")
    if field == "s3":
        return f"{raw.s3.endpoint} s3://{raw.s3.bucket}/{raw.s3.prefix}"
    if field == "http":
        return raw.http.sitemap_url or f"crawl {raw.http.start_url}"
    if field == "git":
        return (
            raw.git.repository + (f"@{raw.git.ref}" if raw.git.ref else "") + (f":{raw.git.subpath}" if raw.git.subpath else "")
        )
    return ""


def run_line(run: SourceRun) -> str:
    counts = (
        f"listed {run.listed}, uploaded {run.uploaded}, unchanged {run.unchanged}, deleted {run.deleted}, failed {run.failed}"
    )
    if run.state == "blocked_mass_delete":
        counts += f", would delete {run.would_delete}"
    return f"{run.state}: {counts}"


def add(client: Client, args: argparse.Namespace) -> int:
    kinds = [k for k in ("folder", "s3", "sitemap", "crawl", "git") if getattr(args, k)]
    if len(kinds) != 1:
        raise CliError("give exactly one of --folder, --s3, --sitemap, --crawl or --git", EXIT_USAGE)
    source = client.sources.create(
        args.collection,
        display_name=args.name or "",
        every_seconds=args.every or 0,
        max_delete_share=args.max_delete_share or 0.0,
        folder=args.folder,
        glob=args.glob or "",
        s3_endpoint=args.s3,
        bucket=args.bucket or "",
        prefix=args.prefix or "",
        region=args.region or "",
        access_key_id_env=args.access_key_env or "",
        secret_access_key_env=args.secret_key_env or "",
        sitemap_url=args.sitemap,
        start_url=args.crawl,
        max_pages=args.max_pages or 0,
        git=args.git,
        ref=args.ref or "",
        subpath=args.subpath or "",
    )
    if args.json:
        render.print_json({"source": render.to_dict(source.raw)})
    else:
        render.out.print(
            f"Created source [bold]{escape(source.name)}[/] ({source.kind}: {escape(_where(source))}). "
            f"Sync it with `sluice sources sync {source.id}`."
        )
    return EXIT_OK


def ls(client: Client, args: argparse.Namespace) -> int:
    sources = list(client.sources.list(args.collection or None))
    if args.json:
        render.print_json({"sources": [render.to_dict(s.raw) for s in sources]})
        return EXIT_OK
    table = Table(box=None, header_style="bold")
    for column in ("ID", "COLLECTION", "KIND", "WHERE", "EVERY", "LAST RUN"):
        table.add_column(column)
    for s in sources:
        every = f"{s.schedule_interval_seconds}s" if s.schedule_interval_seconds else ""
        table.add_row(
            s.id,
            escape(s.collection),
            s.kind,
            escape(_where(s)),
            every,
            escape(run_line(s.last_run)) if s.last_run else "never synced",
        )
    render.out.print(table)
    return EXIT_OK


def _sync_following(client: Client, args: argparse.Namespace) -> SourceRun:
    """Ask for the run and print its progress from the collection's stream of run events
    (WatchCollection, run events only) until it finishes. The stream is opened first, so the
    run's events cannot pass before it listens."""
    collection = client.sources.get(args.source).collection
    deadline = time.monotonic() + args.timeout
    events = client.collections.watch(collection, source_runs="only", heartbeats=True)
    with events:
        run: SourceRun | None = None
        for event in events:
            if run is None:  # the stream is open (its first message): now ask for the run
                run = client.sources.sync(args.source, allow_mass_delete=args.allow_mass_delete)
                render.out.print(escape(f"sync run {run.id}: {run.state}"), highlight=False)
            if event.source_run is not None and event.source_run.run.id == run.id:
                run = event.source_run.run
                if event.kind == "SOURCE_RUN_FINISHED":
                    return run
                render.out.print(escape(f"{event.kind.removeprefix('SOURCE_RUN_').lower()}  {run_line(run)}"), highlight=False)
            if time.monotonic() > deadline:
                raise CliError(
                    f"the sync run {run.id} did not end within {args.timeout:.0f} s (it is {run.state})", EXIT_FAILED, "TIMEOUT"
                )
    raise CliError("the collection's event stream ended before the run did", EXIT_FAILED)


def sync(client: Client, args: argparse.Namespace) -> int:
    if args.wait and not args.json:
        run = _sync_following(client, args)
    else:
        run = client.sources.sync(args.source, allow_mass_delete=args.allow_mass_delete, wait=args.wait, timeout=args.timeout)
    if args.json:
        render.print_json({"run": render.to_dict(run.raw)})
    elif not args.wait:
        render.out.print(
            f"Sync run {run.id} is {run.state}; follow it with `sluice sources ls` or `sluice sources sync {args.source} --wait`."
        )
    else:
        render.out.print(escape(run_line(run)))
        if run.error_message:
            render.out.print(escape(run.error_message), markup=False, highlight=False, soft_wrap=True)
    if args.wait and run.state != "succeeded":
        return EXIT_FAILED
    return EXIT_OK


def rm(client: Client, args: argparse.Namespace) -> int:
    client.sources.delete(args.source)
    if args.json:
        render.print_json({"deleted": args.source})
    else:
        render.out.print(f"Deleted source {escape(args.source)}; the documents it synced stay.")
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """`sluice sources add/ls/sync/rm`."""
    sources = sub.add_parser(
        "sources", help="folders, buckets, sites and repositories the server keeps in sync", parents=[common]
    )
    sources_sub = sources.add_subparsers(dest="sources_command", metavar="ACTION")
    sources_sub.required = True
    sadd = sources_sub.add_parser(
        "add", help="add a source to a collection (one of --folder, --s3, --sitemap, --crawl, --git)", parents=[common]
    )
    sadd.add_argument("collection")
    sadd.add_argument("--folder", metavar="PATH", help="a folder on the server, under SLUICE_SOURCE_LOCAL_ROOTS")
    sadd.add_argument("--glob", help="with --folder: which files, e.g. '**/*.md'")
    sadd.add_argument("--s3", metavar="ENDPOINT", help="an S3-compatible endpoint URL (with --bucket)")
    sadd.add_argument("--bucket")
    sadd.add_argument("--prefix")
    sadd.add_argument("--region")
    sadd.add_argument("--access-key-env", metavar="NAME", help="the server's environment variable holding the key id")
    sadd.add_argument("--secret-key-env", metavar="NAME", help="the server's environment variable holding the secret key")
    sadd.add_argument("--sitemap", metavar="URL", help="the pages of a sitemap")
    sadd.add_argument("--crawl", metavar="URL", help="a same-host crawl from this URL (obeys robots.txt)")
    sadd.add_argument("--max-pages", type=int, help="with --sitemap or --crawl: at most this many pages (default 100)")
    sadd.add_argument("--git", metavar="REPOSITORY", help="an http(s) git URL, or a path on the server")
    sadd.add_argument("--ref", help="with --git: a branch or tag")
    sadd.add_argument("--subpath", help="with --git: only files under this folder")
    sadd.add_argument("--name", help="a label for people")
    sadd.add_argument("--every", type=int, metavar="SECONDS", help="sync on a schedule (at least 60)")
    sadd.add_argument(
        "--max-delete-share",
        type=float,
        metavar="SHARE",
        help="a run deleting more than this share of the collection stops (default 0.2)",
    )
    sadd.set_defaults(handler=add)
    sls = sources_sub.add_parser("list", aliases=["ls"], help="list sources with their last run", parents=[common])
    sls.add_argument("--collection", "-c")
    sls.set_defaults(handler=ls)
    ssync = sources_sub.add_parser("sync", help="sync a source now", parents=[common])
    ssync.add_argument("source", help="collections/C/sources/ID, or the id")
    ssync.add_argument(
        "--allow-mass-delete", action="store_true", help="let this run delete more than the source's max delete share"
    )
    ssync.add_argument("--wait", action="store_true", help="print the run's progress until it ends (exit 1 unless it SUCCEEDED)")
    ssync.add_argument("--timeout", type=float, default=3600.0, help="with --wait: give up after this many seconds")
    ssync.set_defaults(handler=sync)
    srm = sources_sub.add_parser("delete", aliases=["rm"], help="delete a source (its documents stay)", parents=[common])
    srm.add_argument("source")
    srm.set_defaults(handler=rm)
