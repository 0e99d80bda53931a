"""`sluice`: the command-line client of Sluice.

Exit codes (scripts may rely on them): 0 ok, 1 operation failed, 2 usage error or invalid
argument, 3 not found, 4 server unavailable. Errors are one line on stderr (a JSON object
with --json), never a traceback.
"""

from __future__ import annotations

import os

# gRPC core logs a failed TLS handshake or a refused connection at INFO on stderr, around the
# CLI's own one-line error that says what failed; only its errors are shown (unless
# GRPC_VERBOSITY is set).
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import argparse
import json
import sys
from collections.abc import Callable

import grpc
from rich.markup import escape
from sluice_client import Client, SluiceError
from sluice_client.client import ROLES
from sluice_client.types import WEBHOOK_EVENT_TYPES

from . import __version__, admin, bundles, chunks, commands, evaluate, maintenance, mcp, render, sources, sync, typed, webhooks
from .client import open_client
from .errors import EXIT_FAILED, EXIT_USAGE, CliError, from_rpc_error, from_sdk_error
from .upload import run_upload

# What a subcommand runs (set_defaults(handler=...)): its exit code.
Handler = Callable[[Client, argparse.Namespace], int]

EPILOG = """exit codes: 0 ok, 1 operation failed (e.g. a document FAILED), 2 usage error or invalid
argument, 3 not found, 4 server unavailable (not running, unreachable, TLS handshake failed).
environment: SLUICE_INGEST_ADDRESS (default localhost:50051), SLUICE_SEARCH_ADDRESS
(default localhost:50052), SLUICE_API_KEY (else the keys in .sluice/credentials, written by
`make run`), SLUICE_TLS_CA_FILE, SLUICE_TLS_CLIENT_CERT_FILE and SLUICE_TLS_CLIENT_KEY_FILE
(mutual TLS), SLUICE_TENANT."""


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    """Options accepted both before and after the subcommand (`sluice --json ls` or `sluice ls --json`)."""
    parent = argparse.ArgumentParser(add_help=False)
    # Without defaults (the copy after the subcommand), an option left out does not overwrite
    # the value given before the subcommand.
    default = None if defaults else argparse.SUPPRESS
    parent.add_argument(
        "--json", action="store_true", help="machine-readable JSON output", default=False if defaults else default
    )
    parent.add_argument(
        "--ingest-address", metavar="HOST:PORT", help="ingest-api address (env SLUICE_INGEST_ADDRESS)", default=default
    )
    parent.add_argument(
        "--search-address", metavar="HOST:PORT", help="search address (env SLUICE_SEARCH_ADDRESS)", default=default
    )
    parent.add_argument(
        "--api-key",
        metavar="KEY",
        help="API key for every call (env SLUICE_API_KEY; default: .sluice/credentials)",
        default=default,
    )
    parent.add_argument(
        "--ca-file", metavar="PEM", help="CA of the servers' TLS certificates (env SLUICE_TLS_CA_FILE)", default=default
    )
    parent.add_argument(
        "--tls-cert", metavar="PEM", help="client certificate for mutual TLS (env SLUICE_TLS_CLIENT_CERT_FILE)", default=default
    )
    parent.add_argument(
        "--tls-key", metavar="PEM", help="the client certificate's key (env SLUICE_TLS_CLIENT_KEY_FILE)", default=default
    )
    parent.add_argument(
        "--as-tenant", metavar="NAME", help="act for this tenant (admin keys; env SLUICE_TENANT)", default=default
    )
    return parent


def _positive(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {value}")
    return number


def _non_negative(value: str) -> int:
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return number


def _key_value(value: str) -> str:
    if "=" not in value or value.startswith("="):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    common = _common_options(defaults=False)
    parser = argparse.ArgumentParser(
        prog="sluice",
        description="Upload documents to Sluice, follow their processing and search them.",
        epilog=EPILOG,
        parents=[_common_options(defaults=True)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"sluice {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    # collections
    coll = sub.add_parser("collections", help="create, list, show, reindex and delete collections", parents=[common])
    coll_sub = coll.add_subparsers(dest="collections_command", metavar="ACTION")
    coll_sub.required = True
    create = coll_sub.add_parser("create", help="create a collection", parents=[common])
    create.add_argument("name")
    create.add_argument(
        "--embedder",
        choices=sorted(commands.EMBEDDERS),
        default=commands.default_embedder(),
        help="local: a model on the servers' CPU, offline (the default); hashing: fast, "
        "for tests; openai: any OpenAI-compatible API configured on the servers",
    )
    create.add_argument(
        "--model",
        help="model name (local: all-MiniLM-L6-v2 or multilingual-e5-small, default the "
        "server's; hashing; openai: text-embedding-3-small)",
    )
    create.add_argument("--dimensions", type=_positive, help="vector size (default: 384, 256, 1536)")
    create.add_argument("--chunk-size", type=_positive, metavar="CHARS", help="maximum characters per chunk")
    create.add_argument(
        "--overlap",
        type=_non_negative,
        metavar="CHARS",
        help="characters repeated between chunks (default: the server's, 150; 0 for none)",
    )
    create.add_argument("--max-attempts", type=_positive, help="processing attempts per document before FAILED")
    create.add_argument("--description", help="a description for people")
    create.add_argument(
        "--vector-precision",
        choices=["float4", "halfvec", "binary"],
        default="",
        help="how the vector index stores vectors: halfvec (default: half float4's index, the "
        "same recall and speed), float4 or binary (1 bit a dimension, candidates re-scored exactly; large "
        "collections); scores are always exact (docs/search.md, 'Vector precision')",
    )
    create.set_defaults(handler=commands.collections_create)
    lst = coll_sub.add_parser("list", aliases=["ls"], help="list collections", parents=[common])
    lst.set_defaults(handler=commands.collections_list)
    cshow = coll_sub.add_parser("show", aliases=["get"], help="show one collection and its index generations", parents=[common])
    cshow.add_argument("name")
    cshow.set_defaults(handler=commands.collections_show)
    reindex = coll_sub.add_parser(
        "reindex", help="change a collection's embedder without downtime (progress bar until the switch)", parents=[common]
    )
    reindex.add_argument("name")
    reindex.add_argument(
        "--embedder",
        choices=sorted(commands.EMBEDDERS),
        default=commands.default_embedder(),
        help="the new embedder, as for `collections create`",
    )
    reindex.add_argument("--model", help="model name, as for `collections create`")
    reindex.add_argument("--dimensions", type=_positive, help="vector size (default: 384, 256, 1536)")
    reindex.add_argument(
        "--eval-set",
        metavar="QUERIES.jsonl",
        help="switch only if the new generation scores at least as well on these queries"
        " (MRR@10, the format of `sluice eval`); otherwise it is cancelled",
    )
    reindex.add_argument(
        "--min-ratio",
        type=float,
        default=0.0,
        metavar="R",
        help="with --eval-set: the new score must reach R times the current one (default 1.0)",
    )
    reindex.add_argument("--no-wait", action="store_true", help="return once started, without following it")
    reindex.add_argument(
        "--timeout",
        type=float,
        default=0,
        metavar="SECONDS",
        help="stop waiting after this long (exit 1; the reindex goes on); 0 waits forever",
    )
    reindex.add_argument("--cancel", action="store_true", help="cancel the reindex in progress (drops the new generation)")
    reindex.set_defaults(handler=commands.collections_reindex)
    delete = coll_sub.add_parser("delete", aliases=["rm"], help="delete a collection", parents=[common])
    delete.add_argument("name")
    delete.add_argument("--force", action="store_true", help="also delete its documents")
    delete.set_defaults(handler=commands.collections_delete)
    bundles.register(coll_sub, common)  # `sluice collections export/import` (docs/cli.md)

    # upload
    up = sub.add_parser("upload", help="upload files and folders (recursive) and follow them to READY", parents=[common])
    up.add_argument("paths", nargs="+", metavar="PATH")
    up.add_argument("--collection", "-c", required=True)
    up.add_argument("--no-wait", action="store_true", help="return once uploaded, without following processing")
    up.add_argument(
        "--timeout", type=float, default=0, metavar="SECONDS", help="stop waiting after this long (exit 1); 0 waits forever"
    )
    up.add_argument(
        "--metadata",
        "-m",
        action="append",
        type=_key_value,
        metavar="KEY=VALUE",
        help="metadata for every uploaded document (repeatable)",
    )
    up.add_argument(
        "--typed",
        action="append",
        type=_key_value,
        metavar="KEY=VALUE",
        help="typed metadata (repeatable): true/false, numbers, ISO dates and [a,b] lists keep their type; quote to keep text",
    )
    up.add_argument(
        "--source-uri-from-path",
        action="store_true",
        help="name each document in its source by its path relative to the uploaded folder (a file named "
        "directly: its name); uploading a changed file again then replaces it as a new version",
    )
    up.add_argument(
        "--source-uri",
        metavar="URI",
        help="name the one uploaded file in its source by this path or URL; a later upload of other content "
        "with the same --source-uri replaces it as a new version",
    )
    up.set_defaults(handler=_upload)
    sync.register(sub, common)  # `sluice sync DIR`: a one-off folder sync (docs/cli.md)

    # ls
    ls = sub.add_parser("ls", help="list documents and their status", parents=[common])
    ls.add_argument("--collection", "-c")
    ls.add_argument("--status", choices=commands.STATUS_CHOICES, type=str.lower)
    ls.add_argument("--limit", type=_positive, help="at most this many documents (default: all)")
    ls.set_defaults(handler=commands.ls)

    for name, help_text, handler in (
        (
            "watch",
            "follow a document until READY or FAILED (exit 0 or 1), or with --collection and no DOC every event of a collection",
            commands.watch,
        ),
        ("show", "show a document with its stage history and attempts", commands.show),
        ("retry", "process a FAILED document again", commands.retry),
    ):
        p = sub.add_parser(name, help=help_text, parents=[common])
        p.add_argument(
            "document",
            metavar="DOC",
            help="document id (or unique id prefix or file name)",
            nargs="?" if name in ("watch", "show") else None,
        )
        if name == "show":
            p.add_argument(
                "--source-uri",
                metavar="URI",
                help="the document of this source_uri in --collection (its current version), with its versions",
            )
        p.add_argument("--collection", "-c", help="narrow a prefix or file name to this collection")
        if name == "watch":
            p.add_argument("--timeout", type=float, default=0, metavar="SECONDS", help="give up after this long (exit 1)")
            start = p.add_mutually_exclusive_group()
            start.add_argument(
                "--cursor", metavar="CURSOR", help="collection: resume after this cursor (printed with each event)"
            )
            start.add_argument("--from-start", action="store_true", help="collection: begin with the oldest retained event")
            p.add_argument(
                "--status",
                metavar="S1,S2",
                help="collection: only events leaving a document in these statuses "
                "(e.g. ready,failed; deletions are always shown)",
            )
            p.add_argument("--terminal", action="store_true", help="collection: only READY, FAILED and deletion events")
            p.add_argument(
                "--source-runs",
                choices=("included", "none", "only"),
                default="included",
                help="collection: the sync runs of the collection's sources (started, progress, finished) "
                "with the document events (default), not at all, or alone",
            )
        if name == "retry":
            p.add_argument("--wait", action="store_true", help="follow the document after retrying")
        p.set_defaults(handler=handler)

    rm = sub.add_parser("rm", help="delete documents (cancels their running jobs)", parents=[common])
    rm.add_argument("documents", nargs="*", metavar="DOC")
    rm.add_argument("--source-uri", metavar="URI", help="delete every version of this source_uri in --collection")
    rm.add_argument("--collection", "-c", help="narrow a prefix or file name to this collection")
    rm.set_defaults(handler=commands.rm)

    search = sub.add_parser("search", help="search READY documents of a collection", parents=[common])
    search.add_argument("query")
    search.add_argument("--collection", "-c", required=True)
    search.add_argument("--mode", choices=sorted(commands.MODES), help="default: hybrid")
    search.add_argument("-k", "--top-k", dest="k", type=_positive, default=10, help="number of hits (default 10)")
    search.add_argument(
        "--filter", action="append", type=_key_value, metavar="KEY=VALUE", help="metadata that must match (repeatable)"
    )
    search.add_argument(
        "--where",
        action="append",
        metavar="CONDITION",
        help="a typed metadata condition, all must hold (repeatable): 'year>=2024', 'lang in en,de', 'draft=false', "
        "'published<2025-01-01', 'tags exists'",
    )
    search.add_argument(
        "--neighbors", type=int, default=0, metavar="N", help="join N chunks before and after each hit as its context (0-5)"
    )
    search.add_argument("--max-per-document", type=int, default=0, metavar="K", help="at most K hits from one document")
    search.add_argument("--min-score", type=float, metavar="S", help="drop hits whose first-stage score is below S")
    search.add_argument("--no-rerank", action="store_true", help="do not rerank, even if the collection has a reranker")
    search.add_argument(
        "--consistency-token",
        default="",
        metavar="TOKEN",
        help="a document's consistency_token (`sluice show DOC --json`): search sees at least that state, "
        "waiting for a replica to catch up (docs/scaling.md)",
    )
    search.add_argument(
        "--explain",
        action="store_true",
        help="show why each hit ranked there: keyword score and rank, vector similarity and rank, fused, rerank",
    )
    search.add_argument(
        "--generation",
        type=_non_negative,
        default=0,
        metavar="N",
        help="search this index generation (the BUILDING one of a reindex, to compare it); default the ACTIVE one",
    )
    search.set_defaults(handler=commands.search)

    ev = sub.add_parser(
        "eval", help="score a collection's search on a query set (hit@k, MRR@10, nDCG@10 per mode)", parents=[common]
    )
    ev.add_argument(
        "queries",
        metavar="QUERIES.jsonl",
        help='one JSON object a line: {"id", "query", "relevant": [file name, document id or metadata '
        "source, ...]} (docs/evaluation.md)",
    )
    ev.add_argument("--collection", "-c", required=True)
    ev.add_argument(
        "--modes",
        default=evaluate.DEFAULT_MODES,
        metavar="M1,M2",
        help=f"search modes to score (default {evaluate.DEFAULT_MODES})",
    )
    ev.add_argument("-k", "--top-k", dest="k", type=_positive, default=10, help="hits asked for per query (default 10)")
    ev.add_argument(
        "--fail-under", type=float, metavar="MRR", help="exit 1 when a mode's MRR@10 is below this (a quality gate for scripts)"
    )
    ev.set_defaults(handler=evaluate.run_eval)

    # webhooks
    hooks = sub.add_parser(
        "webhooks", help="POST a collection's document (and sync-run) events to a URL, signed", parents=[common]
    )
    hooks_sub = hooks.add_subparsers(dest="webhooks_command", metavar="ACTION")
    hooks_sub.required = True
    hadd = hooks_sub.add_parser("add", help="subscribe a URL; the signing secret is printed once", parents=[common])
    hadd.add_argument("collection")
    hadd.add_argument("url")
    hadd.add_argument(
        "--events", metavar="TYPE[,TYPE]", help=f"event types (default: the document.* ones): {', '.join(WEBHOOK_EVENT_TYPES)}"
    )
    hadd.add_argument("--description", help="a note for people")
    hadd.set_defaults(handler=webhooks.add)
    hls = hooks_sub.add_parser("list", aliases=["ls"], help="list webhooks", parents=[common])
    hls.add_argument("--collection", "-c")
    hls.set_defaults(handler=webhooks.ls)
    hrm = hooks_sub.add_parser("delete", aliases=["rm"], help="delete a webhook and its pending deliveries", parents=[common])
    hrm.add_argument("id")
    hrm.set_defaults(handler=webhooks.rm)
    hdel = hooks_sub.add_parser("deliveries", help="a webhook's deliveries, newest first", parents=[common])
    hdel.add_argument("id")
    hdel.add_argument("--failed", action="store_true", help="only the deliveries that were given up")
    hdel.add_argument("--limit", type=_positive, default=50, help="at most this many (default 50)")
    hdel.set_defaults(handler=webhooks.deliveries)

    chunks.register(sub, common)  # `sluice chunks …`, `sluice documents download` (docs/cli.md)
    maintenance.register(sub)  # `sluice admin backup | restore | check` (docs/operations.md)
    sources.add_parsers(sub, common)  # docs/sources.md

    # administration (admin keys)
    tenants = sub.add_parser("tenants", help="create and list tenants (admin key)", parents=[common])
    tenants_sub = tenants.add_subparsers(dest="tenants_command", metavar="ACTION")
    tenants_sub.required = True
    tcreate = tenants_sub.add_parser("create", help="create a tenant", parents=[common])
    tcreate.add_argument("name")
    tcreate.add_argument("--max-documents", type=_non_negative, default=0, help="quota; 0 = unlimited")
    tcreate.add_argument("--max-bytes", type=_non_negative, default=0, help="quota of stored bytes; 0 = unlimited")
    tcreate.add_argument("--max-collections", type=_non_negative, default=0, help="quota; 0 = unlimited")
    tcreate.set_defaults(handler=admin.tenants_create)
    tls_ = tenants_sub.add_parser("list", aliases=["ls"], help="list tenants with their usage", parents=[common])
    tls_.set_defaults(handler=admin.tenants_list)

    keys = sub.add_parser("keys", help="create, list and revoke API keys (admin key)", parents=[common])
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="ACTION")
    keys_sub.required = True
    kcreate = keys_sub.add_parser("create", help="create a key; its secret is printed once", parents=[common])
    kcreate.add_argument("--tenant", dest="key_tenant", required=True)
    kcreate.add_argument("--role", required=True, choices=sorted(ROLES))
    kcreate.add_argument("--name", default="", help="a label, e.g. who holds the key")
    kcreate.add_argument(
        "--collection",
        dest="collections",
        action="append",
        metavar="NAME",
        help="limit the key to this collection (repeat for several; client and reader keys only)",
    )
    kcreate.set_defaults(handler=admin.keys_create)
    kls = keys_sub.add_parser("list", aliases=["ls"], help="list keys (prefixes only)", parents=[common])
    kls.add_argument("--tenant", dest="key_tenant", default="")
    kls.set_defaults(handler=admin.keys_list)
    krevoke = keys_sub.add_parser("revoke", help="revoke a key (refused everywhere within a second)", parents=[common])
    krevoke.add_argument("key", help="the key's id or prefix (slk_<id>_)")
    krevoke.set_defaults(handler=admin.keys_revoke)

    mcp.register(sub, common)  # `sluice mcp`: the MCP server (docs/mcp.md)
    return parser


def _upload(client: Client, args: argparse.Namespace) -> int:
    metadata = dict(item.split("=", 1) for item in (args.metadata or []))
    typed_values = {key: typed.value(text, lists=True) for key, text in (item.split("=", 1) for item in (args.typed or []))}
    return run_upload(
        client,
        args.paths,
        args.collection,
        wait=not args.no_wait,
        timeout=args.timeout,
        as_json=args.json,
        metadata=metadata,
        typed_metadata=typed_values,
        source_uri_from_path=args.source_uri_from_path,
        source_uri=args.source_uri,
    )


def report_error(error: CliError, as_json: bool) -> None:
    if as_json:
        sys.stderr.write(
            json.dumps(
                {"error": {"message": error.message, "reason": error.reason, "exit_code": error.exit_code}}, ensure_ascii=False
            )
            + "\n"
        )
    else:
        render.err.print(f"[bold red]error:[/] {escape(error.message)}", soft_wrap=True)


def run(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # usage errors (2), --help and --version (0)
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    as_json = getattr(args, "json", False)
    if getattr(args, "local", False):  # `sluice admin …`: the database itself, no service and no key
        try:
            local: Callable[[None, argparse.Namespace], int] = args.handler
            return local(None, args)
        except CliError as error:
            report_error(error, as_json)
            return error.exit_code
    try:
        with open_client(
            getattr(args, "ingest_address", None),
            getattr(args, "search_address", None),
            api_key=getattr(args, "api_key", None),
            ca_file=getattr(args, "ca_file", None),
            cert_file=getattr(args, "tls_cert", None),
            key_file=getattr(args, "tls_key", None),
            tenant=getattr(args, "as_tenant", None),
        ) as client:
            handler: Handler = args.handler
            return handler(client, args)
    except CliError as error:
        report_error(error, as_json)
        return error.exit_code
    except SluiceError as error:
        failure = from_sdk_error(error)
        report_error(failure, as_json)
        return failure.exit_code
    except grpc.RpcError as error:  # a call outside Clients.call: still one readable line
        report_error(from_rpc_error(error, service="sluice", address="?"), as_json)
        return EXIT_FAILED
    except KeyboardInterrupt:
        render.err.print("interrupted")
        return 130
    except BrokenPipeError:  # `sluice ls | head`
        return 0


def main(argv: list[str] | None = None) -> None:
    code = run(argv)
    sys.exit(code if code is not None else EXIT_USAGE)


if __name__ == "__main__":
    main()
