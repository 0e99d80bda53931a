"""The commands other than upload: collections, ls, show, watch, retry, rm, search."""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Callable

from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text
from sluice_client import Client, Document, DocumentStatus, Embedder, SearchMode, WaitTimeout
from sluice_client.protos import collection_pb2
from sluice_client.types import EmbedderConfig
from sluice_common.evaluation import QuerySetError, load_queries
from sluice_common.names import document_id_of

from . import render
from .errors import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, CliError, from_sdk_error
from .watch import watch_collection

UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")

# --embedder choices and what each means; `local` is the default (works offline). Its model and
# size are left to the server (sluice_common.embedders.DEFAULT_LOCAL_MODEL), which also knows the
# size of every named local model (LOCAL_MODELS here, so that --dimensions is not asked for).
EMBEDDERS = {
    "local": (collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS, "", 0),
    "hashing": (collection_pb2.EMBEDDER_PROVIDER_HASHING, "hashing", 256),
    "openai": (collection_pb2.EMBEDDER_PROVIDER_OPENAI, "text-embedding-3-small", 1536),
}
DEFAULT_EMBEDDER = "local"

STATUS_CHOICES = ["pending", "parsing", "chunking", "embedding", "indexing", "ready", "failed"]
MODES = {
    "vector": SearchMode.VECTOR,
    "keyword": SearchMode.KEYWORD,
    "hybrid": SearchMode.HYBRID,
}


def default_embedder() -> str:
    value = os.environ.get("SLUICE_CLI_EMBEDDER", DEFAULT_EMBEDDER).lower()
    return value if value in EMBEDDERS else DEFAULT_EMBEDDER


# ------------------------------------------------------------------ collections


# The local models that packages carry (both 384 dimensions), named with or without a backend
# suffix (":torch", ":onnx-int8", ":onnx-fp32"); docs/embedders.md.
LOCAL_MODELS = {
    "all-minilm-l6-v2",
    "sentence-transformers/all-minilm-l6-v2",
    "multilingual-e5-small",
    "intfloat/multilingual-e5-small",
}


def local_model_name(model: str) -> str:
    name, _, backend = model.rpartition(":")
    return (name if name and backend in ("torch", "onnx-int8", "onnx-fp32") else model).lower()


def embedder_of(args: argparse.Namespace) -> EmbedderConfig:
    """--embedder, --model and --dimensions as the embedder to ask for (create and reindex)."""
    _, model, dimensions = EMBEDDERS[args.embedder]
    if args.model:
        model = args.model
        named = args.embedder == "local" and local_model_name(model) in LOCAL_MODELS
        if args.embedder != "hashing" and not args.dimensions and model != EMBEDDERS[args.embedder][1] and not named:
            raise CliError(
                f"--dimensions is required with --model {model!r} (the size of its vectors)", EXIT_USAGE, "DIMENSIONS_REQUIRED"
            )
    if args.dimensions:
        dimensions = args.dimensions
    return EmbedderConfig(Embedder.of(args.embedder), model, dimensions)


def collections_create(client: Client, args: argparse.Namespace) -> int:
    embedder = embedder_of(args)
    created = client.collections.create(
        args.name,
        embedder=embedder.provider,
        model=embedder.model,
        dimensions=embedder.dimensions,
        chunk_size=args.chunk_size,
        overlap=args.overlap,
        max_attempts=args.max_attempts,
        description=args.description or "",
        vector_precision=args.vector_precision or "",
    )
    if args.json:
        render.print_json(render.to_dict(created.raw))
    else:
        render.out.print(
            f"Created collection [bold]{escape(created.name)}[/] "
            f"({render.PROVIDER_NAMES.get(created.raw.embedder.provider, '?')} embedder {escape(created.embedder.model)}, "
            f"{created.embedder.dimensions} dimensions)"
        )
    return EXIT_OK


def collections_list(client: Client, args: argparse.Namespace) -> int:
    collections = [c.raw for c in client.collections.list()]
    if args.json:
        render.print_json({"collections": [render.to_dict(c) for c in collections]})
    elif not collections:
        render.out.print("No collections yet. Create one: sluice collections create NAME")
    else:
        render.out.print(render.collections_table(collections))
    return EXIT_OK


def collections_show(client: Client, args: argparse.Namespace) -> int:
    collection = client.collections.get(args.name).raw
    if args.json:
        render.print_json(render.to_dict(collection))
    else:
        render.out.print(render.collections_table([collection]))
        if collection.generations:
            render.out.print()
            render.out.print(render.generations_table(collection.generations))
    return EXIT_OK


def eval_set_of(args: argparse.Namespace) -> list[dict[str, object]]:
    """The queries of --eval-set as ReindexCollection takes them (none without it)."""
    if args.min_ratio and not args.eval_set:
        raise CliError("--min-ratio needs --eval-set", EXIT_USAGE, "USAGE")
    if not args.eval_set:
        return []
    try:
        queries = load_queries(args.eval_set)
    except OSError as err:
        raise CliError(f"cannot read {args.eval_set}: {err.strerror}", EXIT_USAGE, "USAGE") from err
    except QuerySetError as err:
        raise CliError(str(err), EXIT_USAGE, "INVALID_EVAL_SET") from err
    return [{"query": q.query, "relevant": list(q.relevant), "id": q.id} for q in queries]


def collections_reindex(client: Client, args: argparse.Namespace) -> int:
    """Start a reindex (or retry its failed documents), follow it to the switch with a progress
    bar (polling GetCollection), or cancel it."""
    if args.cancel:
        collection = client.collections.cancel_reindex(args.name).raw
        if args.json:
            render.print_json(render.to_dict(collection))
        else:
            render.out.print(
                f"Cancelled the reindex of [bold]{escape(args.name)}[/]; it keeps its embedder "
                f"{escape(collection.embedder.model)}"
            )
        return EXIT_OK
    embedder = embedder_of(args)
    collection = client.collections.reindex(
        args.name,
        embedder=embedder.provider,
        model=embedder.model,
        dimensions=embedder.dimensions,
        eval_queries=eval_set_of(args),
        min_ratio=args.min_ratio,
    ).raw
    target = collection.generations[-1]
    if not args.json:
        render.out.print(
            f"Reindexing [bold]{escape(args.name)}[/] into generation {target.number} "
            f"({render.PROVIDER_NAMES.get(target.embedder.provider, '?')} embedder {escape(target.embedder.model)}, "
            f"{target.embedder.dimensions} dimensions); "
            "search keeps answering from the current one until the switch"
        )
    if args.no_wait:
        if args.json:
            render.print_json(render.to_dict(collection))
        return EXIT_OK
    deadline = time.monotonic() + args.timeout if args.timeout else None
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} documents"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=render.err, disable=args.json or not render.err.is_terminal) as progress:
        task = progress.add_task(f"generation {target.number}", total=max(target.documents_total, 1))
        while True:
            generation = next((g for g in collection.generations if g.number == target.number), None)
            # A FAILED verdict is recorded by search; ingest-api then cancels the generation. Report
            # the refusal once it is done, so that what the user reads next agrees with it.
            if (
                generation is not None
                and generation.evaluation.state == collection_pb2.EVALUATION_STATE_FAILED
                and generation.state != collection_pb2.GENERATION_STATE_BUILDING
            ):
                verdict = generation.evaluation
                raise CliError(
                    f"generation {generation.number} scored {verdict.metric} {verdict.candidate_score:.3f} on the "
                    f"{verdict.queries} queries of the eval set, the current one {verdict.active_score:.3f} (it had to "
                    f"reach {verdict.min_ratio:g}x): not switched; search keeps answering from generation "
                    f"{verdict.active_generation}",
                    EXIT_FAILED,
                    "REINDEX_EVAL_FAILED",
                )
            if generation is None or generation.state == collection_pb2.GENERATION_STATE_CANCELLED:
                raise CliError(f"the reindex of {args.name!r} was cancelled", EXIT_FAILED, "REINDEX_CANCELLED")
            if generation.state in (collection_pb2.GENERATION_STATE_ACTIVE, collection_pb2.GENERATION_STATE_RETIRED):
                progress.update(task, total=max(generation.documents_ready, 1), completed=generation.documents_ready)
                break
            progress.update(task, total=max(generation.documents_total, 1), completed=generation.documents_ready)
            if generation.documents_failed and not generation.documents_pending:
                progress.stop()
                for failure in generation.failures:
                    render.err.print(f"  {escape(failure.filename)} ({failure.document_id}): {escape(failure.error_message)}")
                raise CliError(
                    f"{generation.documents_failed} document(s) could not be embedded; generation {generation.number} waits. "
                    f"Run the same command again to retry them, or `sluice collections reindex {args.name} --cancel`",
                    EXIT_FAILED,
                    "REINDEX_FAILED_DOCUMENTS",
                )
            if deadline is not None and time.monotonic() > deadline:
                raise CliError("timed out waiting for the switch (the reindex goes on)", EXIT_FAILED, "TIMEOUT")
            time.sleep(0.5)
            collection = client.collections.get(args.name).raw
    if args.json:
        render.print_json(render.to_dict(collection))
    else:
        render.out.print(
            f"Switched: [bold]{escape(args.name)}[/] now answers from generation {target.number} "
            f"({escape(target.embedder.model)})"
        )
    return EXIT_OK


def collections_delete(client: Client, args: argparse.Namespace) -> int:
    deleted = client.collections.delete(args.name, force=args.force)
    if args.json:
        render.print_json({"name": args.name, "deleted_documents": str(deleted)})  # int64 as in the contract's JSON
    else:
        render.out.print(f"Deleted collection [bold]{escape(args.name)}[/] and {deleted} document(s)")
    return EXIT_OK


# ------------------------------------------------------------------ documents


def resolve_document_id(client: Client, ref: str, collection: str = "") -> str:
    """A document id from an id, a resource name, a unique id prefix or a unique file name."""
    ref = document_id_of(ref)
    if UUID.match(ref):
        return ref.lower()
    if not ref:
        raise CliError("a document id is required", EXIT_USAGE, "INVALID_ARGUMENT")
    by_prefix, by_name = [], []
    for doc in client.documents.list(collection or None):
        if len(ref) >= 4 and doc.id.startswith(ref.lower()):
            by_prefix.append(doc)
        if doc.filename == ref:
            by_name.append(doc)
    matches = by_prefix or by_name
    if not matches:
        raise CliError(f"no document matches {ref!r} (give its id; `sluice ls` lists them)", EXIT_NOT_FOUND, "DOCUMENT_NOT_FOUND")
    if len(matches) > 1:
        listing = ", ".join(f"{d.id} ({d.collection}/{d.filename})" for d in matches[:5])
        raise CliError(
            f"{ref!r} matches {len(matches)} documents: {listing}; give the id or --collection", EXIT_USAGE, "AMBIGUOUS"
        )
    return matches[0].id


def ls(client: Client, args: argparse.Namespace) -> int:
    documents = [d.raw for d in client.documents.list(args.collection or None, status=args.status, limit=args.limit or None)]
    if args.json:
        render.print_json({"documents": [render.to_dict(d) for d in documents]})
        return EXIT_OK
    if not documents:
        render.out.print(
            "No documents." + ("" if args.collection or args.status else " Upload some: sluice upload PATH --collection NAME")
        )
        return EXIT_OK
    render.out.print(render.documents_table(documents, show_collection=not args.collection))
    counts: dict[str, int] = {}
    for d in documents:
        counts[render.status_name(d.status)] = counts.get(render.status_name(d.status), 0) + 1
    render.out.print(
        Text(f"{len(documents)} document(s): " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())), style="dim")
    )
    return EXIT_OK


def show(client: Client, args: argparse.Namespace) -> int:
    if args.source_uri:
        if args.document or not args.collection:
            raise CliError("--source-uri needs --collection and no DOC", EXIT_USAGE, "INVALID_ARGUMENT")
        doc = client.documents.get(collection=args.collection, source_uri=args.source_uri).raw
    elif args.document:
        doc = client.documents.get(resolve_document_id(client, args.document, args.collection or "")).raw
    else:
        raise CliError("give a document, or --collection and --source-uri", EXIT_USAGE, "MISSING_ARGUMENT")
    if args.json:
        render.print_json(render.to_dict(doc))
    else:
        for renderable in render.document_details(doc):
            render.out.print(renderable)
    return EXIT_OK


def watch(client: Client, args: argparse.Namespace) -> int:
    collection_options = args.cursor or args.from_start or args.status or args.terminal or args.source_runs != "included"
    if args.document is None:
        if not args.collection:
            raise CliError(
                "give a document to follow, or --collection to follow every event of a collection", EXIT_USAGE, "MISSING_ARGUMENT"
            )
        return watch_collection(client, args)
    if collection_options:
        raise CliError(
            "--cursor, --from-start, --status, --terminal and --source-runs are for a collection: leave out DOC",
            EXIT_USAGE,
            "INVALID_ARGUMENT",
        )
    doc = client.documents.get(resolve_document_id(client, args.document, args.collection or ""))
    return watch_document(client, doc, args.timeout if args.timeout and args.timeout > 0 else None, as_json=args.json)


def _follow(client: Client, doc: Document, timeout: float | None, on_change: Callable[[Document], None]) -> Document:
    """The document once READY or FAILED, telling `on_change` of each state on the way."""
    try:
        for state in client.documents.watch(doc.id, timeout=timeout):
            doc = state
            on_change(state)
    except WaitTimeout as error:
        error.message = f"timed out waiting for {doc.filename or doc.id} (still {doc.status.name})"
        raise from_sdk_error(error) from None
    return doc


def watch_document(client: Client, doc: Document, timeout: float | None, *, as_json: bool) -> int:
    """Follow one document to READY or FAILED; exit 0 when READY, 1 when FAILED."""
    if as_json:
        last = [render.to_dict(doc.raw)]
        render.print_json_line(last[0])

        def emit(d: Document) -> None:
            value = render.to_dict(d.raw)
            if value != last[0]:
                render.print_json_line(value)
                last[0] = value

        doc = _follow(client, doc, timeout, emit)
    elif render.err.is_terminal:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=30),
            TextColumn("{task.fields[status]}"),
            TextColumn("[dim]{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=render.err,
            transient=True,
        ) as progress:
            task = progress.add_task(escape(doc.filename), total=1000, status="", detail="")

            def show_progress(d: Document) -> None:
                name = d.status.name
                progress.update(
                    task,
                    completed=int(render.fraction_done(d.raw) * 1000),
                    status=f"[{render.STATUS_STYLE.get(name, 'cyan')}]{name}",
                    detail=escape(render.progress_text(d.raw) or d.error_message[:60]),
                )

            show_progress(doc)
            doc = _follow(client, doc, timeout, show_progress)
    else:
        last_line = [""]

        def print_change(d: Document) -> None:
            line = f"{d.status.name} {render.progress_text(d.raw)}".strip()
            if line != last_line[0]:
                render.err.print(escape(f"{d.filename}: {line}"), soft_wrap=True)
                last_line[0] = line

        print_change(doc)
        doc = _follow(client, doc, timeout, print_change)
    if not as_json:
        if doc.ready:
            render.out.print(
                Text("✓ ", style="green") + Text(f"{doc.filename} READY ({render.chunks_label(doc.chunk_count)}) {doc.id}")
            )
        else:
            render.out.print(
                Text("✗ ", style="red")
                + Text(f"{doc.filename} FAILED: {doc.error_message}" + (f" [{doc.error_code}]" if doc.error_code else ""))
            )
    return EXIT_OK if doc.status is DocumentStatus.READY else EXIT_FAILED


def retry(client: Client, args: argparse.Namespace) -> int:
    doc = client.documents.retry(resolve_document_id(client, args.document, args.collection or ""))
    if args.wait:
        return watch_document(client, doc, None, as_json=args.json)
    if args.json:
        render.print_json(render.to_dict(doc.raw))
    else:
        render.out.print(f"{escape(doc.filename)} ({doc.id}) is {doc.status.name} again; follow with `sluice watch {doc.id}`")
    return EXIT_OK


def rm(client: Client, args: argparse.Namespace) -> int:
    results: list[dict[str, object]] = []
    if bool(args.source_uri) == bool(args.documents) or (args.source_uri and not args.collection):
        raise CliError("give documents, or --collection and --source-uri", EXIT_USAGE, "MISSING_ARGUMENT")
    try:
        if args.source_uri:
            cancelled = client.documents.delete(collection=args.collection, source_uri=args.source_uri)
            results.append({"source_uri": args.source_uri, "cancelled_running_job": cancelled})
            if not args.json:
                extra = " (a running job was cancelled)" if cancelled else ""
                render.out.print(f"Deleted every version of {escape(args.source_uri)}{extra}")
        for ref in args.documents:
            doc_id = resolve_document_id(client, ref, args.collection or "")
            cancelled = client.documents.delete(doc_id)
            results.append({"id": doc_id, "cancelled_running_job": cancelled})
            if not args.json:
                extra = " (its running job was cancelled)" if cancelled else ""
                render.out.print(f"Deleted {doc_id}{extra}")
    finally:
        # Even when a later reference fails, scripts learn what was already deleted.
        if args.json:
            render.print_json({"deleted": results})
    return EXIT_OK


# ------------------------------------------------------------------ search


def search(client: Client, args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise CliError("the query is empty", EXIT_USAGE, "INVALID_ARGUMENT")
    filters = dict(item.partition("=")[::2] for item in args.filter or [])
    try:
        from sluice_client.filters import where

        conditions = where(args.where or [])
    except ValueError as err:
        raise CliError(f"--where: {err}", EXIT_USAGE, "INVALID_ARGUMENT") from None
    started = time.monotonic()
    results = client.search(
        args.collection,
        args.query,
        top_k=args.k,
        mode=MODES[args.mode] if args.mode else None,
        filter=filters,
        where=conditions,
        neighbors=args.neighbors,
        max_per_document=args.max_per_document,
        min_score=args.min_score,
        rerank=False if args.no_rerank else None,
        consistency_token=args.consistency_token,
        explain=args.explain,
        generation=args.generation,
    )
    elapsed_ms = (time.monotonic() - started) * 1000
    response = results.raw
    if args.json:
        render.print_json(
            {
                "mode": render.mode_name(response.mode),
                "generation": response.generation,
                "hits": [render.to_dict(h) for h in response.hits],
                "rerank": render.to_dict(response.rerank),
            }
        )
        return EXIT_OK
    status = results.rerank_status
    if status not in ("UNSPECIFIED", "APPLIED"):
        render.err.print(Text(f"rerank {status.lower().replace('_', ' ')}: {response.rerank.message}", style="yellow"))
    if not response.hits:
        render.out.print(f"No matches in {escape(args.collection)} (only READY documents are searched).")
        return EXIT_OK
    render.print_hits(render.out, response.hits, context=args.neighbors > 0, explain=args.explain)
    reranker = (
        response.rerank.model
        or collection_pb2.RerankerProvider.Name(response.rerank.provider).removeprefix("RERANKER_PROVIDER_").lower()
    )
    reranked = f", reranked by {reranker}" if status == "APPLIED" else ""
    generation = f", generation {response.generation}" if args.generation else ""
    render.out.print(
        Text(
            f"{len(response.hits)} hit(s), {render.mode_name(response.mode).lower()} search{reranked}{generation}, "
            f"{elapsed_ms:.0f} ms",
            style="dim",
        )
    )
    return EXIT_OK
