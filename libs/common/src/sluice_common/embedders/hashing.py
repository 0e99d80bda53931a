"""The hashing embedder: deterministic vectors without a model, for tests and benchmarks."""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .interface import HASHING

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
        unit: list[float] = (vector / norm).tolist()
        return unit

    def embed_many(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_one(text) for text in texts]

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if len(texts) <= 8:
            return self.embed_many(texts)
        return await asyncio.to_thread(self.embed_many, texts)

    async def embed_query(self, text: str) -> list[float]:
        return self.embed_one(text)


__all__ = ["HashingEmbedder", "hashing_features"]
