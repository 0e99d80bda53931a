"""Why a hit ranked where it did: SearchRequest.explain (docs/search.md, "Why a hit ranked"). Pure Python.

An explanation holds the figures the ranking itself used, taken where the ranking computed them:

- each list's rank and score of the hit (VECTOR and KEYWORD: the mode's one list; HYBRID: both
  candidate lists, a list the hit was not in leaving its rank unset);
- HYBRID's parts of the fused score, one per list, from fusion.py's own parts, whose sum is the
  fused score (0 for a list the hit was not in), and the vector list's weight for the query;
- the rank before reranking and what the reranker did.

Then what the ranking did not compute, for the first stage's hits only: the query's stemmed words
each chunk holds, and in HYBRID the other side's score of a hit that came from one side only (its
rank stays unset: it was not in that list) and the chunk's own cosine similarity where the vector
list ranked by the document context's blend. Each mode reads them with the rows it reads anyway
(SearchRepository.explained_hits_by_id, explained_vector_search, explained_keyword_search): an
explanation costs no statement more. Nothing here changes a hit, a score or the order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import fusion
from .domain import Explanation, Hit


@dataclass(frozen=True)
class Wanted:
    """What to read of each chunk for its explanation: which of the words of `keyword_weights` it
    holds (the weights the keyword side scored with: the IDF of each of the query's words the
    generation holds, as the index stems them); with `keyword_scores`, its BM25 score with those
    weights; its cosine similarity to `vector`, when given."""

    keyword_weights: Mapping[str, float]
    keyword_scores: bool = False
    vector: Sequence[float] | None = None


@dataclass(frozen=True)
class Details:
    """What was read of one chunk for its explanation: its BM25 score for the query and its cosine
    similarity to the query's vector (None when not asked for), and the query's stemmed words it
    holds, by code point."""

    keyword_score: float | None
    vector_similarity: float | None
    matched_terms: list[str]


def single_list(hits: Sequence[Hit], *, vector: bool) -> None:
    """VECTOR or KEYWORD: the mode's one list, its scores and ranks."""
    for rank, hit in enumerate(hits, start=1):
        if vector:
            hit.explanation = Explanation(vector_similarity=hit.score, vector_rank=rank)
        else:
            hit.explanation = Explanation(keyword_score=hit.score, keyword_rank=rank)


def hybrid(
    hits: Sequence[Hit],
    vector_ranked: Sequence[tuple[int, float]],
    keyword_ranked: Sequence[tuple[int, float]],
    parts: fusion.Parts,
    vector_weight: float,
    *,
    vector_scores_are_similarities: bool,
) -> None:
    """HYBRID: both lists' ranks and scores of each hit, and the fused score's parts (the vector
    list's first, as fusion took them). The vector list's score is the chunk's cosine similarity
    unless document context blended it (then the similarity is read with the rows: complete)."""
    vector = {cid: (rank, score) for rank, (cid, score) in enumerate(vector_ranked, start=1)}
    keyword = {cid: (rank, score) for rank, (cid, score) in enumerate(keyword_ranked, start=1)}
    for hit in hits:
        explanation = Explanation(vector_weight=vector_weight)
        if hit.chunk_id in vector:
            explanation.vector_rank, score = vector[hit.chunk_id]
            if vector_scores_are_similarities:
                explanation.vector_similarity = score
        if hit.chunk_id in keyword:
            explanation.keyword_rank, explanation.keyword_score = keyword[hit.chunk_id]
        vector_part, keyword_part = parts.get(hit.chunk_id, [None, None])
        explanation.vector_contribution = vector_part if vector_part is not None else 0.0
        explanation.keyword_contribution = keyword_part if keyword_part is not None else 0.0
        hit.explanation = explanation


def first_stage(hits: Sequence[Hit]) -> None:
    """The first stage's rank and score of each hit, before anything drops or reorders them."""
    for rank, hit in enumerate(hits, start=1):
        if hit.explanation is None:
            hit.explanation = Explanation()
        hit.explanation.first_stage_rank = rank
        hit.explanation.fused_score = hit.first_stage_score


def reranked(hits: Sequence[Hit], status: str, applied: bool) -> None:
    """What the reranker did for this search (one status for every hit), and its score of each."""
    for hit in hits:
        if hit.explanation is not None:
            hit.explanation.rerank_status = status
            hit.explanation.rerank_score = hit.rerank_score if applied else None


def complete(hits: Sequence[Hit], details: Mapping[int, Details]) -> None:
    """The hits with what was read of their chunks: matched words, and a score the ranking did
    not compute (a side the hit was not a candidate of; the rank stays unset)."""
    for hit in hits:
        found = details.get(hit.chunk_id)
        explanation = hit.explanation
        if found is None or explanation is None:
            continue
        explanation.matched_terms = list(found.matched_terms)
        if explanation.keyword_score is None and found.keyword_score is not None:
            explanation.keyword_score = found.keyword_score
        if explanation.vector_similarity is None and found.vector_similarity is not None:
            explanation.vector_similarity = found.vector_similarity


__all__ = ["Details", "Wanted", "complete", "first_stage", "hybrid", "reranked", "single_list"]
