"""The local embedder: a model on this machine's CPU, offline (all-MiniLM-L6-v2 by default),
run by sentence-transformers (torch) or ONNX Runtime (sluice_common.embedders.onnx,
sluice_common.embedders.e5). Each model is loaded lazily, once per process, and shared by
every embedder instance that names it.

torch and sentence-transformers are imported by name at first use (importlib), behind the small
protocols below: torch takes seconds to import, only a process that embeds locally needs it, and
a static import would have mypy walk torch and transformers (minutes) on every cold `make lint`.
The ONNX Runtime backends (`onnx`, `e5`, beside this module) are imported as modules: they load
their runtimes inside their functions, so importing them costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from . import e5, onnx
from .interface import SENTENCE_TRANSFORMERS, EmbeddingError
from .local_models import E5_BACKENDS, E5_DEFAULT_BACKEND, E5_MODEL, ONNX_FP32, ONNX_INT8, is_e5, resolve_model_dir, split_backend
from .settings import EmbedderSettings

log = logging.getLogger("sluice.embedders")

Vectors = npt.NDArray[np.floating[Any]]


class SentenceModel(Protocol):
    """What we use of `sentence_transformers.SentenceTransformer`."""

    def encode(
        self,
        sentences: list[str],
        *,
        batch_size: int,
        normalize_embeddings: bool,
        convert_to_numpy: bool,
        show_progress_bar: bool,
    ) -> Vectors: ...


class OnnxSentenceModel(Protocol):
    """What we use of `sluice_common.embedders.onnx.OnnxSentenceEncoder`."""

    def encode(self, texts: list[str], batch_size: int = 32) -> Vectors: ...


class E5Model(Protocol):
    """What we use of `sluice_common.embedders.e5.E5Encoder`."""

    def encode(self, texts: list[str], *, query: bool, batch_size: int = 32) -> Vectors: ...


_models: dict[str, SentenceModel] = {}
_models_lock = threading.Lock()
# torch already uses every core for one encode; two encodes at once only thrash.
_encode_lock = threading.Lock()


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op threads for what runs inside, in the calling thread (torch keeps the count
    per thread, so an encode in another thread is not changed). 0 leaves the count as it is."""
    if threads <= 0:
        yield
        return
    torch = importlib.import_module("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def load_sentence_transformer(model_dir: Path) -> SentenceModel:
    """Load (once per process) a sentence-transformers model from a local directory, offline."""
    key = str(model_dir.resolve())
    with _models_lock:
        if key not in _models:
            # Never reach for a model hub: the machines have no network, and a download at
            # run time would be a silent dependency.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            library = importlib.import_module("sentence_transformers")

            started = time.monotonic()
            _models[key] = library.SentenceTransformer(key, device="cpu")
            log.info("loaded local embedding model", extra={"model_dir": key, "seconds": round(time.monotonic() - started, 2)})
        return _models[key]


def load_onnx_sentence_model(
    model_dir: Path, settings: EmbedderSettings, backend: str = ONNX_INT8, threads: int | None = None
) -> OnnxSentenceModel:
    """A sentence-transformers model exported once for ONNX Runtime, int8 or fp32
    (onnx_embedding.load), on `threads` threads (default `SLUICE_ONNX_THREADS`)."""
    model: OnnxSentenceModel = onnx.load(
        model_dir, settings.onnx_threads if threads is None else threads, settings.onnx_spinning, backend.removeprefix("onnx-")
    )
    return model


# Each (model directory, runtime, threads)'s ONNX encoder, decided once: the graph, or None when
# the model keeps torch (not mean-pooled, or the export failed; said once).
_onnx_encoders: dict[tuple[str, str, int], OnnxSentenceModel | None] = {}


def onnx_encoder(model_dir: Path, settings: EmbedderSettings, backend: str, threads: int) -> OnnxSentenceModel | None:
    """The model's ONNX graph (`backend` onnx-fp32 or onnx-int8) on `threads` threads, or None
    when the model keeps torch: the graph reproduces only a model whose sentence-transformers
    modules are the transformer, mean pooling and at most a normalization
    (onnx_embedding.mean_pooled), and a failed export leaves torch to answer (logged once).
    Decided at the model's first use, not at every call."""
    key = (str(model_dir), backend, threads)
    if key not in _onnx_encoders:
        _onnx_encoders[key] = _load_onnx_encoder(model_dir, settings, backend, threads)
    return _onnx_encoders[key]


def query_encoder(model_dir: Path, settings: EmbedderSettings) -> OnnxSentenceModel | None:
    """The ONNX fp32 graph a search query of a torch model is embedded with
    (`SLUICE_QUERY_BACKEND=onnx-fp32`, the default): the torch vectors to within float rounding,
    in less than half the time (docs/embedders.md, "A search query on ONNX Runtime"). None when
    the query keeps torch: the setting says so, or onnx_encoder does."""
    if settings.query_backend != ONNX_FP32:
        return None
    return onnx_encoder(model_dir, settings, ONNX_FP32, settings.query_threads)


def _load_onnx_encoder(model_dir: Path, settings: EmbedderSettings, backend: str, threads: int) -> OnnxSentenceModel | None:
    if not onnx.mean_pooled(model_dir):
        log.info(
            "this model stays on torch: it is not mean-pooled, which its ONNX graph would be",
            extra={"model_dir": str(model_dir), "backend": backend},
        )
        return None
    try:
        return load_onnx_sentence_model(model_dir, settings, backend, threads=threads)
    except Exception:  # any failure of the export or of ONNX Runtime: torch still answers
        log.warning(
            "this model stays on torch: its ONNX export failed",
            extra={"model_dir": str(model_dir), "backend": backend},
            exc_info=True,
        )
        return None


def load_e5(backend: str, settings: EmbedderSettings) -> E5Model:
    """multilingual-e5-small on ONNX Runtime, fp32 or int8 (multilingual_e5.load)."""
    model: E5Model = e5.load(backend.removeprefix("onnx-"), settings.onnx_threads, settings.onnx_spinning)
    return model


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
        array = self._encode_e5(texts, query) if self.e5 else self._encode_sentence_transformer(texts, query)
        if array.shape[1] != self.dimensions:
            raise EmbeddingError(
                f"the model {self.model!r} makes {array.shape[1]}-dimensional vectors "
                f"but the collection expects {self.dimensions}",
                code="EMBEDDER_DIMENSION_MISMATCH",
                retryable=False,
            )
        vectors: list[list[float]] = array.astype(np.float32).tolist()
        return vectors

    def _encode_e5(self, texts: list[str], query: bool) -> Vectors:
        if self.backend not in E5_BACKENDS:
            raise EmbeddingError(
                f"{E5_MODEL} runs on {' or '.join(E5_BACKENDS)}, not {self.backend}",
                code="EMBEDDER_MODEL_NOT_FOUND",
                retryable=False,
            )
        try:
            encoder = load_e5(self.backend, self._settings)
        except FileNotFoundError as exc:
            raise EmbeddingError(
                f"the local embedding model {E5_MODEL!r} is not installed ({exc})",
                code="EMBEDDER_MODEL_NOT_FOUND",
                retryable=False,
            ) from exc
        with _encode_lock:
            return encoder.encode(texts, query=query, batch_size=self.batch_size)

    def _encode_sentence_transformer(self, texts: list[str], query: bool = False) -> Vectors:
        model_dir = resolve_model_dir(self.model_name, self._settings)
        encoder = None
        if self.backend in (ONNX_INT8, ONNX_FP32):
            # A query (a few tokens) on SLUICE_QUERY_THREADS, like a torch model's; chunks on SLUICE_ONNX_THREADS.
            threads = self._settings.query_threads if query else self._settings.onnx_threads
            encoder = onnx_encoder(model_dir, self._settings, self.backend, threads)
        elif query:
            encoder = query_encoder(model_dir, self._settings)
        if encoder is not None:
            with _encode_lock:
                array = encoder.encode(texts, self.batch_size)
        else:
            st = load_sentence_transformer(model_dir)
            # A search query (a few tokens) on `query_threads` threads; torch keeps the count per
            # thread, so a batch of chunks elsewhere keeps its own. The lock stays: the model's fast
            # tokenizer is not safe to call from two threads at once ("Already borrowed").
            with _encode_lock, torch_threads(self._settings.query_threads if query else 0):
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


__all__ = ["SentenceTransformerEmbedder", "load_e5", "load_onnx_sentence_model", "load_sentence_transformer"]
