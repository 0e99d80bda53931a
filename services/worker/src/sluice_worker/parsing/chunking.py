"""Elements to chunks: unstructured's chunk_by_title, made right for text without spaces.

chunk_by_title splits an element longer than `max_characters` at whitespace; Chinese and
Japanese have none, so the split would fall mid-sentence at exactly max_characters. Such
elements are first cut here into sentence-aligned pieces (。！？； and . ! ? followed by a
space), each within max_characters, with `overlap` filled by whole trailing sentences of the
previous piece. Only a single sentence longer than max_characters is left for
chunk_by_title to cut.

Tables never go through chunk_by_title (it would cut a long one at any character): each
becomes chunks of its own, split between rows with the header repeated (tables.py).

Each chunk keeps where its elements lie on their pages (`ChunkRecord.boxes`), from the
elements' `metadata.coordinates` (unstructured's CoordinatesMetadata; parsing/pdf.py and ocr.py
set it for PDF text boxes, tables and OCR paragraphs), as fractions of the page from its
top-left corner: one box per element, at most MAX_BOXES.
"""  # noqa: RUF002 - names CJK punctuation

from __future__ import annotations

import copy
import re
from collections import Counter
from typing import TYPE_CHECKING, TypedDict

from sluice_worker.domain import TOO_MANY_CHUNKS, Box, ChunkingSettings, ChunkRecord, DocumentInvalid
from sluice_worker.parsing.tables import split_table

if TYPE_CHECKING:
    from unstructured.documents.elements import Element

_BOUNDARY = re.compile(r"[。！？；!?][」』）”’\"')]*|[.;](?=\s)|\n+")  # noqa: RUF001 - CJK punctuation, meant
_TABLE_TYPES = {"Table", "TableChunk"}
MAX_BOXES = 64


def split_sentences(text: str) -> list[str]:
    """Sentences with their punctuation and following whitespace; "".join() gives the text back."""
    sentences, start = [], 0
    for match in _BOUNDARY.finditer(text):
        end = match.end()
        while end < len(text) and text[end] in " \t":
            end += 1
        if end > start:
            sentences.append(text[start:end])
        start = end
    if start < len(text):
        sentences.append(text[start:])
    return sentences


def pack_sentences(
    sentences: list[str], max_characters: int, soft_max: int, overlap: int, first_max: int | None = None
) -> list[str]:
    """Group sentences into pieces of at most max_characters (closed at soft_max), each piece
    after the first starting with the previous piece's last whole sentences, up to `overlap`.
    The first piece may be held to `first_max`, to leave room for the heading before it."""
    pieces: list[list[str]] = []
    current: list[str] = []
    size = 0
    fresh = 0  # sentences in `current` that are not overlap
    for sentence in sentences:
        limit = max_characters if pieces or first_max is None else first_max
        if current and fresh and (size + len(sentence) > limit or size >= min(soft_max, limit)):
            pieces.append(current)
            tail: list[str] = []
            tail_size = 0
            for previous in reversed(current):
                if tail_size + len(previous) > overlap or tail_size + len(previous) + len(sentence) > max_characters:
                    break
                tail.insert(0, previous)
                tail_size += len(previous)
            current, size, fresh = tail, tail_size, 0
        current.append(sentence)
        size += len(sentence)
        fresh += 1
    if current and fresh:
        pieces.append(current)
    return ["".join(piece).strip() for piece in pieces if "".join(piece).strip()]


def presplit(elements: list[Element], settings: ChunkingSettings) -> list[Element]:
    from unstructured.documents.elements import Text

    out: list[Element] = []
    previous = None
    for element in elements:
        budget = settings.max_characters
        if previous is not None and type(previous).__name__ == "Title":
            # A heading must fit in one chunk with the start of its section; left alone, it
            # would be merged into the end of the previous section's chunk.
            budget -= len(previous.text) + 2
            if budget < settings.max_characters // 3:
                budget = settings.max_characters
        previous = element
        # Only a Text element holds text long enough to split (the others have none of their own).
        if len(element.text) <= budget or type(element).__name__ in _TABLE_TYPES or not isinstance(element, Text):
            out.append(element)
            continue
        pieces = pack_sentences(
            split_sentences(element.text), settings.max_characters, settings.new_after_n_chars, settings.overlap, first_max=budget
        )
        for piece in pieces:
            clone = type(element)(text=piece, metadata=copy.deepcopy(element.metadata))
            out.append(clone)
    return out


def chunk_elements(elements: list[Element], settings: ChunkingSettings, max_chunks: int) -> list[ChunkRecord]:
    """Text between tables through chunk_by_title; each table into chunks of its own, split
    between rows with the header repeated (parsing/tables.py)."""
    records: list[ChunkRecord] = []
    section = ""
    run: list[Element] = []
    for element in presplit(elements, settings):
        if type(element).__name__ not in _TABLE_TYPES:
            run.append(element)
            continue
        section = _chunk_text(run, settings, records, section)
        run = []
        parts = split_table(element.metadata.text_as_html or "", element.text, settings.max_characters)
        for part in parts:
            records.append(
                ChunkRecord(
                    index=len(records),
                    text=part.text,
                    page_number=int(element.metadata.page_number or 0),
                    element_type="Table",
                    element_types=["Table"],
                    section_title=section[:500],
                    text_as_html=part.html,
                    boxes=element_boxes([element]),
                    **_provenance([element]),
                )
            )
    _chunk_text(run, settings, records, section)
    if len(records) > max_chunks:
        raise DocumentInvalid(TOO_MANY_CHUNKS, f"the document makes {len(records)} chunks, more than the {max_chunks} allowed")
    return records


def _chunk_text(elements: list[Element], settings: ChunkingSettings, records: list[ChunkRecord], section: str) -> str:
    """Append the chunks of a run of elements without tables; return the section title in
    force after it."""
    from unstructured.chunking.title import chunk_by_title

    if not elements:
        return section
    chunks = chunk_by_title(
        elements,
        max_characters=settings.max_characters,
        new_after_n_chars=settings.new_after_n_chars,
        overlap=settings.overlap,
        combine_text_under_n_chars=min(settings.new_after_n_chars, settings.max_characters),
        multipage_sections=True,
        include_orig_elements=True,
    )
    for chunk in chunks:
        text = chunk.text.strip()
        if not text:
            continue
        originals = list(chunk.metadata.orig_elements or [])
        if originals and type(originals[0]).__name__ == "Title":
            section = originals[0].text.strip()
        chunk_section = section
        for original in originals:
            if type(original).__name__ == "Title":
                section = original.text.strip()
        records.append(
            ChunkRecord(
                index=len(records),
                text=text,
                page_number=int(chunk.metadata.page_number or 0),
                element_type=_main_type(chunk, originals),
                element_types=element_types(originals) or [_main_type(chunk, originals)],
                section_title=chunk_section[:500],
                boxes=element_boxes(originals),
                **_provenance(originals or [chunk]),
            )
        )
    return section


MAX_ELEMENT_TYPES = 32


def element_types(elements: list[Element]) -> list[str]:
    """The elements' types in order of first appearance (unstructured's class names: "Title",
    "NarrativeText", "ListItem", …), at most MAX_ELEMENT_TYPES."""
    return list(dict.fromkeys(type(element).__name__ for element in elements))[:MAX_ELEMENT_TYPES]


def element_boxes(elements: list[Element]) -> list[Box]:
    """The elements' boxes, in fractions of their pages from the top-left corner, in order
    (an element split into several chunks gives its whole box to each)."""
    boxes: list[Box] = []
    for element in elements:
        box = element_box(element)
        if box is not None and box not in boxes:
            boxes.append(box)
        if len(boxes) == MAX_BOXES:
            break
    return boxes


def element_box(element: Element) -> Box | None:
    metadata = element.metadata
    coordinates = getattr(metadata, "coordinates", None)
    page = getattr(metadata, "page_number", None)
    system = getattr(coordinates, "system", None)
    points = getattr(coordinates, "points", None)
    if not page or system is None or not points or not system.width or not system.height:
        return None
    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    top, bottom = min(ys) / system.height, max(ys) / system.height
    if system.orientation.name == "CARTESIAN":  # y grows upwards (PDF points)
        top, bottom = 1.0 - bottom, 1.0 - top

    def clamp(value: float) -> float:
        return round(min(1.0, max(0.0, value)), 4)

    return {
        "page": int(page),
        "left": clamp(min(xs) / system.width),
        "top": clamp(top),
        "right": clamp(max(xs) / system.width),
        "bottom": clamp(bottom),
    }


class _Provenance(TypedDict):
    text_source: str
    ocr_confidence: float | None


def _provenance(originals: list[Element]) -> _Provenance:
    """The chunk's text source ("text_layer", "ocr" or "mixed") and, when OCR read any of it,
    the OCR confidence weighted by characters."""
    ocr_chars = 0
    ocr_weighted = 0.0
    other_chars = 0
    for original in originals:
        size = len(original.text)
        if getattr(original.metadata, "text_source", None) == "ocr":
            ocr_chars += size
            ocr_weighted += size * float(getattr(original.metadata, "ocr_confidence", 0.0) or 0.0)
        else:
            other_chars += size
    if not ocr_chars:
        return {"text_source": "text_layer", "ocr_confidence": None}
    return {"text_source": "mixed" if other_chars else "ocr", "ocr_confidence": round(ocr_weighted / ocr_chars, 4)}


def _main_type(chunk: Element, originals: list[Element]) -> str:
    """The element type that gives the chunk most of its text (a Title only when alone)."""
    if type(chunk).__name__ in _TABLE_TYPES:
        return "Table"
    weights: Counter[str] = Counter()
    for original in originals:
        weights[type(original).__name__] += len(original.text)
    body = {name: weight for name, weight in weights.items() if name != "Title"}
    if body:
        return max(body, key=body.__getitem__)
    if weights:
        return "Title"
    return type(chunk).__name__
