"""Bytes to unstructured elements, for every supported format. Runs inside the sandbox."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass

from sluice_worker.domain import DOCUMENT_CORRUPT, DOCUMENT_EMPTY, TOO_MANY_PAGES, DocumentInvalid, ParseSummary, storable_text
from sluice_worker.parsing import formats
from sluice_worker.parsing.text import decode_text

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class ParseLimits:
    max_pages: int = 2000
    max_unzipped_bytes: int = 500 * 1024 * 1024


def partition_document(
    data: bytes, filename: str, mime_type: str, limits: ParseLimits, progress: Progress | None = None
) -> tuple[list, ParseSummary]:
    fmt = formats.detect_format(data, filename, mime_type)
    if fmt in (formats.DOCX, formats.PPTX, formats.EPUB):
        formats.check_zip_bomb(data, limits.max_unzipped_bytes)
    pages = 0
    try:
        if fmt == formats.PDF:
            from sluice_worker.parsing.pdf import partition_pdf_fast

            elements, pages = partition_pdf_fast(data, filename=filename, max_pages=limits.max_pages, progress=progress)
        else:
            elements = _partition_other(fmt, data, filename)
    except (DocumentInvalid, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001
        # The parsers are deterministic: an exception on these bytes comes back on every
        # retry, so it is the document's fault (damaged or not what its name says).
        raise DocumentInvalid(
            DOCUMENT_CORRUPT,
            f"the file could not be read as {formats.FORMAT_NAMES[fmt]} ({type(exc).__name__}: {str(exc)[:200]})",
        ) from exc
    elements = _clean(elements)
    if not pages:
        pages = max((e.metadata.page_number or 0 for e in elements), default=0)
        if pages > limits.max_pages:
            raise DocumentInvalid(TOO_MANY_PAGES, f"the document has {pages} pages, more than the {limits.max_pages} allowed")
    characters = sum(len(e.text) for e in elements)
    if characters == 0:
        hint = " (a scanned PDF without a text layer?)" if fmt == formats.PDF else ""
        raise DocumentInvalid(DOCUMENT_EMPTY, f"the document contains no text{hint}")
    return elements, ParseSummary(elements=len(elements), pages=pages, characters=characters)


def _partition_other(fmt: str, data: bytes, filename: str) -> list:
    common = {"metadata_filename": filename}
    if fmt == formats.DOCX:
        from unstructured.partition.docx import partition_docx

        return partition_docx(file=io.BytesIO(data), **common)
    if fmt == formats.PPTX:
        from unstructured.partition.pptx import partition_pptx

        return partition_pptx(file=io.BytesIO(data), **common)
    if fmt == formats.HTML:
        from unstructured.partition.html import partition_html

        text, _ = decode_text(data, html=True)
        return partition_html(text=text, **common)
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
    if fmt == formats.MSG:
        from unstructured.partition.msg import partition_msg

        return partition_msg(file=io.BytesIO(data), **common)
    if fmt == formats.EPUB:
        from unstructured.partition.epub import partition_epub

        return partition_epub(file=io.BytesIO(data), **common)
    raise AssertionError(fmt)


def _partition_email(data: bytes, filename: str) -> list:
    from unstructured.documents.elements import ElementMetadata, Title
    from unstructured.partition.email import partition_email

    elements = partition_email(file=io.BytesIO(data), metadata_filename=filename)
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
_SENTENCE_INSIDE = re.compile(r"[。！？．][^\s」』）”’]")
_MAX_TITLE_CHARS = 120


def _clean(elements: list) -> list:
    from unstructured.documents.elements import NarrativeText, PageBreak, Title

    cleaned = []
    for element in elements:
        if isinstance(element, PageBreak):
            continue
        element.text = storable_text(element.text or "").strip()
        if not element.text:
            continue
        if isinstance(element, Title) and (len(element.text) > _MAX_TITLE_CHARS or _SENTENCE_INSIDE.search(element.text) or element.text.endswith("。")):
            element = NarrativeText(text=element.text, metadata=element.metadata)
        cleaned.append(element)
    return cleaned
