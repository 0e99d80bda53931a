"""PDF with unstructured's fast text strategy, without unstructured-inference.

`unstructured.partition.pdf` imports unstructured-inference at module level even for
strategy="fast", and that pulls onnxruntime, OpenCV, matplotlib and pandas (over 100 MB)
for nothing the fast strategy uses. The fast strategy itself is pdfminer.six's layout
analysis, one element per text box classified by `unstructured.partition.text.element_from_text`;
this module does exactly that, with unstructured's own element types and cleaners, and adds
what a service needs: encryption and truncation checks, a page limit and page progress.

Ruled tables (drawn cell borders) on text-layer pages are found by pdfplumber, on the same
pdfminer.six, and become Table elements with their HTML, as DOCX and HTML tables do; their
cells leave the running text. Tables without borders stay running text (no reliable way to
tell them from columns of prose without a layout model).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sluice_worker.domain import DOCUMENT_CORRUPT, PDF_ENCRYPTED, TOO_MANY_PAGES, DocumentInvalid

if TYPE_CHECKING:
    import pypdfium2
    from pdfminer.layout import LTTextBox
    from pdfplumber.pdf import PDF
    from unstructured.documents.elements import CoordinatesMetadata, Element, Table

Progress = Callable[[int, int, str], None]


def open_checked(data: bytes, max_pages: int) -> int:
    """Check that the PDF is whole, readable without a password and within the page limit;
    return its page count."""
    from pypdf import PasswordType, PdfReader
    from pypdf.errors import PdfReadError

    # A complete PDF ends with %%EOF (possibly followed by a little junk); an upload cut off
    # in the middle does not, even when a lenient reader could still recover a few pages.
    if b"%%EOF" not in data[-4096:]:
        raise DocumentInvalid(DOCUMENT_CORRUPT, "the PDF file is incomplete (it was probably cut off during upload or copy)")
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise DocumentInvalid(PDF_ENCRYPTED, "the PDF is protected by a password; upload a copy without the password")
        pages = len(reader.pages)
    except DocumentInvalid:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
        raise DocumentInvalid(
            DOCUMENT_CORRUPT, f"the PDF file is damaged and cannot be read ({type(exc).__name__}: {str(exc)[:200]})"
        ) from exc
    except NotImplementedError as exc:  # e.g. an encryption algorithm pypdf does not know
        raise DocumentInvalid(PDF_ENCRYPTED, f"the PDF is encrypted in a way that cannot be opened ({str(exc)[:200]})") from exc
    if pages > max_pages:
        raise DocumentInvalid(TOO_MANY_PAGES, f"the PDF has {pages} pages, more than the {max_pages} allowed")
    if pages == 0:
        raise DocumentInvalid(DOCUMENT_CORRUPT, "the PDF file has no pages")
    return pages


def partition_pdf_fast(
    data: bytes, *, filename: str, max_pages: int, max_pixels: int = 40_000_000, progress: Progress | None = None
) -> tuple[list[Element], int]:
    """Elements (with page numbers) and the page count. Pages with a usable text layer are read
    from it; the others (scans, or text whose glyphs map to nothing) are rendered and OCR'd,
    page by page, so a mixed PDF keeps both and every page number."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams, LTTextBox
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfparser import PDFSyntaxError
    from pdfminer.psexceptions import PSException

    from sluice_worker.parsing import ocr

    pages = open_checked(data, max_pages)
    elements: list[Element] = []
    done = 0
    rendered = None  # the pypdfium2 document, opened when a page first needs OCR
    plumber = None  # the pdfplumber document, for the tables of text-layer pages
    try:
        for page_number, layout in enumerate(extract_pages(io.BytesIO(data), password="", laparams=LAParams()), start=1):
            text_boxes = [box for box in layout if isinstance(box, LTTextBox)]
            if ocr.needs_ocr("".join(box.get_text() for box in text_boxes)):
                if rendered is None:
                    rendered = _open_for_rendering(data)
                image = ocr.render_pdf_page(rendered, page_number - 1, max_pixels)
                elements.extend(ocr.page_elements(image, page_number=page_number, filename=filename, filetype="application/pdf"))
                text_boxes = []
            tables = []
            if text_boxes:
                if plumber is None:
                    plumber = _open_for_tables(data)
                tables = page_tables(plumber, page_number, layout.height) if plumber is not None else []
            elements.extend(_text_layer_elements(text_boxes, tables, page_number, filename, layout.width, layout.height))
            done = page_number
            if progress is not None:
                progress(done, pages, "pages")
    except (PDFPasswordIncorrect, PDFEncryptionError) as exc:
        raise DocumentInvalid(PDF_ENCRYPTED, "the PDF is protected by a password; upload a copy without the password") from exc
    except (PDFSyntaxError, PSException, ValueError, KeyError, TypeError, IndexError, AttributeError, AssertionError) as exc:
        raise DocumentInvalid(
            DOCUMENT_CORRUPT, f"the PDF file is damaged (page {done + 1} cannot be read: {type(exc).__name__})"
        ) from exc
    finally:
        if rendered is not None:
            rendered.close()
        if plumber is not None:
            plumber.close()
    return elements, pages


def _text_layer_elements(
    text_boxes: list[LTTextBox], tables: list[PageTable], page_number: int, filename: str, width: float, height: float
) -> list[Element]:
    """The elements of a text-layer page in reading order, each table in place of its cells."""
    from unstructured.cleaners.core import clean_extra_whitespace, clean_ligatures
    from unstructured.documents.elements import ElementMetadata
    from unstructured.partition.text import element_from_text

    from sluice_worker.parsing import ocr

    elements: list[Element] = []
    placed: set[int] = set()
    for box in text_boxes:
        # Text boxes inside a table are the table's cells: the table element replaces
        # them, where its first box stood in reading order.
        inside = next((i for i, table in enumerate(tables) if table.holds(box.bbox)), None)
        if inside is not None:
            if inside not in placed:
                placed.add(inside)
                elements.append(tables[inside].element(page_number, filename, width, height))
            continue
        text = clean_extra_whitespace(clean_ligatures(_join_lines(box.get_text())))
        if not text:
            continue
        element = element_from_text(text)
        element.metadata = ElementMetadata(
            page_number=page_number,
            filename=filename,
            filetype="application/pdf",
            coordinates=pdf_coordinates(box.bbox, width, height),
        )
        element.metadata.text_source = ocr.TEXT_LAYER
        elements.append(element)
    for i, table in enumerate(tables):  # a table none of whose cells was a text box
        if i not in placed:
            elements.append(table.element(page_number, filename, width, height))
    return elements


@dataclass(frozen=True)
class PageTable:
    """A ruled table pdfplumber found on a text-layer page: its box (pdfminer's coordinates,
    origin at the bottom left) and its rows of cell texts."""

    x0: float
    y0: float
    x1: float
    y1: float
    rows: list[list[str]]

    def holds(self, bbox: tuple[float, float, float, float]) -> bool:
        x = (bbox[0] + bbox[2]) / 2
        y = (bbox[1] + bbox[3]) / 2
        return self.x0 <= x <= self.x1 and self.y0 <= y <= self.y1

    def element(self, page_number: int, filename: str, page_width: float = 0.0, page_height: float = 0.0) -> Table:
        """A unstructured Table element with the table as HTML, as the other formats give it
        (parsing/tables.py turns it into Markdown chunks, split between rows)."""
        from html import escape

        from unstructured.documents.elements import ElementMetadata, Table

        from sluice_worker.parsing import ocr

        html = (
            "<table>"
            + "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in self.rows)
            + "</table>"
        )
        text = "\n".join(" ".join(cell for cell in row if cell) for row in self.rows)
        element = Table(
            text=text,
            metadata=ElementMetadata(
                page_number=page_number,
                filename=filename,
                filetype="application/pdf",
                text_as_html=html,
                coordinates=pdf_coordinates((self.x0, self.y0, self.x1, self.y1), page_width, page_height),
            ),
        )
        element.metadata.text_source = ocr.TEXT_LAYER
        return element


def pdf_coordinates(bbox: tuple[float, float, float, float], width: float, height: float) -> CoordinatesMetadata | None:
    """A pdfminer box (x0, y0, x1, y1 in points, origin at the bottom left) as unstructured's
    CoordinatesMetadata on the page's PointSpace; None when the page size is unknown."""
    from unstructured.documents.coordinates import PointSpace
    from unstructured.documents.elements import CoordinatesMetadata

    if not width or not height:
        return None
    x0, y0, x1, y1 = (float(v) for v in bbox)
    return CoordinatesMetadata(points=((x0, y1), (x0, y0), (x1, y0), (x1, y1)), system=PointSpace(width=width, height=height))


def page_tables(plumber: PDF, page_number: int, page_height: float) -> list[PageTable]:
    """The ruled tables of a page (pdfplumber's line strategy: drawn cell borders), with at
    least two rows and two columns; a page pdfplumber cannot read has none."""
    try:
        found = plumber.pages[page_number - 1].find_tables()
    except Exception:  # table detection is an improvement, never a reason to fail
        return []
    tables = []
    for table in found:
        rows = [[" ".join((cell or "").split()) for cell in row] for row in table.extract()]
        rows = [row for row in rows if any(row)]
        if len(rows) < 2 or max(len(row) for row in rows) < 2:
            continue
        x0, top, x1, bottom = table.bbox  # pdfplumber: origin at the top left
        tables.append(PageTable(x0, page_height - bottom, x1, page_height - top, rows))
    return tables


def _open_for_tables(data: bytes) -> PDF | None:
    try:
        import pdfplumber

        return pdfplumber.open(io.BytesIO(data))
    except Exception:  # no tables then; the text is still read
        return None


def _open_for_rendering(data: bytes) -> pypdfium2.PdfDocument:
    import pypdfium2

    try:
        return pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as exc:
        raise DocumentInvalid(
            DOCUMENT_CORRUPT, f"the PDF file is damaged (its pages cannot be rendered: {str(exc)[:200]})"
        ) from exc


def _join_lines(text: str) -> str:
    # A text box's lines belong to one paragraph; a word broken by a hyphen at a line end
    # is joined again.
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    out = ""
    for line in lines:
        if out.endswith("-") and line[:1].islower():
            out = out[:-1] + line
        elif out:
            out = f"{out} {line}"
        else:
            out = line
    return out
