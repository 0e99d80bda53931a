"""Optical character recognition for scanned PDF pages and images. Runs inside the sandbox.

RapidOCR (rapidocr-onnxruntime 1.4.4) reads English and Chinese with the PP-OCRv4 models that
its wheel carries, so nothing is downloaded at run time and no system package (Tesseract) is
needed. One engine per sandbox process, made on first use (~0.1 s), one ONNX thread: the
worker runs one sandbox per job slot, so slots, not threads, use the cores.

Every element made here carries `metadata.text_source = "ocr"` and `metadata.ocr_confidence`
(the recognizer's mean score over the element's characters, 0..1); chunking turns them into
the chunk's source and confidence.
"""

from __future__ import annotations

import io
import itertools
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sluice_worker.domain import (
    DOCUMENT_CORRUPT,
    DOCUMENT_EMPTY,
    IMAGE_TOO_LARGE,
    TOO_MANY_PAGES,
    DocumentInvalid,
)

if TYPE_CHECKING:
    import pypdfium2
    from PIL import Image
    from rapidocr_onnxruntime import RapidOCR
    from unstructured.documents.elements import Element

Progress = Callable[[int, int, str], None]

TEXT_LAYER, OCR = "text_layer", "ocr"

# PDF pages are rendered at this resolution for OCR (enough for 9 pt print).
RENDER_DPI = 200

_engine: RapidOCR | None = None


def _get_engine() -> RapidOCR:
    global _engine
    if _engine is None:
        from rapidocr_onnxruntime import RapidOCR

        # One line per recognizer call: batches are padded to their widest line (ocr_page.py).
        _engine = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1, rec_batch_num=1)
    return _engine


@dataclass(frozen=True)
class OcrLine:
    text: str
    confidence: float
    top: float
    bottom: float
    left: float
    right: float = 0.0


def recognize(image: Image.Image) -> list[OcrLine]:
    """The text lines of a Pillow image, top to bottom."""
    from sluice_worker.parsing.ocr_page import read_page

    # No angle classifier: it turned whole upright lines upside down and lost them (to "S"); a
    # few degrees of skew are handled by detection. Detection at the resolution it needs, in
    # bounded memory; recognition at the page's own (ocr_page.py).
    lines: list[OcrLine] = []
    for box, text, score in read_page(_get_engine(), image):
        text = (text or "").strip()
        if not text:
            continue
        ys = [point[1] for point in box]
        xs = [point[0] for point in box]
        lines.append(OcrLine(text, float(score), min(ys), max(ys), min(xs), max(xs)))
    lines.sort(key=lambda line: (round(line.top / 8), line.left))
    return lines


_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uf900-\ufaff\uff00-\uffef]")


def _join(left: str, right: str) -> str:
    if left.endswith("-") and right[:1].islower():
        return left[:-1] + right
    if _CJK.match(left[-1:]) and _CJK.match(right[:1]):
        return left + right  # no spaces between Chinese characters
    return f"{left} {right}"


def paragraphs(lines: list[OcrLine]) -> list[tuple[str, float, tuple[float, float, float, float]]]:
    """Lines grouped into paragraphs (a gap taller than half a line starts a new one), each with
    its character-weighted mean confidence and its box (left, top, right, bottom, in pixels)."""
    if not lines:
        return []
    height = statistics.median(line.bottom - line.top for line in lines) or 1.0
    groups: list[list[OcrLine]] = [[lines[0]]]
    for previous, line in itertools.pairwise(lines):
        if line.top - previous.bottom > 0.5 * height:
            groups.append([line])
        else:
            groups[-1].append(line)
    out = []
    for group in groups:
        text = group[0].text
        for line in group[1:]:
            text = _join(text, line.text)
        characters = sum(len(line.text) for line in group)
        box = (
            min(line.left for line in group),
            min(line.top for line in group),
            max(line.right for line in group),
            max(line.bottom for line in group),
        )
        out.append((text, sum(line.confidence * len(line.text) for line in group) / characters, box))
    return out


def page_elements(image: Image.Image, *, page_number: int, filename: str, filetype: str) -> list[Element]:
    """unstructured elements for one page image, tagged as OCR text."""
    from unstructured.documents.coordinates import PixelSpace
    from unstructured.documents.elements import CoordinatesMetadata, ElementMetadata
    from unstructured.partition.text import element_from_text

    elements: list[Element] = []
    for text, confidence, (left, top, right, bottom) in paragraphs(recognize(image)):
        element = element_from_text(text)
        coordinates = CoordinatesMetadata(
            points=((left, top), (left, bottom), (right, bottom), (right, top)),
            system=PixelSpace(width=image.width, height=image.height),
        )
        element.metadata = ElementMetadata(page_number=page_number, filename=filename, filetype=filetype, coordinates=coordinates)
        element.metadata.text_source = OCR
        element.metadata.ocr_confidence = round(confidence, 4)
        elements.append(element)
    return elements


def check_pixels(width: int, height: int, max_pixels: int, what: str) -> None:
    if width * height > max_pixels:
        raise DocumentInvalid(
            IMAGE_TOO_LARGE,
            f"{what} is {width}×{height} pixels ({width * height / 1e6:.0f} megapixels), more than the "  # noqa: RUF001 - a times sign
            f"{max_pixels / 1e6:.0f} megapixels allowed per page (a decompression bomb?)",
        )


# Image formats read by OCR, as Pillow names them, with their media types.
IMAGE_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "TIFF": "image/tiff", "WEBP": "image/webp"}


def partition_image(
    data: bytes, *, filename: str, max_pages: int, max_pixels: int, progress: Progress | None = None
) -> tuple[list[Element], int]:
    """Elements of an image file (each frame of a multi-page TIFF is a page) and its page count.

    The size of every frame is read from its header and checked before its pixels are decoded,
    so a small file that would expand to gigapixels is refused without being unpacked.
    """
    from PIL import Image, ImageSequence, UnidentifiedImageError

    if not data:
        raise DocumentInvalid(DOCUMENT_EMPTY, "the image file is empty (0 bytes)")
    # Our own check below is per page and says what happened; Pillow's global one would only warn.
    Image.MAX_IMAGE_PIXELS = None
    try:
        image = Image.open(io.BytesIO(data))
        kind = image.format or ""
        if kind not in IMAGE_FORMATS:
            raise DocumentInvalid(
                DOCUMENT_CORRUPT, f"the image format {kind or 'unknown'} is not supported; supported are PNG, JPEG, TIFF and WebP"
            )
        pages = getattr(image, "n_frames", 1)
        if pages > max_pages:
            raise DocumentInvalid(TOO_MANY_PAGES, f"the image has {pages} pages, more than the {max_pages} allowed")
        elements = []
        for page_number, frame in enumerate(ImageSequence.Iterator(image), start=1):
            check_pixels(frame.width, frame.height, max_pixels, f"page {page_number} of the image" if pages > 1 else "the image")
            frame.load()
            elements.extend(page_elements(frame, page_number=page_number, filename=filename, filetype=IMAGE_FORMATS[kind]))
            if progress is not None:
                progress(page_number, pages, "pages")
    except DocumentInvalid:
        raise
    except UnidentifiedImageError as exc:
        # Pillow's message names its own stream object ("<_io.BytesIO object at 0x…>").
        raise DocumentInvalid(
            DOCUMENT_CORRUPT, "the file is not an image that can be read (its content is damaged or of another kind)"
        ) from exc
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise DocumentInvalid(
            DOCUMENT_CORRUPT, f"the image is damaged and cannot be read ({type(exc).__name__}: {str(exc)[:200]})"
        ) from exc
    return elements, pages


def render_pdf_page(pdf: pypdfium2.PdfDocument, index: int, max_pixels: int) -> Image.Image:
    """Page `index` (from 0) of a pypdfium2 document as a Pillow image at RENDER_DPI, or lower
    when that would exceed `max_pixels` (a PDF page is vector: a huge one is read smaller)."""
    page = pdf[index]
    try:
        width, height = page.get_size()  # points
        scale = RENDER_DPI / 72
        pixels = width * scale * height * scale
        if pixels > max_pixels:
            scale *= (max_pixels / pixels) ** 0.5
        image: Image.Image = page.render(scale=scale, grayscale=True).to_pil()
        return image
    finally:
        page.close()


_USABLE = re.compile(r"\w")


def needs_ocr(page_text: str) -> bool:
    """A page whose text layer is missing, nearly empty or garbage (unmapped glyphs come out as
    "(cid:NN)" or U+FFFD) is read by OCR instead."""
    text = re.sub(r"\(cid:\d+\)", "\ufffd", page_text)
    usable = len(_USABLE.findall(text))
    if usable < 16:
        return True
    garbage = text.count("\ufffd") + sum(1 for c in text if "\ue000" <= c <= "\uf8ff")
    return garbage > usable * 0.3
