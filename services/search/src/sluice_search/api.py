"""The SearchService servicer: convert the request, call the use case, convert the hits."""

from __future__ import annotations

import logging
import time

import grpc
from opentelemetry.util.types import AttributeValue
from sluice.v1 import document_pb2, search_service_pb2, search_service_pb2_grpc
from sluice_common import consistency, reranking, tracing
from sluice_common import metadata as typed_metadata
from sluice_common.auth import current_principal
from sluice_common.auth.scope import require_visible
from sluice_common.errors import InvalidArgument, SluiceError, grpc_errors
from sluice_common.reasons import Reason

from . import filters, metrics, rerank
from .domain import ContextOptions, DocumentFilter, Explanation, Hit, Limits, Mode, RerankRequest, validate_query
from .service import SearchService

# stdlib logger: a disabled level costs one comparison (structlog's formatter renders JSON).
log = logging.getLogger("sluice.search.api")

_MODES = {
    search_service_pb2.SEARCH_MODE_UNSPECIFIED: None,
    search_service_pb2.SEARCH_MODE_VECTOR: Mode.VECTOR,
    search_service_pb2.SEARCH_MODE_KEYWORD: Mode.KEYWORD,
    search_service_pb2.SEARCH_MODE_HYBRID: Mode.HYBRID,
}
_PROTO_MODES = {mode: value for value, mode in _MODES.items() if mode is not None}


class SearchServicer(search_service_pb2_grpc.SearchServiceServicer):
    def __init__(self, service: SearchService, limits: Limits) -> None:
        self._service = service
        self._limits = limits

    @grpc_errors
    async def Search(
        self, request: search_service_pb2.SearchRequest, context: grpc.aio.ServicerContext
    ) -> search_service_pb2.SearchResponse:
        started = time.perf_counter()
        mode_label = "INVALID"
        outcome = "error"
        try:
            query = validate_query(
                collection=request.collection,
                text=request.query,
                vector=request.query_vector,
                top_k=request.top_k,
                mode=_mode(request.mode),
                filter=filter_of(request.filter, self._limits),
                limits=self._limits,
                context=ContextOptions(
                    neighbor_chunks=request.neighbor_chunks,
                    max_hits_per_document=request.max_hits_per_document,
                    min_score=request.min_score if request.HasField("min_score") else None,
                ),
                rerank=rerank_request_of(request.rerank) if request.HasField("rerank") else None,
                explain=request.explain,
                generation=request.generation,
            )
            after_lsn = consistency.parse_token(request.consistency_token) if request.consistency_token else None
            mode_label = query.mode.value
            require_visible(query.collection)  # outside the key's scope: as a missing collection
            hits, collection, reranked = await self._service.answer(
                current_principal().tenant_id, query, after_lsn=after_lsn, time_remaining=context.time_remaining()
            )
            outcome = "ok"
        except SluiceError as err:
            outcome = err.reason
            log.info("search refused", extra={"collection": request.collection, "reason": err.reason, "error": err.message})
            raise
        finally:
            elapsed = time.perf_counter() - started
            metrics.SEARCH_LATENCY.labels(mode_label).observe(elapsed)
            metrics.SEARCH_REQUESTS.labels(mode_label, outcome).inc()
        metrics.SEARCH_HITS.labels(mode_label).inc(len(hits))
        span_attributes: dict[str, AttributeValue] = {
            "sluice.search.mode": mode_label,
            "sluice.search.hits": len(hits),
            "sluice.search.top_k": query.top_k,
        }
        tracing.annotate(**span_attributes)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "search",
                extra={
                    "collection": query.collection,
                    "mode": mode_label,
                    "top_k": query.top_k,
                    "hits": len(hits),
                    "ms": round(elapsed * 1000, 2),
                },
            )
        return search_service_pb2.SearchResponse(
            hits=[_hit_pb(hit) for hit in hits],
            mode=_PROTO_MODES[query.mode],
            generation=collection.generation,
            embedder_model=collection.embedder_model,
            rerank=search_service_pb2.RerankInfo(
                status=_RERANK_STATUS[reranked.status],
                message=reranked.message,
                provider=reranking.provider_proto(reranked.provider),
                model=reranked.model,
                candidates=reranked.candidates,
                elapsed_ms=round(reranked.elapsed_ms, 3),
            ),
        )


def filter_of(message: search_service_pb2.SearchFilter, limits: Limits) -> DocumentFilter:
    """The request's filter; `where` and the time ranges are checked here (filters.py), the rest
    by validate_query."""
    return DocumentFilter(
        metadata=dict(message.metadata),
        filenames=tuple(message.filenames),
        mime_types=tuple(message.mime_types),
        document_ids=tuple(message.document_ids),
        where=filters.parse_where(
            message.where,
            max_values=limits.max_filter_values,
            max_depth=limits.max_filter_depth,
            max_conditions=limits.max_filter_conditions,
        ),
        created=filters.parse_range(message.create_time, "filter.create_time"),
        updated=filters.parse_range(message.update_time, "filter.update_time"),
    )


_RERANK_STATUS = {
    rerank.NOT_ASKED: search_service_pb2.RERANK_STATUS_UNSPECIFIED,
    rerank.APPLIED: search_service_pb2.RERANK_STATUS_APPLIED,
    rerank.FAILED: search_service_pb2.RERANK_STATUS_FAILED,
    rerank.TIMED_OUT: search_service_pb2.RERANK_STATUS_TIMED_OUT,
    rerank.SKIPPED: search_service_pb2.RERANK_STATUS_SKIPPED,
}


def rerank_request_of(message: search_service_pb2.SearchRerank) -> RerankRequest:
    """The request's reranking, checked against search's own SLUICE_RERANK_ALLOWED_URLS."""
    config = message.reranker
    try:
        spec = reranking.from_proto(config, allowed_urls=reranking.RerankSettings().allowed_urls())
        if spec is None and not 0 <= config.candidates <= reranking.MAX_CANDIDATES:
            raise reranking.RerankerInvalid(f"reranker.candidates must be between 0 and {reranking.MAX_CANDIDATES}")
        if spec is None and not 0 <= config.timeout_ms <= reranking.MAX_TIMEOUT_MS:
            raise reranking.RerankerInvalid(f"reranker.timeout_ms must be between 0 and {reranking.MAX_TIMEOUT_MS}")
    except reranking.RerankerInvalid as err:
        raise InvalidArgument(f"rerank.{err}", reason=Reason.INVALID_RERANKER) from None
    return RerankRequest(
        disabled=message.disabled,
        spec=spec,
        candidates=config.candidates,
        timeout_ms=config.timeout_ms,
        min_score=message.min_score if message.HasField("min_score") else None,
    )


def _mode(value: search_service_pb2.SearchMode.ValueType) -> Mode | None:
    if value not in _MODES:
        raise InvalidArgument(f"unknown search mode {value}", reason=Reason.INVALID_MODE)
    return _MODES[value]


def _hit_pb(hit: Hit) -> search_service_pb2.SearchHit:
    return search_service_pb2.SearchHit(
        chunk_id=str(hit.chunk_id),
        text=hit.text,
        score=hit.score,
        document_id=hit.document_id,
        filename=hit.filename,
        chunk_index=hit.chunk_index,
        page_number=hit.page_number,
        element_type=hit.element_type,
        highlights=[search_service_pb2.Highlight(start=s, end=e) for s, e in hit.highlights],
        metadata=typed_metadata.text_map(hit.metadata),
        typed_metadata=typed_metadata.typed_map(hit.metadata),
        text_as_html=hit.text_as_html,
        text_source=hit.text_source,
        ocr_confidence=hit.ocr_confidence,
        boxes=[
            document_pb2.BoundingBox(
                page_number=int(box.get("page", 0)),
                left=box.get("left", 0.0),
                top=box.get("top", 0.0),
                right=box.get("right", 0.0),
                bottom=box.get("bottom", 0.0),
            )
            for box in hit.boxes
        ],
        first_stage_score=hit.first_stage_score,
        rerank_score=hit.rerank_score,
        context=hit.context,
        context_first_chunk_index=hit.context_first_chunk_index,
        context_last_chunk_index=hit.context_last_chunk_index,
        explanation=_explanation_pb(hit.explanation) if hit.explanation is not None else None,
    )


def _explanation_pb(explanation: Explanation) -> search_service_pb2.HitExplanation:
    """An explanation; None leaves its optional field unset (a list the hit was not in)."""
    return search_service_pb2.HitExplanation(
        keyword_score=explanation.keyword_score,
        keyword_rank=explanation.keyword_rank,
        vector_similarity=explanation.vector_similarity,
        vector_rank=explanation.vector_rank,
        fused_score=explanation.fused_score,
        keyword_contribution=explanation.keyword_contribution,
        vector_contribution=explanation.vector_contribution,
        vector_weight=explanation.vector_weight,
        first_stage_rank=explanation.first_stage_rank,
        rerank_score=explanation.rerank_score,
        rerank_status=_RERANK_STATUS[explanation.rerank_status],
        matched_terms=explanation.matched_terms,
    )
