"""unstructured's text heuristics, held to a per-document budget. Runs inside the sandbox.

unstructured spends two kinds of work on every element it makes, and both grow with the number
of elements, not with the size of the file:

* **Language detection** (`apply_lang_metadata`): langdetect on the whole text, and when that
  finds more than one language (any manual with a few Chinese or French lines), langdetect
  again on every element. A 10 MB HTML manual of 115,000 short paragraphs spent 99 % of its
  parse there (15-18 ms a paragraph) and ran past the parse time limit. Here the partitioners
  are told to skip it (`languages=[""]`), and the document's languages are detected once, on
  elements drawn from the whole document (`apply_document_languages`), and set on every element.
  Sluice reads no element's language (keyword search segments Chinese by its characters,
  sluice_common.textsearch), so this changes nothing downstream but the time.
* **Title or paragraph** (`is_possible_narrative_text`, `is_possible_title`): spaCy's tagger
  and parser run on each element's text (5-10 ms on a short paragraph). The first
  `SPACY_MAX_TEXTS` texts of a document (`SPACY_MAX_CHARACTERS` characters at most; ~5-10 s) still go
  through spaCy; after that, a rule stands in (`RuleDoc`): sentences end at . ! ? 。！？, and a
  text "has a verb" when it reads as a sentence (three words or more, ending with sentence
  punctuation). The types unstructured then picks differ only for short lines without
  punctuation deep in a long document (Text rather than NarrativeText, or a Title), which
  chunking treats alike unless it takes one for a heading.

`begin_document()` resets the budget; partition.py calls it once per document.
"""  # noqa: RUF002 - names CJK punctuation

from __future__ import annotations

import contextlib
import random
import re
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from spacy.tokens import Doc
    from unstructured.documents.elements import Element

# spaCy is asked about at most this many distinct texts per document, and this many characters.
SPACY_MAX_TEXTS = 1_000
SPACY_MAX_CHARACTERS = 200_000
# unstructured hands spaCy up to 1,000,000 characters of one element: for one long paragraph
# that took ~20 s and more than 2 GB. The first 20,000 characters decide the type as well.
HEURISTICS_MAX_CHARS = 20_000
# Languages are detected on this many elements of a document (this many characters of each).
LANGUAGE_SAMPLE_ELEMENTS = 32
LANGUAGE_SAMPLE_CHARS = 1_000


class _Budget:
    def __init__(self) -> None:
        self.texts: set[str] = set()
        self.characters = 0

    def allows(self, text: str) -> bool:
        if text in self.texts:
            return True  # already paid for (unstructured caches the parse)
        if len(self.texts) >= SPACY_MAX_TEXTS or self.characters + len(text) > SPACY_MAX_CHARACTERS:
            return False
        self.texts.add(text)
        self.characters += len(text)
        return True


_budget = _Budget()
_installed = False


def begin_document() -> None:
    """A new document: spaCy's budget starts again, and no answer about another document's
    text is kept (unstructured's caches), so a document is read alike in any sandbox."""
    global _budget
    _budget = _Budget()
    _install()
    with contextlib.suppress(ImportError, AttributeError):
        import unstructured.nlp.tokenize as tokenize

        for cached in (tokenize._process_cached, tokenize._tokenize_for_cache, tokenize.word_tokenize, tokenize.pos_tag):
            cached.cache_clear()


def _install() -> None:
    global _installed
    if _installed:
        return
    with contextlib.suppress(ImportError, AttributeError):  # private API: at worst, the slow path
        import unstructured.nlp.tokenize as tokenize

        spacy_process = tokenize._process
        nlp = tokenize._get_nlp()
        nlp.max_length = min(nlp.max_length, HEURISTICS_MAX_CHARS)

        def budgeted_process(text: str) -> Doc | RuleDoc:
            text = str(text)
            if _budget.allows(text):
                return spacy_process(text)
            return RuleDoc(text)

        # sent_tokenize, word_tokenize and pos_tag look `_process` up when they are called.
        tokenize._process = budgeted_process  # type: ignore[assignment]  # RuleDoc quacks like the Doc its callers read
    _installed = True


class RuleToken(NamedTuple):
    text: str
    tag_: str


class RuleSpan(NamedTuple):
    text: str


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")  # noqa: RUF001 - CJK punctuation, meant
_TOKEN = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")  # noqa: RUF001 - CJK punctuation, meant
_ENDS_A_SENTENCE = re.compile(r"[.!?。！？][\"'”’)\]]*\s*$")  # noqa: RUF001 - CJK punctuation, meant
VERB_TAG = "VB"  # one of unstructured's POS_VERB_TAGS


class RuleDoc:
    """What unstructured reads from a spaCy Doc (`.sents`, tokens with `.text` and `.tag_`),
    made by rules: the stand-in once a document's spaCy budget is spent."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    @property
    def sents(self) -> list[RuleSpan]:
        return [RuleSpan(part) for part in _SENTENCE_END.split(self.text) if part.strip()]

    def __iter__(self) -> Iterator[RuleToken]:
        tokens = _TOKEN.findall(self.text)
        verb_at = -1
        if len(tokens) >= 3 and _ENDS_A_SENTENCE.search(self.text):
            words = [i for i, token in enumerate(tokens) if token[0].isalnum() or token[0] == "_"]
            if len(words) >= 3:
                verb_at = words[len(words) // 2]
        return (RuleToken(token, VERB_TAG if i == verb_at else "") for i, token in enumerate(tokens))


def apply_document_languages(elements: list[Element]) -> None:
    """Detect the document's languages once, from elements drawn across it, and set them on
    every element (unstructured would have run langdetect on every element).

    Each sampled element is detected on its own (one language of a short Chinese paragraph
    among long English ones is lost in a joined sample); the document's languages are those of
    at least two samples, or of the only one, most frequent first."""
    from unstructured.partition.common.lang import detect_languages

    texts = [e.text for e in elements if getattr(e, "text", "")]
    if not texts:
        return
    # Elements drawn at random (seeded by the document, so it reads alike every time): a fixed
    # stride would see only one language of a manual whose languages take turns.
    chosen = sorted(random.Random(len(texts)).sample(range(len(texts)), min(len(texts), LANGUAGE_SAMPLE_ELEMENTS)))
    counts: Counter[str] = Counter()
    for index in chosen:
        counts.update((detect_languages(texts[index][:LANGUAGE_SAMPLE_CHARS]) or [])[:1])
    languages = [language for language, count in counts.most_common() if count >= 2 or len(counts) == 1] or None
    for element in elements:
        element.metadata.languages = languages
