"""The vectors of an OpenAI-compatible embeddings answer, decoded without a model per vector."""

from __future__ import annotations

import base64
import json

import numpy as np

from .interface import EmbeddingError


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


__all__ = ["decode_embeddings"]
