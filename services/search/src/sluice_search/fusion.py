"""HYBRID: how the vector and keyword lists become one (docs/search.md, "Fusion"). Pure Python.

Two functions, both over best-first lists of hits from the same generation:

- `reciprocal_rank`: Σ wᵢ / (k + rankᵢ) (Cormack, Clarke & Büttcher 2009). Only ranks count,
  so a list's scale never matters, but neither does how far ahead its first hit is.
- `relative_score`: each list's scores rescaled to 0…1 by its own best and worst candidate
  (min-max), then Σ wᵢ · scoreᵢ, a hit missing from a list adding 0 for it (the convex
  combination that Bruch, Gai & Ingber 2023 found to beat RRF once its weight is tuned;
  Weaviate's "relativeScoreFusion"). A clear winner in one list stays a clear winner.

Which one HYBRID uses, and with what weights, was chosen by measurement on the eval sets
(bench/retrieval_bench.py; the figures are in docs/search.md).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from .domain import Collection, Hit

# Local models that were trained on English only: their vectors of a query in another script
# are noise (measured on the Chinese eval set with all-MiniLM-L6-v2: VECTOR MRR@10 0.370 against
# KEYWORD 0.832), and fusing noise in at an equal weight cost HYBRID a fifth of its MRR.
ENGLISH_ONLY_MODELS = ("all-MiniLM-L6-v2",)


def english_only(collection: Collection) -> bool:
    return collection.embedder_provider == "sentence_transformers" and collection.embedder_model.startswith(ENGLISH_ONLY_MODELS)


def mostly_non_latin(text: str) -> bool:
    """Whether most of the query's letters belong to a script other than Latin (Han, kana,
    Hangul, Cyrillic, Arabic…)."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return False
    latin = sum(1 for ch in letters if ch.isascii() or unicodedata.name(ch, "").startswith("LATIN"))
    return latin * 2 < len(letters)


# Each candidate's parts of its fused score, one per list in the lists' order: None for a list
# the candidate was not in. The fused score is their sum, taken in that order from 0.0 (total):
# an explanation's parts add up to the very score the hits were ordered by (explain.py).
Parts = dict[int, list[float | None]]


def total(parts: Sequence[float | None]) -> float:
    score = 0.0
    for part in parts:
        if part is not None:
            score += part
    return score


def fused(lists: Sequence[Sequence[Hit]], parts: Parts, top_k: int) -> list[Hit]:
    """The candidates of `lists` best first by the sum of their parts, at most top_k."""
    scores = {cid: total(p) for cid, p in parts.items()}
    first: dict[int, Hit] = {}
    for hits in lists:
        for hit in hits:
            if hit.chunk_id in first:
                first[hit.chunk_id].highlights = first[hit.chunk_id].highlights or hit.highlights
            else:
                first[hit.chunk_id] = Hit(**{**hit.__dict__, "highlights": list(hit.highlights)})
    order = sorted(first, key=lambda cid: -scores[cid])  # stable: the first list seen wins ties
    answer = []
    for cid in order[:top_k]:
        hit = first[cid]
        hit.score = scores[cid]
        answer.append(hit)
    return answer


def reciprocal_rank_parts(lists: Sequence[Sequence[Hit]], weights: Sequence[float], k: float) -> Parts:
    """Each list's weight / (k + rank), rank from 1."""
    parts: Parts = {}
    for i, (hits, weight) in enumerate(zip(lists, weights, strict=True)):
        for rank, hit in enumerate(hits, start=1):
            parts.setdefault(hit.chunk_id, [None] * len(lists))[i] = weight / (k + rank)
    return parts


def reciprocal_rank(lists: Sequence[Sequence[Hit]], weights: Sequence[float], k: float, top_k: int) -> list[Hit]:
    """Σ weight / (k + rank), rank from 1."""
    return fused(lists, reciprocal_rank_parts(lists, weights, k), top_k)


def relative_score_parts(lists: Sequence[Sequence[Hit]], weights: Sequence[float]) -> Parts:
    """Each list's weight · (score - worst) / (best - worst) over its candidates (1 when they
    all score the same)."""
    parts: Parts = {}
    for i, (hits, weight) in enumerate(zip(lists, weights, strict=True)):
        if not hits:
            continue
        best = max(h.score for h in hits)
        worst = min(h.score for h in hits)
        spread = best - worst
        for hit in hits:
            normalised = (hit.score - worst) / spread if spread > 0 else 1.0
            parts.setdefault(hit.chunk_id, [None] * len(lists))[i] = weight * normalised
    return parts


def relative_score(lists: Sequence[Sequence[Hit]], weights: Sequence[float], top_k: int) -> list[Hit]:
    """Σ weight · (score - worst) / (best - worst) over each list's candidates."""
    return fused(lists, relative_score_parts(lists, weights), top_k)
