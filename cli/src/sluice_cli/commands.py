"""The commands other than upload: collections, ls, show, watch, retry, rm, search."""

from __future__ import annotations

import os
import re
import time

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.markup import escape
from rich.text import Text

from sluice.v1 import collection_pb2, document_pb2, document_service_pb2, search_service_pb2

from sluice_common.names import document_id_of

from . import render, typed
from .client import Clients
from .errors import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, CliError
from .upload import follow
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
    "vector": search_service_pb2.SEARCH_MODE_VECTOR,
    "keyword": search_service_pb2.SEARCH_MODE_KEYWORD,
    "hybrid": search_service_pb2.SEARCH_MODE_HYBRID,
}


def default_embedder() -> str:
    value = os.environ.get("SLUICE_CLI_EMBEDDER", DEFAULT_EMBEDDER).lower()
    return value if value in EMBEDDERS else DEFAULT_EMBEDDER


# ------------------------------------------------------------------ collections


# The local models that packages carry (both 384 dimensions), named with or without a backend
# suffix (":torch", ":onnx-int8", ":onnx-fp32"); docs/embedders.md.
LOCAL_MODELS = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "multilingual-e5-small", "intfloat/multilingual-e5-small"}


def local_model_name(model: str) -> str:
    name, _, backend = model.rpartition(":")
    return (name if name and backend in ("torch", "onnx-int8", "onnx-fp32") else model).lower()


def embedder_of(args) -> collection_pb2.EmbedderConfig:
    """--embedder, --model and --dimensions as an EmbedderConfig (create and reindex)."""
    provider, model, dimensions = EMBEDDERS[args.embedder]
    if args.model:
        model = args.model
        named = args.embedder == "local" and local_model_name(model) in LOCAL_MODELS
        if args.embedder != "hashing" and not args.dimensions and model != EMBEDDERS[args.embedder][1] and not named:
            raise CliError(f"--dimensions is required with --model {model!r} (the size of its vectors)", EXIT_USAGE, "DIMENSIONS_REQUIRED")
    if args.dimensions:
        dimensions = args.dimensions
    return collection_pb2.EmbedderConfig(provider=provider, model=model, dimensions=dimensions)


def collections_create(clients: Clients, args) -> int:
    embedder = embedder_of(args)
    chunking = collection_pb2.ChunkingConfig()
    if args.chunk_size:
        chunking.max_characters = args.chunk_size
        # unstructured closes a chunk softly at new_after_n_chars, hard at max_characters.
        chunking.new_after_n_chars = max(1, args.chunk_size * 2 // 3)
    if args.overlap is not None:
        chunking.overlap = args.overlap
    collection = collection_pb2.Collection(
        name=args.name,
        description=args.description or "",
        embedder=embedder,
        chunking=chunking,
        max_attempts=args.max_attempts or 0,
    )
    created = clients.call(clients.documents.CreateCollection, document_service_pb2.CreateCollectionRequest(collection=collection))
    if args.json:
        render.print_json(render.to_dict(created))
    else:
        render.out.print(
            f"Created collection [bold]{escape(created.name)}[/] "
            f"({render.PROVIDER_NAMES.get(created.embedder.provider, '?')} embedder {escape(created.embedder.model)}, "
            f"{created.embedder.dimensions} dimensions)"
        )
    return EXIT_OK


def list_all_collections(clients: Clients) -> list[collection_pb2.Collection]:
    collections, token = [], ""
    while True:
        page = clients.call(clients.documents.ListCollections, document_service_pb2.ListCollectionsRequest(page_size=1000, page_token=token))
        collections.extend(page.collections)
        token = page.next_page_token
        if not token:
            return collections


def collections_list(clients: Clients, args) -> int:
    collections = list_all_collections(clients)
    if args.json:
        render.print_json({"collections": [render.to_dict(c) for c in collections]})
    elif not collections:
        render.out.print("No collections yet. Create one: sluice collections create NAME")
    else:
        render.out.print(render.collections_table(collections))
    return EXIT_OK


def collections_show(clients: Clients, args) -> int:
    collection = clients.call(clients.documents.GetCollection, document_service_pb2.GetCollectionRequest(name=args.name))
    if args.json:
        render.print_json(render.to_dict(collection))
    else:
        render.out.print(render.collections_table([collection]))
        if collection.generations:
            render.out.print()
            render.out.print(render.generations_table(collection.generations))
    return EXIT_OK


def collections_reindex(clients: Clients, args) -> int:
    """Start a reindex (or retry its failed documents), follow it to the switch with a progress
    bar (polling GetCollection), or cancel it."""
    if args.cancel:
        collection = clients.call(clients.documents.CancelReindex, document_service_pb2.CancelReindexRequest(name=args.name))
        if args.json:
            render.print_json(render.to_dict(collection))
        else:
            render.out.print(f"Cancelled the reindex of [bold]{escape(args.name)}[/]; it keeps its embedder "
                             f"{escape(collection.embedder.model)}")
        return EXIT_OK
    collection = clients.call(
        clients.documents.ReindexCollection,
        document_service_pb2.ReindexCollectionRequest(name=args.name, embedder=embedder_of(args)),
    )
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
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} documents"),
               TimeElapsedColumn())
    with Progress(*columns, console=render.err, disable=args.json or not render.err.is_terminal) as progress:
        task = progress.add_task(f"generation {target.number}", total=max(target.documents_total, 1))
        while True:
            generation = next((g for g in collection.generations if g.number == target.number), None)
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
                    EXIT_FAILED, "REINDEX_FAILED_DOCUMENTS",
                )
            if deadline is not None and time.monotonic() > deadline:
                raise CliError("timed out waiting for the switch (the reindex goes on)", EXIT_FAILED, "TIMEOUT")
            time.sleep(0.5)
            collection = clients.call(clients.documents.GetCollection, document_service_pb2.GetCollectionRequest(name=args.name))
    if args.json:
        render.print_json(render.to_dict(collection))
    else:
        render.out.print(f"Switched: [bold]{escape(args.name)}[/] now answers from generation {target.number} "
                         f"({escape(target.embedder.model)})")
    return EXIT_OK


def collections_delete(clients: Clients, args) -> int:
    response = clients.call(clients.documents.DeleteCollection, document_service_pb2.DeleteCollectionRequest(name=args.name, force=args.force))
    if args.json:
        render.print_json({"name": args.name, **render.to_dict(response)})
    else:
        render.out.print(f"Deleted collection [bold]{escape(args.name)}[/] and {response.deleted_documents} document(s)")
    return EXIT_OK


# ------------------------------------------------------------------ documents


def list_documents(clients: Clients, collection: str = "", status: int = 0, limit: int = 0):
    """Every matching document, following next_page_token (newest first)."""
    token = ""
    count = 0
    while True:
        size = 1000 if not limit else min(1000, limit - count)
        page = clients.call(
            clients.documents.ListDocuments,
            document_service_pb2.ListDocumentsRequest(collection=collection, status=status, page_size=size, page_token=token),
        )
        for doc in page.documents:
            yield doc
            count += 1
            if limit and count >= limit:
                return
        token = page.next_page_token
        if not token:
            return


def resolve_document_id(clients: Clients, ref: str, collection: str = "") -> str:
    """A document id from an id, a resource name, a unique id prefix or a unique file name."""
    ref = document_id_of(ref)
    if UUID.match(ref):
        return ref.lower()
    if not ref:
        raise CliError("a document id is required", EXIT_USAGE, "INVALID_ARGUMENT")
    by_prefix, by_name = [], []
    for doc in list_documents(clients, collection):
        if len(ref) >= 4 and doc.id.startswith(ref.lower()):
            by_prefix.append(doc)
        if doc.filename == ref:
            by_name.append(doc)
    matches = by_prefix or by_name
    if not matches:
        raise CliError(f"no document matches {ref!r} (give its id; `sluice ls` lists them)", EXIT_NOT_FOUND, "DOCUMENT_NOT_FOUND")
    if len(matches) > 1:
        listing = ", ".join(f"{d.id} ({d.collection}/{d.filename})" for d in matches[:5])
        raise CliError(f"{ref!r} matches {len(matches)} documents: {listing}; give the id or --collection", EXIT_USAGE, "AMBIGUOUS")
    return matches[0].id


def parse_status(value: str | None) -> int:
    if not value:
        return document_pb2.DOCUMENT_STATUS_UNSPECIFIED
    return document_pb2.DocumentStatus.Value("DOCUMENT_STATUS_" + value.upper())


def ls(clients: Clients, args) -> int:
    documents = list(list_documents(clients, args.collection or "", parse_status(args.status), args.limit or 0))
    if args.json:
        render.print_json({"documents": [render.to_dict(d) for d in documents]})
        return EXIT_OK
    if not documents:
        render.out.print("No documents." + ("" if args.collection or args.status else " Upload some: sluice upload PATH --collection NAME"))
        return EXIT_OK
    render.out.print(render.documents_table(documents, show_collection=not args.collection))
    counts: dict[str, int] = {}
    for d in documents:
        counts[render.status_name(d.status)] = counts.get(render.status_name(d.status), 0) + 1
    render.out.print(Text(f"{len(documents)} document(s): " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())), style="dim"))
    return EXIT_OK


def get_document(clients: Clients, doc_id: str) -> document_pb2.Document:
    return clients.call(clients.documents.GetDocument, document_service_pb2.GetDocumentRequest(id=doc_id))


def show(clients: Clients, args) -> int:
    doc = get_document(clients, resolve_document_id(clients, args.document, args.collection or ""))
    if args.json:
        render.print_json(render.to_dict(doc))
    else:
        for renderable in render.document_details(doc):
            render.out.print(renderable)
    return EXIT_OK


def watch(clients: Clients, args) -> int:
    collection_options = args.cursor or args.from_start or args.status or args.terminal
    if args.document is None:
        if not args.collection:
            raise CliError("give a document to follow, or --collection to follow every event of a collection", EXIT_USAGE, "MISSING_ARGUMENT")
        return watch_collection(clients, args)
    if collection_options:
        raise CliError("--cursor, --from-start, --status and --terminal are for a collection: leave out DOC", EXIT_USAGE, "INVALID_ARGUMENT")
    doc = get_document(clients, resolve_document_id(clients, args.document, args.collection or ""))
    deadline = time.monotonic() + args.timeout if args.timeout and args.timeout > 0 else None
    return watch_document(clients, doc, deadline, as_json=args.json)


def watch_document(clients: Clients, doc: document_pb2.Document, deadline: float | None, *, as_json: bool) -> int:
    """Follow one document to READY or FAILED; exit 0 when READY, 1 when FAILED."""
    if as_json:
        render.print_json_line(render.to_dict(doc))
        last = [render.to_dict(doc)]

        def emit(d):
            value = render.to_dict(d)
            if value != last[0]:
                render.print_json_line(value)
                last[0] = value

        doc = follow(clients, doc, deadline, emit)
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

            def show_progress(d):
                name = render.status_name(d.status)
                progress.update(task, completed=int(render.fraction_done(d) * 1000), status=f"[{render.STATUS_STYLE.get(name, 'cyan')}]{name}", detail=escape(render.progress_text(d) or d.error_message[:60]))

            show_progress(doc)
            doc = follow(clients, doc, deadline, show_progress)
    else:
        last_line = [""]

        def print_change(d):
            line = f"{render.status_name(d.status)} {render.progress_text(d)}".strip()
            if line != last_line[0]:
                render.err.print(escape(f"{d.filename}: {line}"), soft_wrap=True)
                last_line[0] = line

        print_change(doc)
        doc = follow(clients, doc, deadline, print_change)
    if not as_json:
        if doc.status == document_pb2.DOCUMENT_STATUS_READY:
            render.out.print(Text("✓ ", style="green") + Text(f"{doc.filename} READY ({render.chunks_label(doc.chunk_count)}) {doc.id}"))
        else:
            render.out.print(Text("✗ ", style="red") + Text(f"{doc.filename} FAILED: {doc.error_message}" + (f" [{doc.error_code}]" if doc.error_code else "")))
    return EXIT_OK if doc.status == document_pb2.DOCUMENT_STATUS_READY else EXIT_FAILED


def retry(clients: Clients, args) -> int:
    doc_id = resolve_document_id(clients, args.document, args.collection or "")
    doc = clients.call(clients.documents.RetryDocument, document_service_pb2.RetryDocumentRequest(id=doc_id))
    if args.wait:
        return watch_document(clients, doc, None, as_json=args.json)
    if args.json:
        render.print_json(render.to_dict(doc))
    else:
        render.out.print(f"{escape(doc.filename)} ({doc.id}) is {render.status_name(doc.status)} again; follow with `sluice watch {doc.id}`")
    return EXIT_OK


def rm(clients: Clients, args) -> int:
    results = []
    try:
        for ref in args.documents:
            doc_id = resolve_document_id(clients, ref, args.collection or "")
            response = clients.call(clients.documents.DeleteDocument, document_service_pb2.DeleteDocumentRequest(id=doc_id))
            results.append({"id": doc_id, "cancelled_running_job": response.cancelled_running_job})
            if not args.json:
                extra = " (its running job was cancelled)" if response.cancelled_running_job else ""
                render.out.print(f"Deleted {doc_id}{extra}")
    finally:
        # Even when a later reference fails, scripts learn what was already deleted.
        if args.json:
            render.print_json({"deleted": results})
    return EXIT_OK


# ------------------------------------------------------------------ search


def search(clients: Clients, args) -> int:
    if not args.query.strip():
        raise CliError("the query is empty", EXIT_USAGE, "INVALID_ARGUMENT")
    request = search_service_pb2.SearchRequest(
        collection=args.collection,
        query=args.query,
        top_k=args.k,
        mode=MODES[args.mode] if args.mode else search_service_pb2.SEARCH_MODE_UNSPECIFIED,
    )
    for item in args.filter or []:
        key, _, value = item.partition("=")
        request.filter.metadata[key] = value
    try:
        where = typed.where(args.where or [])
    except ValueError as err:
        raise CliError(f"--where: {err}", EXIT_USAGE, "INVALID_ARGUMENT") from None
    if where is not None:
        request.filter.where.CopyFrom(where)
    request.neighbor_chunks = args.neighbors
    request.max_hits_per_document = args.max_per_document
    if args.min_score is not None:
        request.min_score = args.min_score
    if args.no_rerank:
        request.rerank.disabled = True
    started = time.monotonic()
    response = clients.call(clients.search.Search, request, service="search")
    elapsed_ms = (time.monotonic() - started) * 1000
    if args.json:
        render.print_json({"mode": render.mode_name(response.mode), "hits": [render.to_dict(h) for h in response.hits],
                           "rerank": render.to_dict(response.rerank)})
        return EXIT_OK
    status = search_service_pb2.RerankStatus.Name(response.rerank.status).removeprefix("RERANK_STATUS_")
    if status not in ("UNSPECIFIED", "APPLIED"):
        render.err.print(Text(f"rerank {status.lower().replace('_', ' ')}: {response.rerank.message}", style="yellow"))
    if not response.hits:
        render.out.print(f"No matches in {escape(args.collection)} (only READY documents are searched).")
        return EXIT_OK
    render.print_hits(render.out, response.hits, context=args.neighbors > 0)
    reranker = response.rerank.model or collection_pb2.RerankerProvider.Name(response.rerank.provider).removeprefix("RERANKER_PROVIDER_").lower()
    reranked = f", reranked by {reranker}" if status == "APPLIED" else ""
    render.out.print(Text(f"{len(response.hits)} hit(s), {render.mode_name(response.mode).lower()} search{reranked}, {elapsed_ms:.0f} ms",
                          style="dim"))
    return EXIT_OK

