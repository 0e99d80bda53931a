"""What every embedder is: the provider names a collection stores, the `Embedder` protocol and
the one error every provider raises."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sluice.v1.collection_pb2 import EmbedderProvider

HASHING = "hashing"
SENTENCE_TRANSFORMERS = "sentence_transformers"
OPENAI = "openai"
PROVIDERS = (HASHING, SENTENCE_TRANSFORMERS, OPENAI)


class EmbeddingError(Exception):
    """An embedding call failed; `retryable` says whether trying again later may help."""

    def __init__(self, message: str, *, code: str, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable
        self.retry_after = retry_after


class Embedder(Protocol):
    provider: str
    model: str
    dimensions: int
    # Texts the caller should hand over per embed_documents call to report fine progress.
    batch_size: int

    async def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...


def provider_name(provider: EmbedderProvider.ValueType | str) -> str:
    """The provider string for an `EmbedderProvider` enum value (or a string, checked)."""
    if isinstance(provider, str):
        name = provider.lower().removeprefix("embedder_provider_")
    else:
        from sluice.v1 import collection_pb2

        name = collection_pb2.EmbedderProvider.Name(provider).lower().removeprefix("embedder_provider_")
    if name not in PROVIDERS:
        raise ValueError(f"unknown embedder provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    return name


__all__ = ["HASHING", "OPENAI", "PROVIDERS", "SENTENCE_TRANSFORMERS", "Embedder", "EmbeddingError", "provider_name"]
