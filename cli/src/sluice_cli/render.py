"""How documents, collections and hits look: rich tables for people, JSON for scripts."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from sluice_client.protos import collection_pb2, document_pb2, document_service_pb2, search_service_pb2


def _make_console(stderr: bool) -> Console:
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        # Piped into grep or a file: do not cut tables at 80 columns.
        console = Console(stderr=stderr, highlight=False, width=200)
    return console


# Results on stdout, progress and errors on stderr, so `> file` keeps only results.
out = _make_console(stderr=False)
err = _make_console(stderr=True)

# Order of the processing stages, for progress bars: PENDING counts as stage 0.
STAGES = [
    document_pb2.DOCUMENT_STATUS_PENDING,
    document_pb2.DOCUMENT_STATUS_PARSING,
    document_pb2.DOCUMENT_STATUS_CHUNKING,
    document_pb2.DOCUMENT_STATUS_EMBEDDING,
    document_pb2.DOCUMENT_STATUS_INDEXING,
]
TERMINAL = {document_pb2.DOCUMENT_STATUS_READY, document_pb2.DOCUMENT_STATUS_FAILED}
STATUS_STYLE = {
    "READY": "green",
    "FAILED": "red",
    "PENDING": "yellow",
}
PROVIDER_NAMES = {
    collection_pb2.EMBEDDER_PROVIDER_HASHING: "hashing",
    collection_pb2.EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS: "local",
    collection_pb2.EMBEDDER_PROVIDER_OPENAI: "openai",
}


def status_name(status: document_pb2.DocumentStatus.ValueType) -> str:
    name: str = document_pb2.DocumentStatus.Name(status)
    return name.removeprefix("DOCUMENT_STATUS_")


def job_status_name(status: document_pb2.IngestionJobStatus.ValueType) -> str:
    name: str = document_pb2.IngestionJobStatus.Name(status)
    return name.removeprefix("INGESTION_JOB_STATUS_")


def outcome_name(outcome: document_pb2.AttemptOutcome.ValueType) -> str:
    name: str = document_pb2.AttemptOutcome.Name(outcome)
    return name.removeprefix("ATTEMPT_OUTCOME_")


def version_state_name(state: document_pb2.VersionState.ValueType) -> str:
    name: str = document_pb2.VersionState.Name(state)
    return name.removeprefix("VERSION_STATE_")


def mode_name(mode: search_service_pb2.SearchMode.ValueType) -> str:
    name: str = search_service_pb2.SearchMode.Name(mode)
    return name.removeprefix("SEARCH_MODE_")


def styled_status(status: document_pb2.DocumentStatus.ValueType) -> Text:
    return styled_status_name(status_name(status))


def styled_status_name(name: str) -> Text:
    """A status by its name ("READY"), in its colour."""
    return Text(name, style=STATUS_STYLE.get(name, "cyan"))


def fraction_done(doc: document_pb2.Document) -> float:
    """How far a document has come through the pipeline, 0..1 (READY = 1)."""
    if doc.status in TERMINAL:
        return 1.0
    stage = doc.progress.stage if doc.HasField("progress") and doc.progress.stage else doc.status
    try:
        index = STAGES.index(stage)
    except ValueError:
        index = 0
    within = 0.0
    if doc.HasField("progress") and doc.progress.total > 0 and doc.progress.stage == stage:
        within = min(1.0, doc.progress.done / doc.progress.total)
    # PENDING weighs nothing; each working stage a quarter.
    if index == 0:
        return 0.0
    return min(0.999, ((index - 1) + within) / (len(STAGES) - 1))


def progress_text(doc: document_pb2.Document) -> str:
    if doc.status in TERMINAL or not doc.HasField("progress") or doc.progress.total <= 0:
        return ""
    unit = f" {doc.progress.unit}" if doc.progress.unit else ""
    return f"{doc.progress.done}/{doc.progress.total}{unit}"


def timestamp(ts: Timestamp | None) -> str:
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return ""
    value: datetime = ts.ToDatetime(tzinfo=UTC).astimezone()
    return value.strftime("%Y-%m-%d %H:%M:%S")


def age(ts: Timestamp | None) -> str:
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return ""
    created: datetime = ts.ToDatetime(tzinfo=UTC)
    seconds = (datetime.now(UTC) - created).total_seconds()
    if seconds < 60:
        return f"{max(0, int(seconds))}s ago"
    if seconds < 3600:
        return f"{int(seconds // 60)}m ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h ago"
    return f"{int(seconds // 86400)}d ago"


def to_dict(message: Message) -> dict[str, Any]:
    """The proto3 JSON form with the .proto field names (snake_case) and enum names."""
    form: dict[str, Any] = json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return form


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def print_json_line(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def collections_table(collections: Iterable[collection_pb2.Collection]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("NAME", "EMBEDDER", "MODEL", "DIM", "CHUNK", "DOCS", "READY", "CREATED"):
        table.add_column(column, no_wrap=True)
    for c in collections:
        table.add_row(
            escape(c.name),
            PROVIDER_NAMES.get(c.embedder.provider, "?"),
            escape(c.embedder.model),
            str(c.embedder.dimensions),
            f"{c.chunking.max_characters}/{c.chunking.overlap}" if c.chunking.max_characters else "default",
            str(c.document_count),
            str(c.ready_document_count),
            timestamp(c.create_time),
        )
    return table


GENERATION_STATES = {1: "building", 2: "active", 3: "retired", 4: "cancelled"}


def generations_table(generations: Iterable[collection_pb2.CollectionGeneration]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in (
        "GENERATION",
        "STATE",
        "EMBEDDER",
        "MODEL",
        "DIM",
        "DOCS",
        "READY",
        "FAILED",
        "PENDING",
        "CREATED",
        "ACTIVATED",
    ):
        table.add_column(column, no_wrap=True)
    for g in generations:
        table.add_row(
            str(g.number),
            GENERATION_STATES.get(g.state, "?"),
            PROVIDER_NAMES.get(g.embedder.provider, "?"),
            escape(g.embedder.model),
            str(g.embedder.dimensions),
            str(g.documents_total),
            str(g.documents_ready),
            str(g.documents_failed),
            str(g.documents_pending),
            timestamp(g.create_time),
            timestamp(g.activate_time),
        )
    return table


def documents_table(documents: Iterable[document_pb2.Document], *, show_collection: bool = True) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("ID", no_wrap=True)
    if show_collection:
        table.add_column("COLLECTION", no_wrap=True)
    table.add_column("FILENAME", overflow="fold", max_width=40)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("PROGRESS", no_wrap=True)
    table.add_column("TRIES", no_wrap=True, justify="right")
    table.add_column("CHUNKS", no_wrap=True, justify="right")
    table.add_column("UPDATED", no_wrap=True)
    table.add_column("ERROR", overflow="fold", max_width=60)
    for d in documents:
        row: list[RenderableType] = [d.id]
        if show_collection:
            row.append(escape(d.collection))
        row += [
            escape(d.filename),
            styled_status(d.status),
            progress_text(d),
            f"{d.attempts}/{d.max_attempts}" if d.max_attempts else str(d.attempts),
            str(d.chunk_count) if d.chunk_count else "",
            age(d.update_time),
            Text(d.error_message, style="red") if d.error_message else "",
        ]
        table.add_row(*row)
    return table


def document_details(doc: document_pb2.Document) -> list[RenderableType]:
    """Renderables of `sluice show`: the fields, the attempt history, then for a document with a
    source_uri its versions (the current one, a pending or failed newer one, the last ten)."""
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold", no_wrap=True)
    fields.add_column(overflow="fold")
    rows: list[tuple[str, str | Text]] = [
        ("id", doc.id),
        ("name", doc.name),
        ("collection", doc.collection),
        ("filename", doc.filename),
        ("mime type", doc.mime_type),
        ("size", human_bytes(doc.size_bytes)),
        ("sha256", doc.content_sha256),
        *([("source uri", doc.source_uri), ("version", str(doc.version))] if doc.source_uri else []),
        ("status", styled_status(doc.status)),
        ("job", job_status_name(doc.job_status) if doc.job_status else ""),
        ("progress", _progress_line(doc)),
        ("attempts", f"{doc.attempts} of {doc.max_attempts}"),
        ("chunks", str(doc.chunk_count)),
        ("created", timestamp(doc.create_time)),
        ("updated", timestamp(doc.update_time)),
    ]
    if doc.HasField("next_attempt_time"):
        rows.append(("next attempt", timestamp(doc.next_attempt_time)))
    if doc.error_message:
        code = f" [{doc.error_code}]" if doc.error_code else ""
        rows.append(("error", Text(doc.error_message + code, style="red")))
    for key, text in sorted(doc.metadata.items()):
        rows.append((f"metadata.{key}", text))
    for label, value in rows:
        fields.add_row(label, value if isinstance(value, Text) else escape(str(value)))
    renderables: list[RenderableType] = [fields]
    if doc.attempt_history:
        history = Table(title="attempts", title_justify="left", box=None, pad_edge=False, header_style="bold")
        for column in ("#", "WORKER", "STAGE", "OUTCOME", "STARTED", "ENDED", "ERROR"):
            history.add_column(column, no_wrap=column != "ERROR", overflow="fold")
        for a in doc.attempt_history:
            outcome = outcome_name(a.outcome)
            style = {"SUCCEEDED": "green", "RETRYABLE_FAILURE": "yellow", "PERMANENT_FAILURE": "red", "LEASE_EXPIRED": "red"}.get(
                outcome, ""
            )
            error = a.error_message
            if a.error_code:
                error = f"{error} [{a.error_code}]" if error else f"[{a.error_code}]"
            history.add_row(
                str(a.number),
                escape(a.worker_id),
                status_name(a.stage),
                Text(outcome, style=style),
                timestamp(a.start_time),
                timestamp(a.end_time),
                Text(error, style="red") if error else "",
            )
        renderables.append(Text(""))
        renderables.append(history)
    if doc.HasField("versions") and doc.versions.history:
        renderables.append(Text(""))
        renderables.append(_versions_table(doc.versions))
    return renderables


def _versions_table(versions: document_pb2.DocumentVersions) -> Table:
    """The versions of a document's source_uri, newest first (docs/architecture.md#document-versions)."""
    table = Table(title="versions", title_justify="left", box=None, pad_edge=False, header_style="bold")
    for column in ("#", "STATE", "STATUS", "DOCUMENT", "UPLOADED", "SERVING FROM", "ENDED", "ERROR"):
        table.add_column(column, no_wrap=column != "ERROR", overflow="fold")
    state_style = {"CURRENT": "green", "NEXT": "cyan", "FAILED": "red"}
    for v in versions.history:
        state = version_state_name(v.state)
        table.add_row(
            str(v.version),
            Text(state, style=state_style.get(state, "")),
            styled_status(v.status) if v.status else "",
            escape(v.document_id),
            timestamp(v.create_time),
            timestamp(v.serving_time),
            timestamp(v.end_time),
            Text(v.error_message, style="red") if v.error_message else "",
        )
    return table


def _progress_line(doc: document_pb2.Document) -> str:
    if doc.status in TERMINAL or not doc.HasField("progress") or not doc.progress.stage:
        return ""
    text = status_name(doc.progress.stage)
    if doc.progress.total:
        text += f" {doc.progress.done}/{doc.progress.total} {doc.progress.unit}".rstrip()
    return text


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def snippet(hit: search_service_pb2.SearchHit, width: int = 240) -> Text:
    """The hit's text on one line, matched spans in bold, cut around the first match."""
    text = hit.text
    spans = [(h.start, h.end) for h in hit.highlights if 0 <= h.start < h.end <= len(text)]
    start = 0
    if spans and len(text) > width:
        start = max(0, min(spans[0][0] - width // 4, len(text) - width))
        # Begin at a word, not in the middle of one (unless the text has no spaces: CJK).
        space = text.find(" ", start, spans[0][0])
        if start > 0 and space != -1:
            start = space + 1
    end = min(len(text), start + width)
    piece = Text()
    if start > 0:
        piece.append("…")
    cursor = start
    for s, e in sorted(spans):
        if e <= cursor or s >= end:
            continue
        s = max(s, cursor)
        piece.append(_flat(text[cursor:s]))
        piece.append(_flat(text[s : min(e, end)]), style="bold yellow")
        cursor = min(e, end)
    piece.append(_flat(text[cursor:end]))
    if end < len(text):
        piece.append("…")
    return piece


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def print_hits(
    console: Console, hits: Iterable[search_service_pb2.SearchHit], *, context: bool = False, explain: bool = False
) -> None:
    """One block per hit: rank, document, page, score, then the matching text (or, with
    `context`, the hit's chunk joined with its neighbours), and with `explain` why it ranked there."""
    for rank, hit in enumerate(hits, 1):
        header = Text(f"{rank:>2}. ", style="bold") + Text(hit.filename, style="bold cyan")
        if hit.page_number:
            header += Text(f"  page {hit.page_number}")
        header += Text(f"  score {hit.score:.4f}", style="green")
        header += Text(f"  {hit.document_id} #{hit.chunk_index}", style="dim")
        console.print(header, soft_wrap=True)
        if context and hit.context:
            shown = hit.context if len(hit.context) <= 1200 else hit.context[:1200] + "…"
            console.print(Padding(Text(shown), (0, 0, 0, 4)))
        else:
            console.print(Padding(snippet(hit, width=320), (0, 0, 0, 4)))
        if explain and hit.HasField("explanation"):
            console.print(Padding(explanation_table(hit.explanation), (0, 0, 0, 4), expand=False))
            notes = explanation_notes(hit.explanation)
            console.print(Padding(Text(notes, style="dim"), (0, 0, 1, 4), expand=False) if notes else "")


def _optional(message: search_service_pb2.HitExplanation, name: str, digits: int = 4) -> str:
    """A proto3-optional number, or "-" when the hit was not in that list (unset is not 0)."""
    if not message.HasField(name):  # type: ignore[arg-type]
        return "-"
    value = getattr(message, name)
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def explanation_table(e: search_service_pb2.HitExplanation) -> Table:
    """Why a hit ranked where it did (`sluice search --explain`): each list's score and rank, its
    part of the fused score, the reranker's; "-" where the hit was not in a list."""
    table = Table(box=None, pad_edge=False, header_style="dim bold", show_edge=False)
    for column in ("", "SCORE", "RANK", "PART"):
        table.add_column(column, no_wrap=True, justify="left" if not column else "right")
    table.add_row("keyword", _optional(e, "keyword_score"), _optional(e, "keyword_rank"), _optional(e, "keyword_contribution"))
    table.add_row("vector", _optional(e, "vector_similarity"), _optional(e, "vector_rank"), _optional(e, "vector_contribution"))
    table.add_row("fused", f"{e.fused_score:.4f}", str(e.first_stage_rank or "-"), "")
    rerank_status = search_service_pb2.RerankStatus.Name(e.rerank_status).removeprefix("RERANK_STATUS_")
    if e.rerank_status != search_service_pb2.RERANK_STATUS_UNSPECIFIED or e.HasField("rerank_score"):
        table.add_row("rerank", _optional(e, "rerank_score"), "", rerank_status.lower().replace("_", " "))
    return table


def explanation_notes(e: search_service_pb2.HitExplanation) -> str:
    """The line under an explanation's table: the vector list's weight (HYBRID) and the matched terms."""
    notes = []
    if e.HasField("vector_weight"):
        notes.append(f"vector weight {e.vector_weight:.2f}")
    if e.matched_terms:
        notes.append("matched: " + ", ".join(e.matched_terms))
    return "; ".join(notes)


def first_line(text: str, width: int = 80) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= width else line[: width - 1] + "…"


def chunks_table(chunks: Iterable[document_service_pb2.DocumentChunk]) -> Table:
    """`sluice chunks list`: one row a chunk, its text's first line; disabled ones dimmed."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column, justify in (
        ("#", "right"),
        ("PAGE", "right"),
        ("TOKENS", "right"),
        ("ENABLED", "left"),
        ("ID", "left"),
        ("TEXT", "left"),
    ):
        table.add_column(column, no_wrap=True, justify=justify)  # type: ignore[arg-type]
    for c in chunks:
        text = first_line(c.text) + (" (edited)" if c.edited else "")
        table.add_row(
            str(c.chunk_index),
            str(c.page_number) if c.page_number else "",
            str(c.token_count),
            Text("yes", style="green") if c.enabled else Text("no", style="red"),
            c.id,
            Text(text, style="" if c.enabled else "dim"),
        )
    return table


def chunks_label(count: int) -> str:
    return f"{count} chunk{'' if count == 1 else 's'}"
