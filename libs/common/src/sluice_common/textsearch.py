"""Word segmentation for keyword search, shared by the index side and the query side.

PostgreSQL's full-text parser does not segment Chinese, so the application does
(docs/search.md#keyword-ranking-bm25-inside-postgresql):
ingest-api stores `search_terms(text)` in `chunks.search_terms`, and the generated column
`search_tsv = to_tsvector('simple', search_terms)` turns those words into lexemes unchanged.
The search service builds its `tsquery` and its highlights with the same segmenter, so the
two sides always agree.

Segmentation is jieba's search mode (words plus the shorter words inside long ones, so
"全文检索" is found by "检索"), after NFKC normalisation (full-width letters become ASCII)
and lowercasing. Each term is a run of letters and digits only: PostgreSQL's parser keeps
such a run as one lexeme, and a term can never carry tsquery syntax.

Character bigrams were measured against this on the labelled set of tests/search (22
queries, 8 in Chinese, KEYWORD mode): the same MRR (1.000 on the Chinese queries, 0.909 on
all). jieba is kept because it indexes fewer lexemes (26.5 against 30.4 per chunk there; on
pure Chinese text a bigram index holds about one lexeme per character) and because bigrams
also match across word boundaries ("京地" in 北京地铁), which costs precision on larger corpora.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jieba

# A term: letters and digits of any script; underscores and punctuation separate terms.
_TERM = re.compile(r"[^\W_]+")
# Words that match nearly every chunk; dropped from queries (never from the index, where a
# query made of nothing else still finds them).
STOP_WORDS = frozenset(
    """
    a an and are as at be by for from has have how i in is it its of on or that the this to
    was were what when where which who why will with you your do does did can
    的 了 是 在 和 与 及 或 也 就 都 而 把 被 对 从 吗 呢 吧 啊 一个 什么 怎么 如何 哪些 为什么
    """.split()  # noqa: SIM905 - a list of words reads best as the words
)
# Bounds that keep a hostile query cheap.
MAX_QUERY_TERMS = 64
# The dimension of the BM25 vectors: terms are hashed into 1..2^29 (migration 0016's
# sluice_term_dim); the search service's query vectors have the same.
TERM_DIMENSIONS = 2**29

_lock = threading.Lock()
_tokenizer: jieba.Tokenizer | None = None


def _jieba() -> jieba.Tokenizer:
    """jieba's tokenizer, loaded once on first use, offline and without its start-up chatter."""
    global _tokenizer
    if _tokenizer is None:
        with _lock:
            if _tokenizer is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                tokenizer = jieba.Tokenizer()
                tokenizer.initialize()
                _tokenizer = tokenizer
    return _tokenizer


# Han characters (CJK ideographs): segmented by jieba. Any other run of letters and digits
# (Latin, Cyrillic, kana, digits…) is one term as it stands.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_RUN = re.compile(rf"(?P<han>[{_HAN}]+)|(?P<other>[^\W_{_HAN}]+)")


def _normalize(text: str) -> tuple[str, list[int]]:
    """NFKC + lowercase, and for each resulting character the index of its source in `text`.

    Done character by character so that a highlight found in the normalised text can be
    mapped back to code points of the original ("ﬁ" becomes "fi", two characters from one).
    """
    chars: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        if ch.isascii():
            norm = ch.lower()
        else:
            norm = unicodedata.normalize("NFKC", ch)
            lowered = norm.lower()
            # "İ".lower() adds a combining dot: keep the letter, drop marks lowering invented.
            norm = lowered if len(lowered) == len(norm) else "".join(c for c in lowered if not unicodedata.combining(c))
        chars.append(norm)
        origin.extend([i] * len(norm))
    return "".join(chars), origin


def _tokens(normalized: str) -> Iterable[tuple[str, int, int]]:
    """(term, start, end); offsets are code points of the normalised text."""
    for run in _RUN.finditer(normalized):
        if run.lastgroup == "other":
            yield run.group(), run.start(), run.end()
            continue
        base = run.start()
        for word, start, end in _jieba().tokenize(run.group(), mode="search"):
            yield word, base + start, base + end


def search_terms(text: str) -> str:
    """The words of `text`, space-separated, as stored in chunks.search_terms."""
    if not text:
        return ""
    return " ".join(term for term, _, _ in _tokens(_normalize(text)[0]))


def query_terms(query: str) -> list[str]:
    """The distinct words of a query, in order, stop words dropped (unless nothing else is left)."""
    seen: dict[str, None] = {}
    for term, _, _ in _tokens(_normalize(query)[0]):
        seen.setdefault(term, None)
    terms = list(seen)
    content = [t for t in terms if t not in STOP_WORDS]
    return (content or terms)[:MAX_QUERY_TERMS]


def tsquery_text(terms: Iterable[str]) -> str:
    """A `to_tsquery('simple', …)` text matching any of `terms` ("'a' | 'b'").

    Terms are letters and digits only (see `_TERM`), so quoting them cannot be escaped; the
    text is still passed as a bound parameter.
    """
    safe = [t for t in terms if _TERM.fullmatch(t)]
    return " | ".join(f"'{t}'" for t in safe)


def highlight_spans(text: str, terms: Iterable[str]) -> list[tuple[int, int]]:
    """Code-point spans of `text` whose words are among `terms`, merged, in order."""
    wanted = set(terms)
    if not text or not wanted:
        return []
    normalized, origin = _normalize(text)
    spans = sorted((origin[s], origin[e - 1] + 1) for term, s, e in _tokens(normalized) if term in wanted)
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


__all__ = ["MAX_QUERY_TERMS", "STOP_WORDS", "TERM_DIMENSIONS", "highlight_spans", "query_terms", "search_terms", "tsquery_text"]
