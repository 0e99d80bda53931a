"""The embedders' settings (SLUICE_* environment variables), read by the worker (chunks), search
(queries) and ingest-api (which local models are installed)."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict


class EmbedderSettings(BaseSettings):
    """Provider settings, from SLUICE_* environment variables."""

    model_config = SettingsConfigDict(env_prefix="SLUICE_", extra="ignore")

    # OpenAI-compatible API (OpenAI, Azure, vLLM, Ollama, TEI).
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str = "unused"
    # Inputs per request. TEI's default limit is 32, OpenAI's 2048.
    openai_batch_size: int = 32
    # Characters per request, a cheap stand-in for the provider's token limit per request.
    openai_max_batch_characters: int = 200_000
    openai_timeout_seconds: float = 60.0
    # Requests in flight to one provider (base URL), shared by every job of the process: the
    # limit starts here, grows by one per limit's worth of successes (additive increase) and
    # halves on a 429 (multiplicative decrease), never below 1.
    openai_max_concurrency: int = 8
    # Send `dimensions` in the request (text-embedding-3 honours it; some servers reject it).
    openai_send_dimensions: bool = True
    # Transient failures retried inside one embed call before the error reaches the job
    # (which then retries the whole job with its own backoff).
    openai_max_retries: int = 3
    # Backoff of those retries: base * 2^n with jitter, and the longest Retry-After honoured.
    openai_retry_base_seconds: float = 0.5
    embed_retry_after_max_seconds: float = 30.0
    # Local model: a directory with a sentence-transformers model; empty = the packaged one.
    sentence_transformers_model_dir: str = ""
    sentence_transformers_batch_size: int = 32
    # How the local model runs: "onnx-fp32" (ONNX Runtime, the model's fp32 graph exported once
    # beside it: torch's vectors to within float rounding, 1.65x torch's chunks/s on 1,000-character
    # chunks; a model the graph does not reproduce, one not mean-pooled, keeps torch), "torch"
    # (sentence-transformers) or "onnx-int8" (other vectors, cosine 0.996 to torch's; faster still)
    # (docs/embedders.md, "Speed on real chunks"). A collection can choose per model name:
    # "all-MiniLM-L6-v2:onnx-int8" or "all-MiniLM-L6-v2:torch".
    local_embedder_backend: Literal["torch", "onnx-int8", "onnx-fp32"] = "onnx-fp32"
    # ONNX Runtime threads per local model (multilingual-e5-small, the onnx-int8 MiniLM): 0 = one
    # per core.
    onnx_threads: int = 0
    # Let those threads spin while they wait for work: slower beside other work, which they take
    # CPU from (measured on a busy machine; docs/embedders.md).
    onnx_spinning: bool = False
    # Threads (ONNX Runtime's or torch's) that embed one search query (a few tokens): 1, because
    # threads that wait for each other cost more than they share on a busy machine
    # (docs/embedders.md, "A search query on one thread"); 0 = the runtime's default, one per
    # core. Batches of chunks keep torch's default.
    query_threads: int = 1
    # What embeds a search query of a model that runs on torch: "onnx-fp32", the model's ONNX fp32
    # export (the same vectors to within float rounding, in less than half the time; a model that
    # is not mean-pooled keeps torch), or "torch" (docs/embedders.md, "A search query on ONNX
    # Runtime"). Chunks are embedded as the backend above says.
    query_backend: Literal["torch", "onnx-fp32"] = "onnx-fp32"
    # Hashing embedder batches (it is fast; this only bounds one thread hop).
    hashing_batch_size: int = 256
    # The local models the workers can load, comma-separated (for example "all-MiniLM-L6-v2"):
    # ingest-api refuses a collection or reindex naming any other. Empty: look on this machine
    # (the embedded default, where ingest-api and the workers share one installation); set it
    # where ingest-api runs without the models (its container image carries none).
    installed_local_models: str = ""


@lru_cache(maxsize=1)
def default_settings() -> EmbedderSettings:
    """The settings from this process's environment, read once."""
    return EmbedderSettings()


__all__ = ["EmbedderSettings", "default_settings"]
