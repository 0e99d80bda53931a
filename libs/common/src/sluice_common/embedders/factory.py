"""The embedder of a collection, by provider, model and dimensions: cheap, cached per process."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from .hashing import HashingEmbedder
from .interface import HASHING, SENTENCE_TRANSFORMERS, Embedder, provider_name
from .local import SentenceTransformerEmbedder
from .openai_client import OpenAIEmbedder
from .settings import EmbedderSettings, default_settings

if TYPE_CHECKING:
    from sluice.v1.collection_pb2 import EmbedderProvider


def get_embedder(
    provider: EmbedderProvider.ValueType | str, model: str, dimensions: int, settings: EmbedderSettings | None = None
) -> Embedder:
    """The embedder of a collection. Cheap: instances are cached per process."""
    name = provider_name(provider)
    if dimensions <= 0:
        raise ValueError("dimensions must be positive")
    settings = settings or default_settings()
    return _cached_embedder(name, model, int(dimensions), settings.model_dump_json())


@lru_cache(maxsize=64)
def _cached_embedder(provider: str, model: str, dimensions: int, settings_json: str) -> Embedder:
    settings = EmbedderSettings.model_validate_json(settings_json)
    if provider == HASHING:
        return HashingEmbedder(model, dimensions, batch_size=settings.hashing_batch_size)
    if provider == SENTENCE_TRANSFORMERS:
        return SentenceTransformerEmbedder(model, dimensions, settings)
    return OpenAIEmbedder(model, dimensions, settings)


__all__ = ["get_embedder"]
