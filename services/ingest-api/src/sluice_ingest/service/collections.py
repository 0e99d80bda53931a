"""Use cases of collections and their index generations (DocumentService's collection calls):
validate, call the store once, return rows."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from sluice_common import embedders, vector_index
from sluice_common.errors import InvalidArgument
from sluice_common.reasons import Reason

from ..arguments import decode_token, encode_token, page_size_of
from ..ports import CollectionsPort, GenerationsPort
from ..settings import IngestSettings
from ..store import CollectionRow, NewCollection

log = logging.getLogger("sluice.ingest")

COLLECTION_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
PROVIDERS = {"hashing", "sentence_transformers", "openai"}
# The local default is embedders.DEFAULT_LOCAL_MODEL (docs/embedders.md says why that one).
DEFAULT_MODELS = {
    "hashing": ("hashing-v1", 256),
    "sentence_transformers": (embedders.DEFAULT_LOCAL_MODEL, embedders.DEFAULT_LOCAL_DIMENSIONS),
}
# CreateCollection's provider when the request names no embedder at all.
DEFAULT_PROVIDER = "sentence_transformers"
MAX_HNSW_DIMENSIONS = 2000  # pgvector's HNSW limit for the vector type
# A new collection's index precision when CreateCollection names none: halfvec held float4's
# recall and latency at a million chunks with 0.57x the index, built in 0.70x the time
# (docs/search.md, "Vector precision"). Collections made before keep theirs.
DEFAULT_VECTOR_PRECISION = vector_index.HALFVEC
# A reindex's eval set (docs/search.md, "Reindexing with a quality gate"): search runs every query
# twice (the ACTIVE and the new generation), so its size bounds the gate's work.
MAX_EVAL_QUERIES = 1000
MAX_EVAL_QUERY_CHARACTERS = 4096  # search's default SLUICE_SEARCH_MAX_QUERY_CHARACTERS
MAX_EVAL_RELEVANT = 100
MAX_EVAL_LABEL_CHARACTERS = 1024
MAX_EVAL_ID_CHARACTERS = 200


@dataclass(frozen=True)
class EvalQueryIn:
    """One query of a reindex's eval set as the client sent it (ReindexCollectionRequest.eval_queries)."""

    query: str
    relevant: tuple[str, ...]
    id: str = ""


def eval_set_of(queries: list[EvalQueryIn], min_ratio: float) -> tuple[list[dict[str, Any]] | None, float]:
    """The eval set as stored (collection_generations.eval_set) and its ratio, or (None, 1.0)
    for a reindex without one; INVALID_ARGUMENT / INVALID_EVAL_SET naming the first fault."""

    def bad(message: str) -> InvalidArgument:
        return InvalidArgument(message, reason=Reason.INVALID_EVAL_SET)

    if min_ratio != min_ratio or not 0.0 <= min_ratio <= 2.0:  # NaN, negative, above 2
        raise bad("min_ratio must be in (0, 2], or 0 for the default 1.0")
    if not queries:
        if min_ratio:
            raise bad("min_ratio needs eval_queries")
        return None, 1.0
    if len(queries) > MAX_EVAL_QUERIES:
        raise bad(f"eval_queries has {len(queries)} queries; at most {MAX_EVAL_QUERIES}")
    seen: dict[str, int] = {}
    stored = []
    for i, q in enumerate(queries):
        where = f"eval_queries[{i}]" + (f" ({q.id!r})" if q.id else "")
        if len(q.id) > MAX_EVAL_ID_CHARACTERS:
            raise bad(f"eval_queries[{i}].id is longer than {MAX_EVAL_ID_CHARACTERS} characters")
        if q.id and q.id in seen:
            raise bad(f"{where}: id repeats eval_queries[{seen[q.id]}]")
        seen.setdefault(q.id, i)
        if not q.query.strip():
            raise bad(f"{where}: query must be non-empty text")
        if len(q.query) > MAX_EVAL_QUERY_CHARACTERS:
            raise bad(f"{where}: query is longer than {MAX_EVAL_QUERY_CHARACTERS} characters")
        if not q.relevant:
            raise bad(f"{where}: relevant must name at least one document")
        if len(q.relevant) > MAX_EVAL_RELEVANT:
            raise bad(f"{where}: relevant has {len(q.relevant)} entries; at most {MAX_EVAL_RELEVANT}")
        for label in q.relevant:
            if not label.strip() or len(label) > MAX_EVAL_LABEL_CHARACTERS:
                raise bad(f"{where}: each relevant entry must be 1 to {MAX_EVAL_LABEL_CHARACTERS} characters of text")
        stored.append({"id": q.id, "query": q.query, "relevant": list(dict.fromkeys(q.relevant))})
    return stored, min_ratio or 1.0


@dataclass
class CollectionSpec:
    name: str
    description: str = ""
    provider: str = ""
    model: str = ""
    dimensions: int = 0
    chunk_max_characters: int = 0
    chunk_new_after_n_chars: int = 0
    chunk_overlap: int | None = None  # None: the default; 0: no overlap
    max_attempts: int = 0
    # The default reranker, checked (sluice_common.reranking.RerankerSpec.to_json); None for none.
    reranker: dict[str, Any] | None = None
    # The vector index's precision (sluice_common.vector_index.PRECISIONS); "" for float4.
    vector_precision: str = ""


class CollectionUseCases:
    def __init__(self, collections: CollectionsPort, generations: GenerationsPort, settings: IngestSettings) -> None:
        self.collections = collections
        self.generations = generations
        self.settings = settings

    async def create_collection(self, tenant_id: int, spec: CollectionSpec) -> CollectionRow:
        s = self.settings
        if not COLLECTION_NAME.match(spec.name or ""):
            raise InvalidArgument(
                "collection name must be 1-63 lowercase letters, digits, '-' or '_', starting with a letter or digit",
                reason=Reason.INVALID_COLLECTION_NAME,
            )
        # No embedder at all is the local default, as the CLI and both SDKs create it (docs/http.md's
        # first example sends only a name); a model or dimensions without a provider stay refused.
        provider = spec.provider or ("" if spec.model or spec.dimensions else DEFAULT_PROVIDER)
        model, dimensions = self._embedder(provider, spec.model, spec.dimensions, "collection.embedder")
        max_chars = spec.chunk_max_characters or s.default_chunk_max_characters
        new_after = spec.chunk_new_after_n_chars or min(s.default_chunk_new_after_n_chars, max_chars)
        overlap = min(s.default_chunk_overlap, max_chars // 4) if spec.chunk_overlap is None else spec.chunk_overlap
        if not 50 <= max_chars <= 100_000:
            raise InvalidArgument("chunking.max_characters must be between 50 and 100000", reason=Reason.INVALID_CHUNKING)
        if not 1 <= new_after <= max_chars:
            raise InvalidArgument(
                "chunking.new_after_n_chars must be between 1 and max_characters", reason=Reason.INVALID_CHUNKING
            )
        if not 0 <= overlap < max_chars:
            raise InvalidArgument(
                "chunking.overlap must be at least 0 and less than max_characters", reason=Reason.INVALID_CHUNKING
            )
        max_attempts = spec.max_attempts or s.default_max_attempts
        if not 1 <= max_attempts <= 100:
            raise InvalidArgument("max_attempts must be between 1 and 100", reason=Reason.INVALID_MAX_ATTEMPTS)
        if len(spec.description) > 2000:
            raise InvalidArgument("description is longer than 2000 characters", reason=Reason.INVALID_DESCRIPTION)
        return await self.collections.create_collection(
            NewCollection(
                tenant_id,
                spec.name,
                spec.description,
                provider,
                model,
                dimensions,
                max_chars,
                new_after,
                overlap,
                max_attempts,
                spec.reranker,
                spec.vector_precision or DEFAULT_VECTOR_PRECISION,
            )
        )

    @staticmethod
    def _embedder(provider: str, model: str, dimensions: int, field: str) -> tuple[str, int]:
        """(model, dimensions) with the provider's defaults filled in; INVALID_ARGUMENT for a bad
        embedder, EMBEDDER_MODEL_NOT_INSTALLED for a local model this machine does not have."""
        if provider not in PROVIDERS:
            raise InvalidArgument(
                f"{field}.provider is required (HASHING, SENTENCE_TRANSFORMERS or OPENAI)", reason=Reason.INVALID_EMBEDDER
            )
        default_model, default_dimensions = DEFAULT_MODELS.get(provider, ("", 0))
        model = model or default_model
        if not model:
            raise InvalidArgument(f"{field}.model is required for an OpenAI-compatible embedder", reason=Reason.INVALID_EMBEDDER)
        if len(model) > 500:
            raise InvalidArgument(f"{field}.model is longer than 500 characters", reason=Reason.INVALID_EMBEDDER)
        if provider == "sentence_transformers":
            try:
                embedders.check_local_model(model)
            except ValueError as exc:
                raise InvalidArgument(str(exc), reason=Reason.EMBEDDER_MODEL_NOT_INSTALLED, model=model) from None
            packaged = embedders.local_model_dimensions(model)  # a named model's size, None for a directory
            if packaged:
                dimensions = dimensions or packaged
                if dimensions != packaged:
                    raise InvalidArgument(f"the local model {model} has {packaged} dimensions", reason=Reason.INVALID_EMBEDDER)
        else:
            dimensions = dimensions or default_dimensions
        if not 1 <= dimensions <= MAX_HNSW_DIMENSIONS:
            raise InvalidArgument(
                f"{field}.dimensions must be between 1 and {MAX_HNSW_DIMENSIONS}", reason=Reason.INVALID_EMBEDDER
            )
        return model, dimensions

    # An imported bundle's embedder is checked as CreateCollection checks one (service/bundles.py).
    embedder_of = _embedder

    async def reindex_collection(
        self,
        tenant_id: int,
        name: str,
        provider: str,
        model: str,
        dimensions: int,
        eval_queries: list[EvalQueryIn] | None = None,
        min_ratio: float = 0.0,
        vector_precision: str = "",
    ) -> CollectionRow:
        """`vector_precision` "" keeps the collection's (docs/search.md, "Vector precision")."""
        if not name:
            raise InvalidArgument("collection name is required", reason=Reason.MISSING_COLLECTION)
        model, dimensions = self._embedder(provider, model, dimensions, "embedder")
        eval_set, ratio = eval_set_of(eval_queries or [], min_ratio)
        row = await self.generations.reindex_collection(
            tenant_id, name, provider, model, dimensions, eval_set, ratio, vector_precision=vector_precision or None
        )
        log.info(
            "reindex started",
            extra={
                "collection": name,
                "provider": provider,
                "model": model,
                "vector_precision": vector_precision or None,
                "eval_queries": len(eval_set or ()),
                "min_ratio": ratio if eval_set else None,
            },
        )
        return row

    async def cancel_reindex(self, tenant_id: int, name: str) -> CollectionRow:
        if not name:
            raise InvalidArgument("collection name is required", reason=Reason.MISSING_COLLECTION)
        return await self.generations.cancel_reindex(tenant_id, name)

    async def sweep_generations(self) -> tuple[int, int]:
        swept = await self.generations.sweep_generations(self.settings.retired_generation_grace_seconds)
        await self.generations.compact_keyword_stats()
        return swept

    async def get_collection(self, tenant_id: int, name: str) -> CollectionRow:
        if not name:
            raise InvalidArgument("collection name is required", reason=Reason.MISSING_COLLECTION)
        return await self.collections.get_collection(tenant_id, name)

    async def list_collections(
        self, tenant_id: int, page_size: int, page_token: str, scope: list[str] | None = None
    ) -> tuple[list[CollectionRow], str]:
        """A page of collections by name; only those in `scope` when given (a scoped key)."""
        limit = page_size_of(page_size)
        token = decode_token(page_token, "collections")
        rows = await self.collections.list_collections(tenant_id, token["n"] if token else None, limit + 1, scope)
        next_token = encode_token({"f": "collections", "n": rows[limit - 1].name}) if len(rows) > limit else ""
        return rows[:limit], next_token

    async def delete_collection(self, tenant_id: int, name: str, force: bool) -> int:
        if not name:
            raise InvalidArgument("collection name is required", reason=Reason.MISSING_COLLECTION)
        return await self.collections.delete_collection(tenant_id, name, force)


__all__ = ["CollectionSpec", "CollectionUseCases", "EvalQueryIn", "eval_set_of"]
