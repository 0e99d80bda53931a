"""Bytes to unstructured elements, for every supported format. Runs inside the sandbox."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from sluice_worker.domain import (
    DOCUMENT_CORRUPT,
    DOCUMENT_EMPTY,
    PARSER_LOST_TEXT,
    TOO_MANY_PAGES,
    DocumentInvalid,
    ParseSummary,
    storable_text,
)
from sluice_worker.parsing import formats, heuristics, xmltrees
from sluice_worker.parsing.resources import out_of_memory
from sluice_worker.parsing.text import decode_text

if TYPE_CHECKING:
    from unstructured.documents.elements import Element

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class ParseLimits:
    max_pages: int = 2000
    max_unzipped_bytes: int = 500 * 1024 * 1024
    # Pixels of one page read by OCR (an image, a TIFF frame, a rendered PDF page).
    max_page_pixels: int = 40_000_000


def partition_document(
    data: bytes, filename: str, mime_type: str, limits: ParseLimits, progress: Progress | None = None
) -> tuple[list[Element], ParseSummary]:
    fmt = formats.detect_format(data, filename, mime_type)
    heuristics.begin_document()
    if fmt in (formats.DOCX, formats.PPTX, formats.EPUB, formats.XLSX):
        formats.check_zip_bomb(data, limits.max_unzipped_bytes)
    pages = 0
    try:
        if fmt == formats.PDF:
            from sluice_worker.parsing.pdf import partition_pdf_fast

            elements, pages = partition_pdf_fast(
                data, filename=filename, max_pages=limits.max_pages, max_pixels=limits.max_page_pixels, progress=progress
            )
        elif fmt == formats.IMAGE:
            from sluice_worker.parsing.ocr import partition_image

            elements, pages = partition_image(
                data, filename=filename, max_pages=limits.max_pages, max_pixels=limits.max_page_pixels, progress=progress
            )
        else:
            elements = _partition_other(fmt, data, filename)
    except (DocumentInvalid, MemoryError):
        raise
    except Exception as exc:  # whatever a parser raises: sorted below into memory, a limit, or a damaged file
        if out_of_memory(exc):
            raise  # a resource failure, not damage: the sandbox reports PARSE_MEMORY_LIMIT
        limit = _xml_limit_failure(exc, formats.FORMAT_NAMES[fmt])
        if limit is not None:
            raise limit from exc
        # The parsers are deterministic: an exception on these bytes comes back on every
        # retry, so it is the document's fault (damaged or not what its name says).
        raise DocumentInvalid(
            DOCUMENT_CORRUPT, f"the file could not be read as {formats.FORMAT_NAMES[fmt]} ({exception_summary(exc)})"
        ) from exc
    elements = _clean(elements)
    heuristics.apply_document_languages(elements)
    if not pages:
        pages = max((e.metadata.page_number or 0 for e in elements), default=0)
        if pages > limits.max_pages:
            raise DocumentInvalid(TOO_MANY_PAGES, f"the document has {pages} pages, more than the {limits.max_pages} allowed")
    characters = sum(len(e.text) for e in elements)
    if characters == 0:
        _check_no_text_lost(fmt, data)
        hint = " (OCR found no text on its pages either)" if fmt in (formats.PDF, formats.IMAGE) else ""
        raise DocumentInvalid(DOCUMENT_EMPTY, f"the document contains no text{hint}")
    return elements, ParseSummary(elements=len(elements), pages=pages, characters=characters)


def _xml_limit_failure(exc: BaseException, format_name: str) -> DocumentInvalid | None:
    from lxml import etree

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, etree.XMLSyntaxError):
            return xmltrees.xml_limit_failure(seen, format_name)
        seen = seen.__cause__ or seen.__context__
    return None


_WORD = re.compile(r"\w")
_OFFICE_TEXT = re.compile(rb"<(?:w|a):t(?:\s[^>]*)?>([^<]*)</(?:w|a):t>")


def _check_no_text_lost(fmt: str, data: bytes) -> None:
    """The parser found no text: fail as PARSER_LOST_TEXT, not DOCUMENT_EMPTY, when the raw
    file visibly has some (a parser limit or bug dropped it; the owner must not be told the
    file is empty)."""
    try:
        raw = _raw_text(fmt, data)
    except Exception:  # only an estimate; the file is empty as far as we know
        return
    if not _WORD.search(raw):
        return
    visible = raw.split()
    sample = " ".join(visible)[:80]
    raise DocumentInvalid(
        PARSER_LOST_TEXT,
        f"the parser found no text although the file contains about {_about(sum(map(len, visible)))} of text "
        f"(it begins {sample!r}); the file may be beyond what the {formats.FORMAT_NAMES[fmt]} parser can read",
    )


def _raw_text(fmt: str, data: bytes) -> str:
    """The text visible in the raw file, estimated without the parser, for text-like formats."""
    if fmt == formats.HTML:
        return storable_text(xmltrees.visible_html_text(decode_text(data, html=True)[0]))
    if fmt in (formats.TEXT, formats.MARKDOWN):
        return storable_text(decode_text(data)[0])
    if fmt in (formats.DOCX, formats.PPTX):
        import zipfile
        from html import unescape

        parts: list[str] = []
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for name in archive.namelist():
                if name.endswith(".xml") and name.startswith(("word/", "ppt/slides/")):
                    parts.extend(m.decode("utf-8", "replace") for m in _OFFICE_TEXT.findall(archive.read(name)))
        return storable_text(unescape(" ".join(parts)))
    return ""


def _about(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f} million characters"
    return f"{count:,} characters" if count != 1 else "1 character"


def exception_summary(exc: BaseException) -> str:
    """The kind of error and the first line of what it says, for a failure's message (which
    worker_errors.client_message then cleans of server internals)."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__


class _CommonArguments(TypedDict):
    metadata_filename: str
    languages: list[str]


def _partition_other(fmt: str, data: bytes, filename: str) -> list[Element]:
    # languages=[""]: no language detection per element; heuristics.apply_document_languages
    # detects them once for the document.
    common: _CommonArguments = {"metadata_filename": filename, "languages": [""]}
    # libxml2's own limits would silently cut long texts and deep nesting (see xmltrees).
    xmltrees.use_huge_trees()
    if fmt == formats.DOCX:
        from unstructured.partition.docx import partition_docx

        return partition_docx(file=io.BytesIO(data), **common)
    if fmt == formats.PPTX:
        from unstructured.partition.pptx import partition_pptx

        return partition_pptx(file=io.BytesIO(data), **common)
    if fmt == formats.HTML:
        from unstructured.partition.html import partition_html

        text, _ = decode_text(data, html=True)
        return partition_html(text=xmltrees.prepare_html(text), **common)
    if fmt == formats.MARKDOWN:
        from unstructured.partition.md import partition_md

        text, _ = decode_text(data)
        return partition_md(text=text, **common)
    if fmt == formats.TEXT:
        from unstructured.partition.text import partition_text

        text, _ = decode_text(data)
        return partition_text(text=text, **common)
    if fmt == formats.EMAIL:
        return _partition_email(data, filename)
    if fmt == formats.XLSX:
        from unstructured.partition.xlsx import partition_xlsx

        return partition_xlsx(file=io.BytesIO(data), **common)
    if fmt == formats.CSV:
        from unstructured.partition.csv import partition_csv

        text, _ = decode_text(data)
        return partition_csv(file=io.BytesIO(text.encode("utf-8")), **common)
    if fmt == formats.MSG:
        from unstructured.partition.msg import partition_msg

        return partition_msg(file=io.BytesIO(data), **common)
    if fmt == formats.EPUB:
        from unstructured.partition.epub import partition_epub

        return partition_epub(file=io.BytesIO(data), **common)
    raise AssertionError(fmt)


def _partition_email(data: bytes, filename: str) -> list[Element]:
    from unstructured.documents.elements import ElementMetadata, Title
    from unstructured.partition.email import partition_email

    elements = partition_email(file=io.BytesIO(data), metadata_filename=filename, languages=[""])
    subject = next((e.metadata.subject for e in elements if getattr(e.metadata, "subject", None)), None)
    if subject is None:
        import email
        import email.policy

        subject = email.message_from_bytes(data, policy=email.policy.default).get("Subject")
    if subject:
        # The subject is what people search an e-mail by: it heads the first chunk.
        title = Title(text=str(subject), metadata=ElementMetadata(filename=filename))
        elements = [title, *elements]
    return elements


# A "title" with sentence punctuation inside, or this long, is a paragraph. unstructured's
# heuristics count words by spaces, so Chinese and Japanese paragraphs come out as Title;
# left so, every paragraph would open a section of its own.
_SENTENCE_INSIDE = re.compile(r"[。！？．][^\s」』）”’]")  # noqa: RUF001 - CJK punctuation, meant
_MAX_TITLE_CHARS = 120


def _clean(elements: list[Element]) -> list[Element]:
    from unstructured.documents.elements import NarrativeText, PageBreak, Title

    cleaned: list[Element] = []
    for element in elements:
        if isinstance(element, PageBreak):
            continue
        element.text = storable_text(element.text or "").strip()
        if not element.text:
            continue
        if isinstance(element, Title) and (
            len(element.text) > _MAX_TITLE_CHARS or _SENTENCE_INSIDE.search(element.text) or element.text.endswith("。")
        ):
            element = NarrativeText(text=element.text, metadata=element.metadata)
        cleaned.append(element)
    return cleaned
