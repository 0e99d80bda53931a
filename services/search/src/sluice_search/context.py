"""Context for answers: which hits to keep, and their neighbouring chunks. Pure Python.

A search runs in two parts (service.py). The first stage (a mode's ranking) is asked for
`candidates()` hits rather than top_k whenever something after it may drop hits: a score
threshold, a cap per document, a reranker. Then, in order:

1. `select`: drop hits below `min_score` (a first-stage score, in the mode's own scale), keep at
   most `max_hits_per_document` per document, cut to top_k. Best first throughout, so the
   result is the top_k of the hits that pass, among the candidates.
2. neighbour expansion: each hit's document's chunks `chunk_index ± neighbor_chunks`, read in
   one statement, joined by `join_chunks` into `Hit.context`.

`join_chunks` gives text the chunker repeated between neighbours once. With an overlap
configured (ChunkingConfig.overlap), a chunk starts with the end of the one before it: whole
sentences up to `overlap` characters (the sentence packer for long paragraphs) or the last
`overlap` characters cut at a word (unstructured's text splitter). So the longest prefix of
the next chunk, at most overlap + a little, that ends the text so far is dropped; a match
shorter than MIN_OVERLAP characters is taken for chance and kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from .domain import ContextOptions, Hit

MIN_OVERLAP = 8
OVERLAP_SLACK = 8  # whitespace and a word boundary around the configured overlap
CHUNK_SEPARATOR = "\n\n"  # as unstructured joins the elements of one chunk


def candidates(
    top_k: int, options: ContextOptions, rerank_candidates: int = 0, *, limit: int = 200, per_document_factor: int = 5
) -> int:
    """How many first-stage hits to ask for: top_k, or more when hits may be dropped (a cap per
    document: `per_document_factor` x top_k; a threshold: twice top_k; a reranker: its own
    number), never more than `limit`."""
    wanted = top_k
    if options.max_hits_per_document:
        wanted = max(wanted, top_k * per_document_factor)
    if options.min_score is not None:
        wanted = max(wanted, top_k * 2)
    return min(max(wanted, rerank_candidates), max(limit, top_k))


def select(hits: Sequence[Hit], top_k: int, options: ContextOptions, *, score_threshold: bool = True) -> list[Hit]:
    """The best top_k hits that pass the threshold (on first_stage_score) and the per-document cap."""
    per_document: Counter[str] = Counter()
    out = []
    for hit in hits:
        if score_threshold and options.min_score is not None and hit.first_stage_score < options.min_score:
            continue
        if options.max_hits_per_document:
            if per_document[hit.document_id] >= options.max_hits_per_document:
                continue
            per_document[hit.document_id] += 1
        out.append(hit)
        if len(out) == top_k:
            break
    return out


def windows(hits: Sequence[Hit], neighbor_chunks: int) -> list[tuple[str, int, int]]:
    """(document id, first, last chunk index) to read for the hits' contexts."""
    return [(hit.document_id, max(0, hit.chunk_index - neighbor_chunks), hit.chunk_index + neighbor_chunks) for hit in hits]


def attach(hits: Sequence[Hit], neighbor_chunks: int, texts: Mapping[tuple[str, int], str], overlap: int) -> None:
    """Set each hit's context from the chunk texts read (a READY document's chunks are whole, so
    the window is contiguous; a neighbour missing from `texts` ends it on that side)."""
    for hit in hits:
        first = last = hit.chunk_index
        while first > 0 and first > hit.chunk_index - neighbor_chunks and (hit.document_id, first - 1) in texts:
            first -= 1
        while last < hit.chunk_index + neighbor_chunks and (hit.document_id, last + 1) in texts:
            last += 1
        parts = [texts.get((hit.document_id, i), hit.text if i == hit.chunk_index else "") for i in range(first, last + 1)]
        hit.context = join_chunks(parts, overlap)
        hit.context_first_chunk_index = first
        hit.context_last_chunk_index = last


def join_chunks(texts: Sequence[str], overlap: int) -> str:
    """Consecutive chunks as one text, the overlap between neighbours given once."""
    out = ""
    for text in texts:
        if not out:
            out = text
            continue
        shared = repeated_prefix(out, text, overlap + OVERLAP_SLACK) if overlap > 0 else 0
        if shared:
            rest = text[shared:]
            joiner = " " if rest and not rest[0].isspace() and not out[-1].isspace() else ""
            out = out + joiner + rest if rest.strip() else out
        else:
            out = out + CHUNK_SEPARATOR + text
    return out


def repeated_prefix(before: str, text: str, bound: int) -> int:
    """The length of the longest prefix of `text`, at most `bound` characters, that `before` ends
    with; 0 when it is shorter than MIN_OVERLAP (unless it is the whole of `text`)."""
    longest = min(bound, len(before), len(text))
    for size in range(longest, 0, -1):
        if size < MIN_OVERLAP and size < len(text):
            return 0
        if before.endswith(text[:size]):
            return size
    return 0


__all__ = ["ContextOptions", "attach", "candidates", "join_chunks", "repeated_prefix", "select", "windows"]
