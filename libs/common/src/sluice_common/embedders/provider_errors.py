"""One table from an OpenAI-compatible provider's failed answer (HTTP status, Retry-After,
error body) to our `EmbeddingError`: its code and whether it is retryable."""

from __future__ import annotations

import time
from collections.abc import Mapping

from .interface import EmbeddingError


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
        return EmbeddingError(
            f"the embedding provider rejected the text{suffix}", code="EMBEDDING_INPUT_REJECTED", retryable=False
        )
    if status in (401, 403):
        return EmbeddingError(
            f"the embedding provider refused the credentials (HTTP {status}){suffix}",
            code="EMBEDDING_AUTH_FAILED",
            retryable=True,
        )
    if status >= 500:
        return EmbeddingError(
            f"the embedding provider failed (HTTP {status}){suffix}",
            code="EMBEDDING_PROVIDER_ERROR",
            retryable=True,
            retry_after=retry_after,
        )
    return EmbeddingError(
        f"the embedding provider answered HTTP {status}{suffix}", code="EMBEDDING_PROVIDER_ERROR", retryable=True
    )


def retry_after_of(headers: Mapping[str, str] | None) -> float | None:
    """The wait a provider asks for (Retry-After-Ms, else Retry-After in seconds or as a date)."""
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


def detail_of(exc: BaseException) -> str:
    """The provider's own words about a failed request (its error body's message), shortened."""
    body: object = getattr(exc, "body", None)
    message = ""
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message", "") if isinstance(error, dict) else str(error)
    elif isinstance(body, str):
        message = body
    return str(message)[:300]


__all__ = ["classify_status", "detail_of", "retry_after_of"]
