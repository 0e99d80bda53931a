"""The worker's domain: chunks, chunking settings, the pipeline version and failures.

Pure Python: no gRPC, no unstructured, no IO.
"""

from __future__ import annotations

import enum
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypedDict

from sluice.v1 import document_pb2
from sluice_common.worker_errors import WorkerErrorCode

# Bump when parsing or chunking changes what chunks a document yields: snapshots made by
# another version are then ignored (they are keyed by content hash and pipeline version).
PIPELINE_REVISION = "8"  # 7: chunks carry their elements' boxes; 8: OCR detects at 150 dpi, spaCy budget per document


@dataclass(frozen=True)
class ChunkingSettings:
    max_characters: int
    new_after_n_chars: int
    overlap: int

    @classmethod
    def effective(
        cls, max_characters: int, new_after_n_chars: int, overlap: int, *, default_max: int, default_new_after: int
    ) -> ChunkingSettings:
        """Zeros mean "server default" (collection.proto); the result is always consistent."""
        maximum = max_characters or default_max
        new_after = min(new_after_n_chars or min(default_new_after, maximum), maximum)
        overlap = max(0, min(overlap, maximum - 1))
        return cls(maximum, new_after, overlap)


def pipeline_version(chunking: ChunkingSettings, unstructured_version: str) -> str:
    """Names everything that decides the chunk list, so that different collection settings
    never share a snapshot of the same content."""
    return (
        f"sluice-worker/{PIPELINE_REVISION}+unstructured-{unstructured_version}"
        f";max={chunking.max_characters};new_after={chunking.new_after_n_chars};overlap={chunking.overlap}"
    )


class Box(TypedDict):
    """Where on its page an element lies, in fractions of the page from its top-left corner."""

    page: int
    left: float
    top: float
    right: float
    bottom: float


@dataclass
class ChunkRecord:
    index: int
    text: str
    page_number: int = 0
    element_type: str = ""
    section_title: str = ""
    text_as_html: str = ""
    embedding: list[float] = field(default_factory=list)
    # How the text was obtained: "text_layer" (the file's own text), "ocr", or "mixed"; and for
    # OCR'd text the recognizer's mean confidence over its characters (0..1), else None.
    text_source: str = ""
    ocr_confidence: float | None = None
    # Where the chunk's elements lie on their pages: {"page", "left", "top", "right", "bottom"}
    # in fractions of the page from its top-left corner (parsing/chunking.py); empty when the
    # parser gave no coordinates (formats without pages).
    boxes: list[Box] = field(default_factory=list)
    # The types of the chunk's elements, in order of first appearance (parsing/chunking.py).
    element_types: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# What PostgreSQL cannot hold in text or jsonb: NUL, and lone surrogates (not valid UTF-8 at
# all, so protobuf cannot even send them). A text file with NUL bytes or an e-mail with
# undecodable bytes (read with surrogateescape) carries them.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_text(text: str) -> str:
    """`text` as PostgreSQL can store it: NULs dropped, lone surrogates made U+FFFD."""
    if not _UNSTORABLE.search(text):
        return text
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


def storable_chunks(chunks: list[ChunkRecord]) -> list[ChunkRecord]:
    """Chunks fit for SaveSnapshot and CompleteJob: every text field storable, chunks left with
    no text dropped, indexes renumbered 0..n-1."""
    out: list[ChunkRecord] = []
    for chunk in chunks:
        text = storable_text(chunk.text).strip()
        if not text:
            continue
        out.append(
            replace(
                chunk,
                index=len(out),
                text=text,
                element_type=storable_text(chunk.element_type),
                element_types=[storable_text(t) for t in chunk.element_types],
                section_title=storable_text(chunk.section_title),
                text_as_html=storable_text(chunk.text_as_html),
            )
        )
    return out


@dataclass(frozen=True)
class ParseSummary:
    """What PARSING found, reported before CHUNKING starts."""

    elements: int
    pages: int
    characters: int


class JobFailure(Exception):
    """A failed attempt to report through FailJob."""

    retryable = True

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class DocumentInvalid(JobFailure):
    """The document's own fault (corrupt, encrypted, empty, unsupported, too large): retrying
    cannot help, so it fails at once with a message its owner understands."""

    retryable = False


class TransientFailure(JobFailure):
    """Anything else: retried by ingest-api with backoff."""

    retryable = True


class ConfigurationInvalid(JobFailure):
    """The collection asks for something this worker cannot do (an unknown embedder, a model
    that is not installed): retrying the same job cannot help."""

    retryable = False


class DataRefused(JobFailure):
    """ingest-api refused the job's own data (INVALID_ARGUMENT and the like): the same data would
    be refused on every attempt, so the job fails at once with the server's reason."""

    retryable = False


class Stage(enum.IntEnum):
    """The pipeline stages, by their DocumentStatus numbers in the protos: what ReportStage sends."""

    PARSING = document_pb2.DOCUMENT_STATUS_PARSING
    CHUNKING = document_pb2.DOCUMENT_STATUS_CHUNKING
    EMBEDDING = document_pb2.DOCUMENT_STATUS_EMBEDDING
    INDEXING = document_pb2.DOCUMENT_STATUS_INDEXING


class IngestUnavailable(Exception):
    """ingest-api could not be reached (or failed) after a few tries: the job is abandoned to
    its lease, which another attempt takes over."""


class JobLeaseLost(Exception):
    """The lease is no longer ours (expired and taken over, job gone, or cancelled): stop and
    write nothing more."""


# Error codes (FailJob.error_code, Document.error_code), from the registry ingest-api checks.
PDF_ENCRYPTED = WorkerErrorCode.PDF_ENCRYPTED.value
DOCUMENT_CORRUPT = WorkerErrorCode.DOCUMENT_CORRUPT.value
DOCUMENT_EMPTY = WorkerErrorCode.DOCUMENT_EMPTY.value
UNSUPPORTED_TYPE = WorkerErrorCode.UNSUPPORTED_TYPE.value
DOCUMENT_TOO_LARGE = WorkerErrorCode.DOCUMENT_TOO_LARGE.value
TOO_MANY_PAGES = WorkerErrorCode.TOO_MANY_PAGES.value
IMAGE_TOO_LARGE = WorkerErrorCode.IMAGE_TOO_LARGE.value
TOO_MANY_CHUNKS = WorkerErrorCode.TOO_MANY_CHUNKS.value
PARSE_TIMEOUT = WorkerErrorCode.PARSE_TIMEOUT.value
PARSE_MEMORY_LIMIT = WorkerErrorCode.PARSE_MEMORY_LIMIT.value
PARSER_CRASHED = WorkerErrorCode.PARSER_CRASHED.value
PARSER_UNAVAILABLE = WorkerErrorCode.PARSER_UNAVAILABLE.value
# The file is beyond what the parser can read (nesting, sizes of its parts): named, not lost.
PARSER_LIMIT = WorkerErrorCode.PARSER_LIMIT.value
# The parser found no text although the file visibly has some: not the same as an empty file.
PARSER_LOST_TEXT = WorkerErrorCode.PARSER_LOST_TEXT.value
INTERNAL = WorkerErrorCode.WORKER_INTERNAL_ERROR.value
# ingest-api refused a JobService call about the job's data (permanent) or failed on it with
# an internal error (retryable: the job's bounded retry, rule 7 of docs/architecture.md#the-rules, applies).
INGEST_REJECTED = WorkerErrorCode.INGEST_REJECTED.value
INGEST_ERROR = WorkerErrorCode.INGEST_ERROR.value
