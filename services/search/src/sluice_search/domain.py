"""The search domain: queries, filters, hits and their validation. Pure Python (fusion: fusion.py)."""

from __future__ import annotations

import enum
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sluice_common.errors import InvalidArgument
from sluice_common.reasons import Reason
from sluice_common.reranking import RerankerSpec

from .filters import Node, TimeRange

DEFAULT_TOP_K = 10


class Mode(enum.Enum):
    VECTOR = "VECTOR"
    KEYWORD = "KEYWORD"
    HYBRID = "HYBRID"


@dataclass(frozen=True)
class Collection:
    id: int
    name: str
    embedder_provider: str
    embedder_model: str
    dimensions: int
    tenant_id: int = 0
    # The ACTIVE index generation the collection resolved to: its id (the partial index's
    # literal) and its number (returned with the answer).
    generation_id: int = 0
    generation: int = 0
    # ChunkingConfig.overlap: how much text neighbouring chunks may share (context.py).
    chunk_overlap: int = 0
    # The collection's default reranker (collections.reranker), None for none.
    reranker: RerankerSpec | None = None
    # The precision of the generation's HNSW index (sluice_common.vector_index): float4, halfvec
    # or binary (candidates re-scored exactly).
    vector_precision: str = "float4"


@dataclass(frozen=True)
class DocumentFilter:
    """Every non-empty field must match (AND); a list matches when any of its values does.
    `where` is a checked tree of typed conditions (filters.py); `created` / `updated` are time
    ranges of the document's upload and last change."""

    metadata: dict[str, str] = field(default_factory=dict)
    filenames: tuple[str, ...] = ()
    mime_types: tuple[str, ...] = ()
    document_ids: tuple[str, ...] = ()
    where: Node | None = None
    created: TimeRange | None = None
    updated: TimeRange | None = None

    def __bool__(self) -> bool:
        return bool(
            self.metadata or self.filenames or self.mime_types or self.document_ids or self.where or self.created or self.updated
        )


@dataclass(frozen=True)
class ContextOptions:
    """What to do with the first stage's hits (context.py): a threshold on its score, a cap per
    document, and how many neighbouring chunks to join into each hit's context."""

    neighbor_chunks: int = 0
    max_hits_per_document: int = 0
    min_score: float | None = None


@dataclass(frozen=True)
class RerankRequest:
    """A request's reranking: off, its own reranker (`spec`), or the collection's with other
    candidates / timeout_ms; and a threshold on the reranker's scores."""

    disabled: bool = False
    spec: RerankerSpec | None = None
    candidates: int = 0
    timeout_ms: int = 0
    min_score: float | None = None


@dataclass(frozen=True)
class SearchQuery:
    """A validated request; `vector` is None when the text is to be embedded."""

    collection: str
    text: str
    vector: tuple[float, ...] | None
    top_k: int
    mode: Mode
    filter: DocumentFilter
    context: ContextOptions = ContextOptions()
    rerank: RerankRequest | None = None
    # Fill each hit's Explanation (explain.py); it changes no hit and no order.
    explain: bool = False
    # The index generation to search, by its number: 0 for the ACTIVE one (service.py).
    generation: int = 0


@dataclass
class Explanation:
    """Why a hit ranked where it did (docs/search.md, "Why a hit ranked"): the figures the ranking
    used. None is a list the hit was not in (its rank), or a side the mode does not use."""

    keyword_score: float | None = None
    keyword_rank: int | None = None
    vector_similarity: float | None = None
    vector_rank: int | None = None
    # HYBRID's fused score; the mode's score otherwise (the first-stage score).
    fused_score: float = 0.0
    # HYBRID: each list's part of the fused score (0 for a list the hit was not in), and the
    # vector list's weight for this query (fusion.py).
    keyword_contribution: float | None = None
    vector_contribution: float | None = None
    vector_weight: float | None = None
    first_stage_rank: int = 0
    rerank_score: float | None = None
    rerank_status: str = ""  # rerank.py's status of the search
    # The query's words as the keyword index stems them that the chunk holds, by code point.
    matched_terms: list[str] = field(default_factory=list)


@dataclass
class Hit:
    chunk_id: int
    text: str
    score: float
    document_id: str
    filename: str
    chunk_index: int
    page_number: int
    element_type: str
    metadata: dict[str, Any]  # stored JSON (sluice_common.metadata): text and typed forms are made from it
    highlights: list[tuple[int, int]] = field(default_factory=list)
    text_as_html: str = ""
    text_source: str = ""
    ocr_confidence: float = 0.0
    # [{"page", "left", "top", "right", "bottom"}] as the worker found them (chunks.boxes).
    boxes: list[dict[str, Any]] = field(default_factory=list)
    # The mode's score, kept when a reranker replaces `score`.
    first_stage_score: float = 0.0
    rerank_score: float = 0.0
    context: str = ""
    context_first_chunk_index: int = 0
    context_last_chunk_index: int = 0
    # Set when the query asked for explanations (SearchQuery.explain).
    explanation: Explanation | None = None


@dataclass(frozen=True)
class Limits:
    max_top_k: int = 100
    max_query_characters: int = 4096
    max_filter_keys: int = 16
    max_filter_values: int = 100
    max_key_characters: int = 256
    max_value_characters: int = 1024
    max_filter_depth: int = 4
    max_filter_conditions: int = 32
    max_neighbor_chunks: int = 5


def validate_query(
    *,
    collection: str,
    text: str,
    vector: Sequence[float],
    top_k: int,
    mode: Mode | None,
    filter: DocumentFilter,
    limits: Limits = Limits(),
    context: ContextOptions = ContextOptions(),
    rerank: RerankRequest | None = None,
    explain: bool = False,
    generation: int = 0,
) -> SearchQuery:
    """Check a request before any IO; every refusal says what is wrong (INVALID_ARGUMENT)."""
    if not collection:
        raise InvalidArgument("collection is required", reason=Reason.COLLECTION_REQUIRED)
    text = text.strip()
    if len(text) > limits.max_query_characters:
        raise InvalidArgument(
            f"query is {len(text)} characters long; at most {limits.max_query_characters} are allowed",
            reason=Reason.QUERY_TOO_LONG,
        )
    if top_k == 0:
        top_k = DEFAULT_TOP_K
    if not 1 <= top_k <= limits.max_top_k:
        raise InvalidArgument(
            f"top_k must be between 1 and {limits.max_top_k} (0 means {DEFAULT_TOP_K}); got {top_k}",
            reason=Reason.TOP_K_OUT_OF_RANGE,
        )
    if mode is None:  # unspecified: HYBRID when there is text to match, VECTOR otherwise
        mode = Mode.HYBRID if text else Mode.VECTOR
    if not text and not vector:
        raise InvalidArgument("either query or query_vector is required", reason=Reason.EMPTY_QUERY)
    if mode is Mode.KEYWORD and not text:
        raise InvalidArgument("KEYWORD search needs a query text", reason=Reason.EMPTY_QUERY)
    if mode is Mode.HYBRID and not text:
        raise InvalidArgument("HYBRID search needs a query text (and optionally a query_vector)", reason=Reason.EMPTY_QUERY)
    checked_vector: tuple[float, ...] | None = None
    if vector:
        checked_vector = tuple(float(x) for x in vector)
        if not all(math.isfinite(x) for x in checked_vector):
            raise InvalidArgument("query_vector contains NaN or infinity", reason=Reason.INVALID_VECTOR)
        if not any(checked_vector):
            raise InvalidArgument("query_vector is all zeros; cosine distance to it is undefined", reason=Reason.INVALID_VECTOR)
    if rerank is not None and rerank.min_score is not None and not math.isfinite(rerank.min_score):
        raise InvalidArgument("rerank.min_score must be a finite number", reason=Reason.INVALID_RERANKER)
    if generation < 0:
        raise InvalidArgument(
            f"generation must be a generation's number (1 or more), or 0 for the ACTIVE one; got {generation}",
            reason=Reason.INVALID_GENERATION,
        )
    return SearchQuery(
        collection,
        text,
        checked_vector,
        top_k,
        mode,
        validate_filter(filter, limits),
        validate_context(context, limits),
        rerank,
        explain=bool(explain),
        generation=generation,
    )


def validate_context(options: ContextOptions, limits: Limits = Limits()) -> ContextOptions:
    if not 0 <= options.neighbor_chunks <= limits.max_neighbor_chunks:
        raise InvalidArgument(
            f"neighbor_chunks must be between 0 and {limits.max_neighbor_chunks}; got {options.neighbor_chunks}",
            reason=Reason.INVALID_CONTEXT,
        )
    if not 0 <= options.max_hits_per_document <= limits.max_top_k:
        raise InvalidArgument(
            f"max_hits_per_document must be between 0 (no limit) and {limits.max_top_k}; got {options.max_hits_per_document}",
            reason=Reason.INVALID_CONTEXT,
        )
    if options.min_score is not None and not math.isfinite(options.min_score):
        raise InvalidArgument("min_score must be a finite number", reason=Reason.INVALID_CONTEXT)
    return options


def validate_filter(filter: DocumentFilter, limits: Limits = Limits()) -> DocumentFilter:
    if len(filter.metadata) > limits.max_filter_keys:
        raise InvalidArgument(
            f"filter.metadata has {len(filter.metadata)} keys; at most {limits.max_filter_keys} are allowed",
            reason=Reason.INVALID_FILTER,
        )
    for key, value in filter.metadata.items():
        if not key.strip():
            raise InvalidArgument("filter.metadata has an empty key", reason=Reason.INVALID_FILTER)
        if len(key) > limits.max_key_characters or len(value) > limits.max_value_characters:
            raise InvalidArgument(
                f"filter.metadata key or value too long (key ≤ {limits.max_key_characters}, "
                f"value ≤ {limits.max_value_characters} characters)",
                reason=Reason.INVALID_FILTER,
            )
        _check_text("filter.metadata", key)
        _check_text("filter.metadata", value)
    for name, values in (
        ("filenames", filter.filenames),
        ("mime_types", filter.mime_types),
        ("document_ids", filter.document_ids),
    ):
        if len(values) > limits.max_filter_values:
            raise InvalidArgument(
                f"filter.{name} has {len(values)} values; at most {limits.max_filter_values} are allowed",
                reason=Reason.INVALID_FILTER,
            )
        for value in values:
            if not value:
                raise InvalidArgument(f"filter.{name} contains an empty value", reason=Reason.INVALID_FILTER)
            if len(value) > limits.max_value_characters:
                raise InvalidArgument(f"filter.{name} contains a value that is too long", reason=Reason.INVALID_FILTER)
            _check_text(f"filter.{name}", value)
    ids = []
    for value in filter.document_ids:
        try:
            ids.append(str(uuid.UUID(value)))
        except ValueError:
            raise InvalidArgument(
                f"filter.document_ids: {value[:80]!r} is not a document id (UUID)", reason=Reason.INVALID_FILTER
            ) from None
    return DocumentFilter(
        dict(filter.metadata),
        tuple(filter.filenames),
        tuple(filter.mime_types),
        tuple(dict.fromkeys(ids)),
        filter.where,
        filter.created,
        filter.updated,
    )


def _check_text(where: str, value: str) -> None:
    # PostgreSQL text cannot hold NUL; refuse it here rather than fail in the driver.
    if "\x00" in value:
        raise InvalidArgument(f"{where} contains a NUL character", reason=Reason.INVALID_FILTER)


def check_dimensions(vector: Sequence[float], collection: Collection) -> None:
    if len(vector) != collection.dimensions:
        raise InvalidArgument(
            f"query_vector has {len(vector)} dimensions but collection {collection.name!r} has {collection.dimensions}",
            reason=Reason.VECTOR_DIMENSION_MISMATCH,
        )
