"""`sluice mcp`: Sluice as a Model Context Protocol server (docs/mcp.md).

An MCP client (Claude Desktop, an IDE, an agent) gets tools to search collections (with an
explanation of each hit's rank when asked), upload a file or a text, read and list documents and
their chunks, and list collections. Every tool calls the SDK `Client` that
the CLI made from its flags and environment, so the server acts with that one API key (a client
key, or a reader key for a read-only server) and never touches a service directly.

Results are structured content (each tool publishes its output schema) plus a short text for
the model to read. A failure is a tool error (`isError`) whose text is the server's message with
its reason, and whose structured content is `{"error": {"reason", "message", "code"}}`; never a
traceback or one of our paths (docs/contributing.md, "Errors").
"""

# No `from __future__ import annotations`: the MCP library reads the tools' annotations (local
# aliases included) to publish their schemas.
import argparse
import base64
import binascii
import datetime as dt
import ipaddress
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, TypeVarTuple

import grpc
from sluice_client import Chunk, Client, Collection, Document, Hit, HitExplanation, SluiceError, WaitTimeout
from sluice_common.reasons import Reason
from typing_extensions import TypedDict  # pydantic reads nested TypedDicts from here before Python 3.12

from . import __version__
from .commands import resolve_document_id
from .errors import EXIT_OK, EXIT_USAGE, CliError, from_sdk_error

if TYPE_CHECKING:  # imported where used: the MCP library is slow to import
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult

_Args = TypeVarTuple("_Args")

SERVER_NAME = "sluice"
TRANSPORTS = ("stdio", "http")
DEFAULT_HOST, DEFAULT_PORT, HTTP_PATH = "127.0.0.1", 8765, "/mcp"
# Search embeds the query on the servers; the first query of a collection on a local model loads
# the model there (docs/clients.md, "Retries and deadlines"), which can take longer than a call's 30 s.
SEARCH_TIMEOUT_SECONDS = 120.0
MAX_WAIT_SECONDS = 300.0
MAX_TOP_K, MAX_PAGE_SIZE = 50, 200
# A chunk's text in list_chunks is cut here (a chunk can hold 100,000 characters; the model pages).
CHUNK_TEXT_CHARACTERS = 2000
# A name no collection can have (names are lowercase letters, digits, '-' and '_'): the probe that
# asks whether the key may write can never create anything.
_PROBE_COLLECTION = "Sluice MCP write probe"


# ---------------------------------------------------------------------- results


# TypedDicts, not pydantic models: every `sluice` command imports this module to register `mcp`,
# and pydantic (which the MCP library needs anyway) is imported only once `sluice mcp` runs.


class DocumentOut(TypedDict):
    """A document; `status` is PENDING, PARSING, CHUNKING, EMBEDDING, INDEXING, READY or FAILED (only
    READY is searchable); `name` is collections/{collection}/documents/{id}."""

    id: str
    name: str
    collection: str
    filename: str
    status: str
    error_message: str
    error_code: str
    mime_type: str
    size_bytes: int
    chunk_count: int
    attempts: int
    max_attempts: int
    metadata: dict[str, str]
    create_time: str | None
    update_time: str | None


class DocumentPage(TypedDict):
    """A page of documents, newest first; `next_page_token` is empty on the last page."""

    documents: list[DocumentOut]
    next_page_token: str


class CollectionOut(TypedDict):
    """A collection; `embedder` is provider/model (dimensions)."""

    name: str
    description: str
    embedder: str
    document_count: int
    ready_document_count: int


class CollectionList(TypedDict):
    collections: list[CollectionOut]


class ExplanationOut(TypedDict):
    """Why a hit ranked where it did; a score or rank is null when the hit was not in that list
    (keyword: the chunk has none of the query's words; vector, or a mode that does not use it).
    Ranks count from 1; `*_contribution` and `vector_weight` are HYBRID's fused parts."""

    keyword_score: float | None
    keyword_rank: int | None
    vector_similarity: float | None
    vector_rank: int | None
    fused_score: float
    keyword_contribution: float | None
    vector_contribution: float | None
    vector_weight: float | None
    first_stage_rank: int
    rerank_score: float | None
    rerank_status: str
    matched_terms: list[str]


class HitOut(TypedDict):
    """A matching passage; `page_number` is 0 when the format has no pages; `explanation` is set
    when the search asked for it (`explain`), null otherwise."""

    text: str
    score: float
    document_id: str
    filename: str
    chunk_index: int
    chunk_id: str
    page_number: int
    metadata: dict[str, str]
    explanation: ExplanationOut | None


class ChunkOut(TypedDict):
    """One chunk of a document as search sees it; `enabled` false means search does not return it;
    `text` is cut at 2,000 characters (`truncated`)."""

    id: str
    chunk_index: int
    page_number: int
    text: str
    truncated: bool
    enabled: bool
    edited: bool
    token_count: int
    element_type: str
    section_title: str


class ChunkPageOut(TypedDict):
    """A page of a document's chunks in order; `next_page_token` is empty on the last page;
    `total_size` counts the document's chunks in `generation`."""

    document_id: str
    generation: int
    total_size: int
    chunks: list[ChunkOut]
    next_page_token: str


class SearchOut(TypedDict):
    collection: str
    query: str
    mode: str
    hits: list[HitOut]


def _time(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def document_out(doc: Document) -> DocumentOut:
    return DocumentOut(
        id=doc.id,
        name=doc.name,
        collection=doc.collection,
        filename=doc.filename,
        status=doc.status.name,
        error_message=doc.error_message,
        error_code=doc.error_code,
        mime_type=doc.mime_type,
        size_bytes=doc.size_bytes,
        chunk_count=doc.chunk_count,
        attempts=doc.attempts,
        max_attempts=doc.max_attempts,
        metadata=dict(doc.metadata),
        create_time=_time(doc.create_time),
        update_time=_time(doc.update_time),
    )


def collection_out(c: Collection) -> CollectionOut:
    embedder = f"{c.embedder.provider.name.lower()}/{c.embedder.model} ({c.embedder.dimensions})"
    return CollectionOut(
        name=c.name,
        description=c.description,
        embedder=embedder,
        document_count=c.document_count,
        ready_document_count=c.ready_document_count,
    )


def explanation_out(e: HitExplanation) -> ExplanationOut:
    return ExplanationOut(
        keyword_score=e.keyword_score,
        keyword_rank=e.keyword_rank,
        vector_similarity=e.vector_similarity,
        vector_rank=e.vector_rank,
        fused_score=e.fused_score,
        keyword_contribution=e.keyword_contribution,
        vector_contribution=e.vector_contribution,
        vector_weight=e.vector_weight,
        first_stage_rank=e.first_stage_rank,
        rerank_score=e.rerank_score,
        rerank_status=e.rerank_status,
        matched_terms=list(e.matched_terms),
    )


def hit_out(hit: Hit) -> HitOut:
    return HitOut(
        text=hit.text,
        score=hit.score,
        document_id=hit.document_id,
        filename=hit.filename,
        chunk_index=hit.chunk_index,
        chunk_id=hit.chunk_id,
        page_number=hit.page_number,
        metadata=dict(hit.metadata),
        explanation=explanation_out(hit.explanation) if hit.explanation is not None else None,
    )


def chunk_out(chunk: Chunk) -> ChunkOut:
    return ChunkOut(
        id=chunk.id,
        chunk_index=chunk.chunk_index,
        page_number=chunk.page_number,
        text=chunk.text[:CHUNK_TEXT_CHARACTERS],
        truncated=len(chunk.text) > CHUNK_TEXT_CHARACTERS,
        enabled=chunk.enabled,
        edited=chunk.edited,
        token_count=chunk.token_count,
        element_type=chunk.element_type,
        section_title=chunk.section_title,
    )


def _explanation_line(e: ExplanationOut) -> str:
    """The explanation as the model reads it: each list's score and rank, or that the hit was not in it."""

    def part(label: str, score: float | None, rank: int | None) -> str:
        return f"{label} {score:.3f} (rank {rank})" if score is not None and rank is not None else f"not in the {label} list"

    parts = [part("keyword", e["keyword_score"], e["keyword_rank"]), part("vector", e["vector_similarity"], e["vector_rank"])]
    parts.append(f"fused {e['fused_score']:.3f} (rank {e['first_stage_rank']})")
    if e["rerank_score"] is not None:
        parts.append(f"reranked {e['rerank_score']:.3f}")
    if e["matched_terms"]:
        parts.append("matched " + ", ".join(e["matched_terms"]))
    return "why: " + "; ".join(parts)


def _document_line(doc: DocumentOut) -> str:
    line = f"{doc['filename']} ({doc['collection']}) {doc['status']} id={doc['id']}"
    if doc["status"] == "READY":
        line += f", {doc['chunk_count']} chunk(s)"
    if doc["error_message"]:
        line += f": {doc['error_message']}"
    return line


def _result(structured: Mapping[str, object], text: str) -> "CallToolResult":
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=dict(structured))


def tool_error(message: str, reason: str, code: str = "") -> "CallToolResult":
    """A tool error the model can read: the message with its reason, and the same as data."""
    from mcp.types import CallToolResult, TextContent

    text = message if message.endswith(f"[{reason}]") or not reason else f"{message} [{reason}]"
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        is_error=True,
        structured_content={"error": {"reason": reason, "message": text, "code": code}},
    )


def error_result(error: SluiceError | CliError) -> "CallToolResult":
    """A failed call as a tool error: the CLI's one translation (errors.py), so the MCP server
    says what `sluice` would say (the server's message and reason, or what failed on the way)."""
    failure = error if isinstance(error, CliError) else from_sdk_error(error)
    code = error.code.name if isinstance(error, SluiceError) and error.code is not None else ""
    if isinstance(error, SluiceError) and error.reason == Reason.ROLE_NOT_ALLOWED:
        return tool_error(
            f"{error.message}: this MCP server runs with a read-only key; uploads need a client key", error.reason, code
        )
    return tool_error(failure.message, failure.reason, code)


# ---------------------------------------------------------------------- paging

# ListDocuments pages with an opaque page_token that the SDK keeps to itself (documents.list is an
# iterator over every page), so a page here is keyed by the last document shown: documents come
# newest first (created_at DESC, id DESC), and the next page starts after that key. A document
# uploaded meanwhile (newer) or deleted does not shift the pages.


def _page_token(doc: Document) -> str:
    key = json.dumps({"t": _time(doc.create_time), "id": doc.id}, separators=(",", ":"))
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def _after_key(token: str) -> tuple[dt.datetime, str]:
    try:
        key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return dt.datetime.fromisoformat(key["t"]), str(key["id"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise CliError("page_token is not one this server gave", EXIT_USAGE, Reason.INVALID_PAGE_TOKEN) from None


def list_page(client: Client, collection: str | None, status: str | None, page_size: int, page_token: str) -> DocumentPage:
    after = _after_key(page_token) if page_token else None
    page: list[Document] = []
    more = False
    for doc in client.documents.list(collection, status=status):
        if after is not None and doc.create_time is not None and (doc.create_time, doc.id) >= after:
            continue  # on an earlier page
        if len(page) == page_size:
            more = True
            break
        page.append(doc)
    return DocumentPage(documents=[document_out(d) for d in page], next_page_token=_page_token(page[-1]) if more else "")


# ---------------------------------------------------------------------- the server


def may_write(client: Client) -> bool | None:
    """Whether the key may upload: True, False for a reader key, None when nobody answered.

    There is no call that names a key's role, so this asks ingest-api to create a collection
    whose name is invalid: the access check refuses a reader key before the name is read
    (ROLE_NOT_ALLOWED), any other key is told the name is invalid. Nothing is ever created."""
    try:
        client.collections.create(_PROBE_COLLECTION, embedder="hashing", timeout=5)
    except SluiceError as error:
        if error.reason == Reason.ROLE_NOT_ALLOWED:
            return False
        if error.code in (None, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAUTHENTICATED):
            return None
        return True
    return True  # not reached: the name is invalid


def build_server(  # noqa: C901 - one small closure per tool, registered in turn
    client: Client, *, default_collection: str | None = None, read_only: bool = False, allowed_dirs: list[Path] | None = None
) -> "MCPServer":
    """The MCP server with Sluice's tools over `client`; without the upload tools if `read_only`."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import CallToolResult, ToolAnnotations
    from pydantic import Field

    roots = [d.resolve() for d in (allowed_dirs or [Path.cwd()])]
    read = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
    write = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
    collection_help = (
        "the collection" + (f" (default {default_collection!r})" if default_collection else "") + "; list_collections names them"
    )
    CollectionArg = Annotated[str | None, Field(description=collection_help)]  # a type alias, named as one

    instructions = (
        "Sluice ingests documents (PDF, Office, HTML, text, ...) into collections and searches their chunks. "
        "Use search to find passages (only READY documents are searched; explain says why each ranked there); "
        "list_collections, list_documents and list_chunks to see what is there; get_document to follow a "
        "document's processing."
        + (
            ""
            if read_only
            else " create_collection makes a collection first (documents go into one); upload_text and upload_file "
            "add a document: it is searchable once READY."
        )
        + (f" The default collection is {default_collection!r}." if default_collection else "")
    )
    server = MCPServer(SERVER_NAME, title="Sluice", version=__version__, instructions=instructions, log_level="WARNING")

    def collection_of(collection: str | None) -> str:
        name = (collection or default_collection or "").strip()
        if not name:
            raise CliError(
                "give a collection (list_collections names them); this server has no default collection",
                EXIT_USAGE,
                Reason.COLLECTION_REQUIRED,
            )
        return name

    def call(fn: Callable[[*_Args], CallToolResult], *args: *_Args) -> CallToolResult:
        try:
            return fn(*args)
        except (SluiceError, CliError) as error:
            return error_result(error)

    # -- search

    def _search(
        collection: str | None,
        query: str,
        top_k: int,
        mode: str,
        filters: dict[str, str] | None,
        where: list[str] | None,
        explain: bool,
    ) -> CallToolResult:
        name = collection_of(collection)
        if not query.strip():
            raise CliError("the query is empty", EXIT_USAGE, Reason.INVALID_ARGUMENT)
        try:
            from sluice_client.filters import where as parse_where

            conditions = parse_where(where or [])
        except ValueError as err:
            raise CliError(f"where: {err}", EXIT_USAGE, Reason.INVALID_ARGUMENT) from None
        results = client.search(
            name,
            query,
            top_k=top_k,
            mode=mode,
            filter=filters or None,
            where=conditions,
            explain=explain,
            timeout=SEARCH_TIMEOUT_SECONDS,
        )
        out = SearchOut(collection=name, query=query, mode=results.mode.name, hits=[hit_out(h) for h in results])
        if not out["hits"]:
            return _result(out, f"No matches in {name} (only READY documents are searched).")
        lines = [f"{len(out['hits'])} hit(s) in {name} ({out['mode'].lower()} search):"]
        for rank, hit in enumerate(out["hits"], 1):
            page = f", page {hit['page_number']}" if hit["page_number"] else ""
            lines.append(
                f"\n[{rank}] {hit['filename']}{page} (score {hit['score']:.3f}, document {hit['document_id']})\n{hit['text']}"
            )
            if hit["explanation"] is not None:
                lines.append(_explanation_line(hit["explanation"]))
        return _result(out, "\n".join(lines))

    @server.tool(title="Search a collection", annotations=read, structured_output=True)
    def search(
        query: Annotated[str, Field(description="what to look for, in words")],
        collection: CollectionArg = default_collection,
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K, description="how many passages to return")] = 5,
        mode: Annotated[
            Literal["hybrid", "vector", "keyword"],
            Field(description="hybrid fuses vector (meaning) and keyword (exact words) ranks"),
        ] = "hybrid",
        filters: Annotated[dict[str, str] | None, Field(description='metadata that must be equal, e.g. {"lang": "en"}')] = None,
        where: Annotated[
            list[str] | None,
            Field(
                description="typed metadata conditions, all must hold: "
                "'year>=2024', 'lang in en,de', 'draft=false', 'tags exists'"
            ),
        ] = None,
        explain: Annotated[
            bool,
            Field(
                description="also say why each passage ranked there: its keyword score and rank, vector similarity "
                "and rank, fused score, reranker's score and the query terms it contains"
            ),
        ] = False,
    ) -> Annotated[CallToolResult, SearchOut]:
        """Search the READY documents of a collection; returns the best-matching passages with their document,
        page and score (and with `explain`, why each ranked there)."""
        return call(_search, collection, query, top_k, mode, filters, where, explain)

    # -- collections and documents

    def _list_collections() -> CallToolResult:
        out = CollectionList(collections=[collection_out(c) for c in client.collections.list()])
        if not out["collections"]:
            return _result(out, "No collections yet.")
        lines = [
            f"{c['name']}: {c['ready_document_count']}/{c['document_count']} document(s) READY, embedder {c['embedder']}"
            + (f" - {c['description']}" if c["description"] else "")
            for c in out["collections"]
        ]
        return _result(out, "\n".join(lines))

    @server.tool(title="List collections", annotations=read, structured_output=True)
    def list_collections() -> Annotated[CallToolResult, CollectionList]:
        """List the collections with their document counts and embedders."""
        return call(_list_collections)

    def _get_document(document: str, collection: str | None) -> CallToolResult:
        doc = document_out(client.documents.get(resolve_document_id(client, document, collection or "")))
        return _result(doc, _document_line(doc))

    @server.tool(title="Get a document", annotations=read, structured_output=True)
    def get_document(
        document: Annotated[
            str,
            Field(description="a document id, its name (collections/C/documents/ID), a unique id prefix or a unique file name"),
        ],
        collection: Annotated[str | None, Field(description="narrow a prefix or file name to this collection")] = None,
    ) -> Annotated[CallToolResult, DocumentOut]:
        """A document's status (READY means searchable), error, size and chunk count."""
        return call(_get_document, document, collection)

    def _list_documents(collection: str | None, status: str | None, page_size: int, page_token: str) -> CallToolResult:
        name = (collection or default_collection or "").strip() or None
        out = list_page(client, name, status, page_size, page_token)
        if not out["documents"]:
            return _result(out, "No documents." if not page_token else "No more documents.")
        lines = [_document_line(d) for d in out["documents"]]
        if out["next_page_token"]:
            lines.append(f"(more: page_token={out['next_page_token']})")
        return _result(out, "\n".join(lines))

    @server.tool(title="List documents", annotations=read, structured_output=True)
    def list_documents(
        collection: Annotated[
            str | None,
            Field(
                description="only this collection"
                + (f" (default {default_collection!r})" if default_collection else " (default: every collection)")
            ),
        ] = default_collection,
        status: Annotated[
            Literal["pending", "parsing", "chunking", "embedding", "indexing", "ready", "failed"] | None,
            Field(description="only documents in this status"),
        ] = None,
        page_size: Annotated[int, Field(ge=1, le=MAX_PAGE_SIZE)] = 20,
        page_token: Annotated[str, Field(description="next_page_token of the previous page")] = "",
    ) -> Annotated[CallToolResult, DocumentPage]:
        """List documents, newest first, a page at a time, with their status."""
        return call(_list_documents, collection, status, page_size, page_token)

    def _list_chunks(document: str, collection: str | None, generation: int, page_size: int, page_token: str) -> CallToolResult:
        document_id = resolve_document_id(client, document, collection or "")
        page = client.documents.list_chunks(document_id, page_size=page_size, page_token=page_token, generation=generation)
        out = ChunkPageOut(
            document_id=document_id,
            generation=page.generation,
            total_size=page.total_size,
            chunks=[chunk_out(c) for c in page.chunks],
            next_page_token=page.next_page_token,
        )
        if not out["chunks"]:
            empty = "No more chunks." if page_token else f"No chunks: {document_id} has none (only READY documents do)."
            return _result(out, empty)
        lines = [f"Chunks of {document_id}, generation {page.generation} ({page.total_size} in all):"]
        for c in out["chunks"]:
            page_of = f", page {c['page_number']}" if c["page_number"] else ""
            state = "" if c["enabled"] else ", disabled (not searched)"
            lines.append(f"\n#{c['chunk_index']}{page_of}{state} (id {c['id']})\n{c['text']}" + (" …" if c["truncated"] else ""))
        if out["next_page_token"]:
            lines.append(f"\n(more: page_token={out['next_page_token']})")
        return _result(out, "\n".join(lines))

    @server.tool(title="List a document's chunks", annotations=read, structured_output=True)
    def list_chunks(
        document: Annotated[
            str,
            Field(description="a document id, its name (collections/C/documents/ID), a unique id prefix or a unique file name"),
        ],
        collection: Annotated[str | None, Field(description="narrow a prefix or file name to this collection")] = None,
        generation: Annotated[int, Field(ge=0, description="the index generation (0: the one search answers from)")] = 0,
        page_size: Annotated[int, Field(ge=1, le=MAX_PAGE_SIZE)] = 20,
        page_token: Annotated[str, Field(description="next_page_token of the previous page")] = "",
    ) -> Annotated[CallToolResult, ChunkPageOut]:
        """List a READY document's chunks in order, a page at a time: the passages search can return, with their
        page, whether they are enabled, and their text."""
        return call(_list_chunks, document, collection, generation, page_size, page_token)

    # -- uploads

    def _finish_upload(doc: Document, wait_seconds: float) -> CallToolResult:
        if wait_seconds > 0 and not doc.done:
            try:
                doc = client.documents.wait(doc.id, timeout=wait_seconds)
            except WaitTimeout as timeout:  # still processing: say where it is, not an error
                doc = next(iter(timeout.documents), doc)
        out = document_out(doc)
        note = "" if doc.done else "; it is searchable once READY (get_document follows it)"
        return _result(out, f"Uploaded {_document_line(out)}{note}")

    wait_arg = Annotated[
        float,
        Field(ge=0, le=MAX_WAIT_SECONDS, description="wait up to this many seconds for READY or FAILED (0: return at once)"),
    ]
    metadata_arg = Annotated[dict[str, str] | None, Field(description="metadata to store with the document (text)")]

    def _upload_text(
        text: str, filename: str, collection: str | None, metadata: dict[str, str] | None, wait_seconds: float
    ) -> CallToolResult:
        name = collection_of(collection)
        if not text.strip():
            raise CliError("the text is empty", EXIT_USAGE, "SOURCE_EMPTY")
        doc = client.documents.upload(name, text.encode("utf-8"), filename=filename, metadata=metadata)
        return _finish_upload(doc, wait_seconds)

    def _upload_file(path: str, collection: str | None, metadata: dict[str, str] | None, wait_seconds: float) -> CallToolResult:
        name = collection_of(collection)
        resolved = Path(path).expanduser().resolve()
        if not any(resolved.is_relative_to(root) for root in roots):
            raise CliError(
                f"{path} is outside the folders this server may read: "
                + ", ".join(str(r) for r in roots)
                + " (sluice mcp --allow-dir)",
                EXIT_USAGE,
                "PATH_NOT_ALLOWED",
            )
        if not resolved.is_file():
            raise CliError(f"no such file: {path}", EXIT_USAGE, "FILE_NOT_FOUND")
        doc = client.documents.upload(name, resolved, metadata=metadata)
        return _finish_upload(doc, wait_seconds)

    def _create_collection(name: str, description: str, model: str) -> CallToolResult:
        made = collection_out(client.collections.create(name, model=model, description=description, exist_ok=True))
        return _result(made, f"Collection {made['name']} is ready for documents (embedder {made['embedder']}).")

    if not read_only:

        @server.tool(title="Create a collection", annotations=write, structured_output=True)
        def create_collection(
            name: Annotated[str, Field(description="1 to 63 lowercase letters, digits, '-' or '_', starting alphanumeric")],
            description: Annotated[str, Field(description="a note for people about what it holds")] = "",
            model: Annotated[
                str,
                Field(
                    description="the local embedding model: empty for the default, all-MiniLM-L6-v2 (English), or "
                    "multilingual-e5-small (Chinese and ~100 other languages)"
                ),
            ] = "",
        ) -> Annotated[CallToolResult, CollectionOut]:
            """Create a collection to upload documents into, with a local embedder that works offline. A name
            that exists already returns that collection unchanged."""
            return call(_create_collection, name, description, model)

        @server.tool(title="Upload a text", annotations=write, structured_output=True)
        def upload_text(
            text: Annotated[str, Field(description="the document's content")],
            filename: Annotated[str, Field(description="a file name; its extension says the format (.md, .txt, .html)")],
            collection: CollectionArg = default_collection,
            metadata: metadata_arg = None,
            wait_seconds: wait_arg = 0,
        ) -> Annotated[CallToolResult, DocumentOut]:
            """Store a text as a document; it is parsed, chunked and embedded, and searchable once READY.
            The same text in the same collection is stored once."""
            return call(_upload_text, text, filename, collection, metadata, wait_seconds)

        @server.tool(title="Upload a file", annotations=write, structured_output=True)
        def upload_file(
            path: Annotated[str, Field(description="a file on the machine this server runs on, inside its allowed folders")],
            collection: CollectionArg = default_collection,
            metadata: metadata_arg = None,
            wait_seconds: wait_arg = 0,
        ) -> Annotated[CallToolResult, DocumentOut]:
            """Upload a file (PDF, Word, PowerPoint, HTML, Markdown, text, ...) from the server's machine; it is
            searchable once READY. The same content in the same collection is stored once."""
            return call(_upload_file, path, collection, metadata, wait_seconds)

    return server


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run_mcp(client: Client, args: argparse.Namespace) -> int:
    """`sluice mcp`: serve until the MCP client goes away (stdio) or Ctrl-C (http)."""
    if args.transport == "stdio" and (args.host or args.port):
        raise CliError("--host and --port are for --transport http", EXIT_USAGE, "USAGE")
    allowed = [Path(d).expanduser() for d in (args.allow_dir or [])]
    for folder in allowed:
        if not folder.is_dir():
            raise CliError(f"--allow-dir {folder}: not a folder", EXIT_USAGE, "USAGE")
    read_only = args.read_only
    if not read_only and may_write(client) is False:
        read_only = True
        print("sluice mcp: the API key is a reader key: serving the read-only tools (no uploads)", file=sys.stderr)
    server = build_server(client, default_collection=args.collection, read_only=read_only, allowed_dirs=allowed or None)
    if args.transport == "stdio":
        server.run("stdio")
        return EXIT_OK
    host, port = args.host or DEFAULT_HOST, args.port or DEFAULT_PORT
    if not _is_loopback(host):
        print(f"sluice mcp: listening on {host}: whoever reaches this port acts with this server's API key", file=sys.stderr)
    print(f"sluice mcp: streamable HTTP on http://{host}:{port}{HTTP_PATH}", file=sys.stderr, flush=True)
    server.run("streamable-http", host=host, port=port, streamable_http_path=HTTP_PATH)
    return EXIT_OK


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", common: argparse.ArgumentParser) -> None:
    """The `mcp` subcommand (main.py's parser)."""
    p = sub.add_parser(
        "mcp",
        help="serve Sluice's tools to MCP clients (Claude Desktop, IDEs, agents)",
        parents=[common],
        description="An MCP server with tools to search, upload, get and list documents and their chunks "
        "and list collections, acting with this CLI's API key (docs/mcp.md).",
    )
    p.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="stdio",
        help="stdio (the MCP client starts `sluice mcp`; the default) or http (streamable HTTP)",
    )
    p.add_argument("--host", help=f"http: address to listen on (default {DEFAULT_HOST})")
    p.add_argument("--port", type=int, help=f"http: port (default {DEFAULT_PORT})")
    p.add_argument("--collection", "-c", help="the collection tools use when none is given")
    p.add_argument("--read-only", action="store_true", help="leave out the upload tools (automatic with a reader key)")
    p.add_argument(
        "--allow-dir",
        action="append",
        metavar="DIR",
        help="upload_file may read files under this folder (repeatable; default: the current folder)",
    )
    p.set_defaults(handler=run_mcp)
