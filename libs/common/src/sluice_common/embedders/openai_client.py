"""The OpenAI-compatible embedder (OpenAI, Azure, vLLM, Ollama, TEI: any `/v1/embeddings`),
through the `openai` package: one shared client per provider and event loop, batches sent
concurrently within the provider's AIMD limit (rate_limit.py), retries and splitting here."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from typing import TYPE_CHECKING

from .decoding import decode_embeddings
from .interface import OPENAI, EmbeddingError
from .provider_errors import classify_status, detail_of, retry_after_of
from .rate_limit import provider_limit
from .settings import EmbedderSettings

if TYPE_CHECKING:
    from openai import AsyncOpenAI

log = logging.getLogger("sluice.embedders")

# One AsyncOpenAI client (one connection pool) per provider and event loop, shared by every
# embedder of the process: the job slots of a worker reuse each other's connections. Keyed
# by loop because an httpx connection belongs to the loop that opened it. A closed loop's
# clients are kept, not dropped: dropping one makes openai's __del__ schedule its aclose() on
# whatever loop runs then, which fails on the dead loop's sockets. Services run one loop;
# tests and benchmarks a few.
_clients: dict[asyncio.AbstractEventLoop, dict[tuple[str, str, float], AsyncOpenAI]] = {}
_clients_lock = threading.Lock()


def provider_client(settings: EmbedderSettings) -> AsyncOpenAI:
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
    def client(self) -> AsyncOpenAI:
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

        client = self.client
        limit = provider_limit(self._settings.openai_base_url, self._settings.openai_max_concurrency)
        await limit.acquire()
        rate_limited = False
        try:
            response = await client.embeddings.with_raw_response.create(
                model=self.model,
                input=inputs,
                encoding_format="base64",
                dimensions=self.dimensions if self._settings.openai_send_dimensions else openai.omit,
            )
            content = response.content  # already read: not a streamed request
        except openai.APIStatusError as exc:
            rate_limited = exc.status_code == 429
            raise classify_status(exc.status_code, retry_after_of(exc.response.headers), detail_of(exc)) from exc
        except openai.APITimeoutError as exc:
            raise EmbeddingError("the embedding provider timed out", code="EMBEDDING_TIMEOUT", retryable=True) from exc
        except openai.APIConnectionError as exc:
            raise EmbeddingError(
                "the embedding provider could not be reached", code="EMBEDDING_UNAVAILABLE", retryable=True
            ) from exc
        finally:
            limit.release(rate_limited=rate_limited)
        return decode_embeddings(content, len(inputs), self.dimensions, self.model)


__all__ = ["OpenAIEmbedder", "provider_client"]
