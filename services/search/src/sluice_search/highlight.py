"""Highlights of a hit: where the query's words are in its text (docs/search.md, "Keyword ranking").

`sluice_common.textsearch.highlight_spans` normalises the text character by character (NFKC,
lowercase, and a map back to the original code points) before it finds the words: about 0.9 ms
for a chunk of 1,000 characters on a loaded 2-core machine, so 9 ms of every KEYWORD or HYBRID
answer of ten hits, as much as the database's part of the query. For a text that is all ASCII
the normalised text is the text lowercased, character for character, and the words are its runs
of letters and digits: the same spans come from one regular expression that finds the query's
words whole (a few matches, not every word of the text). Any other text takes the general path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sluice_common import textsearch

# In lowercased ASCII, textsearch's terms are the runs of these characters (letters and digits,
# no underscore): a word is a match of a wanted term that no such character touches.
_ASCII_WORD = "a-z0-9"
_ASCII_TERM = re.compile(f"[{_ASCII_WORD}]+")


def highlight_spans(text: str, terms: Iterable[str]) -> list[tuple[int, int]]:
    """Code-point spans of `text` whose words are among `terms`, merged, in order: exactly
    textsearch.highlight_spans."""
    if not text.isascii():
        return textsearch.highlight_spans(text, terms)
    wanted = set(terms)
    if not text or not wanted:
        return []
    # Only terms that can be a run of an ASCII text; searched for whole, not every word tokenised.
    words = sorted((t for t in wanted if _ASCII_TERM.fullmatch(t)), key=lambda t: (-len(t), t))
    if not words:
        return []
    pattern = re.compile(f"(?<![{_ASCII_WORD}])(?:{'|'.join(map(re.escape, words))})(?![{_ASCII_WORD}])")
    merged: list[tuple[int, int]] = []
    for match in pattern.finditer(text.lower()):
        start, end = match.span()
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
