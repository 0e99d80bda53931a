"""Reranking: the first stage's best candidates re-scored by a reranker, within a time budget.

Providers (sluice_common.reranking checks their configuration):

* HTTP rerank APIs: Cohere (`POST {base_url}/v2/rerank`), Jina (`POST {base_url}/v1/rerank`)
  and Hugging Face TEI (`POST {base_url}/rerank`). The key is read from search's environment
  variable the configuration names (`api_key_env`) at the time of the call, sent as a bearer
  token, and never logged or returned.
* A local sentence-transformers CrossEncoder, loaded once per process from
  `SLUICE_RERANK_MODEL_DIR/<model>` and run in a thread of its own.

The budget (`timeout_ms`) covers the whole call, a local model's loading included: when the
reranker fails, answers badly or late, the hits keep their first-stage order and scores and
`RerankOutcome` says why (SearchResponse.rerank). A late local computation is not interrupted
(a thread cannot be), so at most `max_pending` run or wait at once; beyond that a request is
answered at once in first-stage order ("busy"), rather than queueing behind them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np
import numpy.typing as npt
from sluice_common.reranking import COHERE, CROSS_ENCODER, JINA, TEI, RerankerSpec, RerankSettings, override

from .domain import Hit, RerankRequest

log = logging.getLogger("sluice.search.rerank")

NOT_ASKED, APPLIED, FAILED, TIMED_OUT, SKIPPED = "", "APPLIED", "FAILED", "TIMED_OUT", "SKIPPED"
MAX_TEXT_CHARACTERS = 4000  # per candidate sent: rerankers read a few hundred tokens anyway


class RerankError(Exception):
    """A reranker that failed; the message is safe to show (no key, a short provider message)."""


@dataclass(frozen=True)
class RerankOutcome:
    status: str = NOT_ASKED
    message: str = ""
    provider: str = ""
    model: str = ""
    candidates: int = 0
    elapsed_ms: float = 0.0


def choose(collection_default: RerankerSpec | None, request: RerankRequest | None) -> RerankerSpec | None:
    """The reranker of one search: the request's own, or the collection's (with the request's
    candidates / timeout_ms), or none."""
    if request is not None and request.disabled:
        return None
    if request is not None and request.spec is not None:
        return request.spec
    if collection_default is None:
        return None
    if request is not None and (request.candidates or request.timeout_ms):
        return override(collection_default, request.candidates, request.timeout_ms)
    return collection_default


class CrossEncoderModel(Protocol):
    """What we use of `sentence_transformers.CrossEncoder`."""

    def predict(
        self, sentences: list[tuple[str, str]], *, batch_size: int, show_progress_bar: bool
    ) -> npt.NDArray[np.floating[Any]]: ...


class Rerankers:
    def __init__(self, settings: RerankSettings | None = None, *, max_pending: int = 4) -> None:
        self._settings = settings or RerankSettings()
        self._client: httpx.AsyncClient | None = None
        self._models: dict[str, CrossEncoderModel] = {}
        self._load_lock = threading.Lock()
        # One thread: a cross-encoder uses every core for a batch; two would only contend.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cross-encoder")
        self._pending = 0
        self._max_pending = max_pending

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def rerank(self, spec: RerankerSpec, query: str, hits: Sequence[Hit]) -> tuple[list[Hit], RerankOutcome]:
        """The hits in the reranker's order with its scores (APPLIED), or as they came with the
        reason (FAILED, TIMED_OUT, SKIPPED)."""
        outcome = RerankOutcome(provider=spec.provider, model=spec.model, candidates=len(hits))
        if not query.strip():
            return list(hits), replace(
                outcome, status=SKIPPED, message="reranking needs a query text (the request has a query_vector only)"
            )
        if not hits:
            return [], replace(outcome, status=SKIPPED, message="no hits to rerank")
        started = time.perf_counter()
        texts = [hit.text[:MAX_TEXT_CHARACTERS] for hit in hits]
        try:
            async with asyncio.timeout(spec.timeout_ms / 1000):
                scores = await self._score(spec, query, texts)
        except TimeoutError:
            elapsed = (time.perf_counter() - started) * 1000
            log.info("reranker late", extra={"provider": spec.provider, "model": spec.model, "ms": round(elapsed, 1)})
            return list(hits), replace(
                outcome,
                status=TIMED_OUT,
                elapsed_ms=elapsed,
                message=f"the reranker did not answer within {spec.timeout_ms} ms; hits are in first-stage order",
            )
        except RerankError as err:
            elapsed = (time.perf_counter() - started) * 1000
            log.info("reranker failed", extra={"provider": spec.provider, "model": spec.model, "error": str(err)})
            return list(hits), replace(
                outcome, status=FAILED, elapsed_ms=elapsed, message=f"{err}; hits are in first-stage order"
            )
        elapsed = (time.perf_counter() - started) * 1000
        ranked = sorted(range(len(hits)), key=lambda i: -scores[i])  # stable: ties keep first-stage order
        out = []
        for i in ranked:
            hit = hits[i]
            hit.rerank_score = scores[i]
            hit.score = scores[i]
            out.append(hit)
        return out, replace(outcome, status=APPLIED, elapsed_ms=elapsed)

    async def _score(self, spec: RerankerSpec, query: str, texts: list[str]) -> list[float]:
        if spec.provider == CROSS_ENCODER:
            scores = await self._cross_encoder(spec, query, texts)
        else:
            scores = await self._http(spec, query, texts)
        if len(scores) != len(texts) or not all(math.isfinite(s) for s in scores):
            raise RerankError("the reranker's answer has missing or non-finite scores")
        return scores

    # ------------------------------------------------------------------ HTTP rerank APIs

    async def _http(self, spec: RerankerSpec, query: str, texts: list[str]) -> list[float]:
        from sluice_common.reranking import RerankerInvalid, check_url

        try:  # the collection's default was checked by ingest-api, maybe against other settings
            check_url(spec.base_url, self._settings.allowed_urls())
        except RerankerInvalid as err:
            raise RerankError(str(err)) from None
        headers = {"content-type": "application/json"}
        if spec.api_key_env:
            key = os.environ.get(spec.api_key_env, "")
            if not key:
                raise RerankError(f"the reranker's key variable {spec.api_key_env} is not set in search's environment")
            headers["authorization"] = f"Bearer {key}"
        if spec.provider == COHERE:
            url, body = (
                f"{spec.base_url}/v2/rerank",
                {"model": spec.model, "query": query, "documents": texts, "top_n": len(texts)},
            )
        elif spec.provider == JINA:
            url, body = (
                f"{spec.base_url}/v1/rerank",
                {"model": spec.model, "query": query, "documents": texts, "top_n": len(texts), "return_documents": False},
            )
        else:
            url, body = (
                f"{spec.base_url}/rerank",
                {"query": query, "texts": texts, "raw_scores": False, "return_text": False, "truncate": True},
            )
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(60.0), follow_redirects=False)
        try:
            response = await self._client.post(url, json=body, headers=headers)
        except httpx.HTTPError as err:
            raise RerankError(f"the reranker at {spec.base_url} could not be reached ({type(err).__name__})") from None
        if response.status_code != 200:
            raise RerankError(f"the reranker answered HTTP {response.status_code}: {_short(response.text)}")
        try:
            answer = response.json()
            results = answer if spec.provider == TEI else answer["results"]
            field = "score" if spec.provider == TEI else "relevance_score"
            scores: list[float | None] = [None] * len(texts)
            for item in results:
                index = int(item["index"])
                if not 0 <= index < len(texts):
                    raise ValueError(f"index {index} out of range")
                scores[index] = float(item[field])
        except (ValueError, KeyError, TypeError) as err:
            raise RerankError(f"the reranker's answer could not be read ({_short(str(err))})") from None
        if any(score is None for score in scores):
            raise RerankError("the reranker's answer left some candidates without a score")
        return [float(score) for score in scores if score is not None]

    # ------------------------------------------------------------------ local cross-encoder

    async def _cross_encoder(self, spec: RerankerSpec, query: str, texts: list[str]) -> list[float]:
        if self._pending >= self._max_pending:
            raise RerankError(f"the local reranker is busy ({self._pending} requests ahead)")
        loop = asyncio.get_running_loop()
        self._pending += 1
        future = loop.run_in_executor(self._executor, self._predict, spec.model, query, texts)
        future.add_done_callback(self._done)
        try:
            return await asyncio.shield(future)
        except RerankError:
            raise
        except Exception as err:  # a model that fails is a failed rerank, not a failed search
            raise RerankError(f"the local reranker failed: {_short(f'{type(err).__name__}: {err}')}") from None

    def _done(self, _future: asyncio.Future[list[float]]) -> None:
        self._pending -= 1

    def _predict(self, model: str, query: str, texts: list[str]) -> list[float]:
        encoder = self._model(model)
        scores = encoder.predict([(query, text) for text in texts], batch_size=16, show_progress_bar=False)
        return [float(score) for score in scores]

    def _model(self, name: str) -> CrossEncoderModel:
        with self._load_lock:
            if name in self._models:
                return self._models[name]
            root = self._settings.rerank_model_dir
            if not root:
                raise RerankError("no local reranker models are installed (search's SLUICE_RERANK_MODEL_DIR is not set)")
            path = Path(root) / name
            if not path.is_dir():
                available = sorted(p.name for p in Path(root).iterdir() if p.is_dir()) if Path(root).is_dir() else []
                raise RerankError(
                    f"local reranker model {name!r} is not installed in SLUICE_RERANK_MODEL_DIR "
                    f"(installed: {', '.join(available) or 'none'})"
                )
            from sentence_transformers import CrossEncoder

            started = time.perf_counter()
            encoder: CrossEncoderModel = CrossEncoder(str(path), device="cpu", local_files_only=True)
            self._models[name] = encoder
            log.info("local reranker loaded", extra={"model": name, "seconds": round(time.perf_counter() - started, 2)})
            return encoder


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


__all__ = ["APPLIED", "FAILED", "NOT_ASKED", "SKIPPED", "TIMED_OUT", "RerankError", "RerankOutcome", "Rerankers", "choose"]
