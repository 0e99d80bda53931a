"""Embedders: text to vectors, shared by the worker (chunks) and search (queries).

Public API::

    embedder = get_embedder(provider, model, dimensions, settings)   # settings optional
    vectors = await embedder.embed_documents(["chunk one", "chunk two"])
    vector = await embedder.embed_query("what is a sluice?")

`provider` is the string stored in `collections.embedder_provider`: "hashing",
"sentence_transformers" or "openai" (`provider_name()` converts the protobuf enum).

Both methods are coroutines. CPU-bound providers (hashing of large batches, the local
sentence-transformers model) run in a worker thread (`asyncio.to_thread`), so the event
loop keeps serving lease renewals and gRPC calls while they compute. The local model is loaded
lazily, once per process, and shared by every embedder instance that names it.

Every failure is an `EmbeddingError` with a stable `code` and a `retryable` flag:
rate limits (429, honouring Retry-After within `embed_retry_after_max_seconds`), 5xx,
timeouts and connection errors are retryable; an input the provider rejects (400) and a
provider answering with vectors of the wrong size are not.

One idea per module:

- interface.py: the provider names, the `Embedder` protocol, `EmbeddingError`;
- settings.py: `EmbedderSettings` (SLUICE_* variables);
- factory.py: `get_embedder`, cached per process;
- hashing.py: the deterministic hashing embedder;
- local_models.py: which local models and backends this machine has, and where;
- local.py: the local embedder (sentence-transformers or ONNX Runtime);
- rate_limit.py: the AIMD limit of requests in flight per provider;
- openai_client.py: the OpenAI-compatible embedder and its shared clients;
- provider_errors.py: a provider's failed answer to our error;
- decoding.py: a provider's answer to vectors.
"""

from __future__ import annotations

from .decoding import decode_embeddings
from .factory import get_embedder
from .hashing import HashingEmbedder, hashing_features
from .interface import HASHING, OPENAI, PROVIDERS, SENTENCE_TRANSFORMERS, Embedder, EmbeddingError, provider_name
from .local import SentenceTransformerEmbedder, load_sentence_transformer
from .local_models import (
    DEFAULT_LOCAL_DIMENSIONS,
    DEFAULT_LOCAL_MODEL,
    E5_BACKENDS,
    E5_DEFAULT_BACKEND,
    E5_MODEL,
    LOCAL_BACKENDS,
    MINILM_MODEL,
    ONNX_FP32,
    ONNX_INT8,
    TORCH,
    check_local_model,
    e5_installed,
    installed_local_models,
    is_e5,
    local_model_dimensions,
    packaged_model_dir,
    resolve_model_dir,
    split_backend,
)
from .openai_client import OpenAIEmbedder, provider_client
from .provider_errors import classify_status
from .rate_limit import AimdLimit, provider_limit
from .settings import EmbedderSettings

__all__ = [
    "DEFAULT_LOCAL_DIMENSIONS",
    "DEFAULT_LOCAL_MODEL",
    "E5_BACKENDS",
    "E5_DEFAULT_BACKEND",
    "E5_MODEL",
    "HASHING",
    "LOCAL_BACKENDS",
    "MINILM_MODEL",
    "ONNX_FP32",
    "ONNX_INT8",
    "OPENAI",
    "PROVIDERS",
    "SENTENCE_TRANSFORMERS",
    "TORCH",
    "AimdLimit",
    "Embedder",
    "EmbedderSettings",
    "EmbeddingError",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "check_local_model",
    "classify_status",
    "decode_embeddings",
    "e5_installed",
    "get_embedder",
    "hashing_features",
    "installed_local_models",
    "is_e5",
    "load_sentence_transformer",
    "local_model_dimensions",
    "packaged_model_dir",
    "provider_client",
    "provider_limit",
    "provider_name",
    "resolve_model_dir",
    "split_backend",
]
