"""Chunks keep where their elements lie on the page: PDF text boxes and tables (pdfminer's
points), OCR paragraphs (pixels), as fractions of the page from its top-left corner; formats
without pages have none. Parsing runs in-process here, and once through the real sandbox."""

from __future__ import annotations

import pytest
from sluice.v1 import document_pb2
from sluice_worker.domain import ChunkingSettings, ChunkRecord
from sluice_worker.jobs_client import chunk_from_proto, chunk_to_proto
from sluice_worker.parsing.chunking import chunk_elements, element_box
from sluice_worker.parsing.partition import ParseLimits, partition_document

from . import ocr_fixtures as fx
from .test_parsing import fixture, parse_and_chunk

SETTINGS = ChunkingSettings(1500, 1000, 0)


def chunks_of(data: bytes, filename: str, settings: ChunkingSettings = SETTINGS) -> list[ChunkRecord]:
    elements, _ = partition_document(data, filename, "", ParseLimits(), lambda d, t, u: None)
    return chunk_elements(elements, settings, 10_000)


def check_box(box: dict) -> None:
    assert set(box) == {"page", "left", "top", "right", "bottom"}
    assert box["page"] >= 1
    assert 0.0 <= box["left"] <= box["right"] <= 1.0 and 0.0 <= box["top"] <= box["bottom"] <= 1.0


def test_text_layer_pdf_boxes_are_where_the_text_is():
    # Helvetica 14 pt at (72, 760) on a 595 x 842 pt page, origin at the bottom left.
    (chunk,) = chunks_of(fx.text_layer_pdf_page("Quarterly throughput rose by forty percent"), "one.pdf")
    (box,) = chunk.boxes
    check_box(box)
    assert box["page"] == 1
    assert box["left"] == pytest.approx(72 / 595, abs=0.01)
    assert box["top"] == pytest.approx(1 - 774 / 842, abs=0.02) and box["bottom"] == pytest.approx(1 - 760 / 842, abs=0.02)
    assert box["right"] > box["left"] + 0.2


def test_ocr_paragraph_boxes_are_in_pixels_of_the_image():
    image = fx.render_page(fx.PAGE_TWO, size=(1654, 600))  # lines from x = 150, y = 150
    chunks = chunks_of(fx.image_bytes(image, "PNG"), "page.png")
    boxes = [box for chunk in chunks for box in chunk.boxes]
    assert boxes
    for box in boxes:
        check_box(box)
    first = boxes[0]
    assert first["left"] == pytest.approx(150 / 1654, abs=0.02)
    assert first["top"] == pytest.approx(150 / 600, abs=0.04)


async def test_every_pdf_chunk_has_boxes_on_its_pages_through_the_sandbox(sandbox_pool, documents_dir):
    _, chunks, _ = await parse_and_chunk(
        sandbox_pool, fixture(documents_dir, "report.pdf"), "report.pdf", ChunkingSettings(300, 250, 0)
    )
    for chunk in chunks:
        assert chunk.boxes, chunk
        for box in chunk.boxes:
            check_box(box)
        assert min(box["page"] for box in chunk.boxes) == chunk.page_number
    assert chunks[0].boxes[0]["top"] < 0.3  # the title opens the first page


async def test_formats_without_pages_have_no_boxes(sandbox_pool, documents_dir):
    for name in ("handbook.docx", "operations.md", "retrieval.html"):
        _, chunks, _ = await parse_and_chunk(sandbox_pool, fixture(documents_dir, name), name)
        assert chunks and all(chunk.boxes == [] for chunk in chunks), name


def test_boxes_travel_through_the_job_protocol():
    record = ChunkRecord(
        index=0, text="t", page_number=2, boxes=[{"page": 2, "left": 0.1, "top": 0.2, "right": 0.3, "bottom": 0.45}]
    )
    message = chunk_to_proto(record)
    assert message.boxes[0] == document_pb2.BoundingBox(page_number=2, left=0.1, top=0.2, right=0.3, bottom=0.45)
    assert chunk_from_proto(message).boxes == record.boxes


def test_element_box_reads_both_orientations():
    from unstructured.documents.coordinates import PixelSpace, PointSpace
    from unstructured.documents.elements import CoordinatesMetadata, ElementMetadata, NarrativeText

    def element(points, system):
        e = NarrativeText(text="x")
        e.metadata = ElementMetadata(page_number=3, coordinates=CoordinatesMetadata(points=points, system=system))
        return e

    screen = element(((10, 20), (10, 40), (50, 40), (50, 20)), PixelSpace(width=100, height=200))
    assert element_box(screen) == {"page": 3, "left": 0.1, "top": 0.1, "right": 0.5, "bottom": 0.2}
    cartesian = element(((10, 180), (10, 160), (50, 160), (50, 180)), PointSpace(width=100, height=200))
    assert element_box(cartesian) == {"page": 3, "left": 0.1, "top": 0.1, "right": 0.5, "bottom": 0.2}
    bare = NarrativeText(text="x")
    bare.metadata = ElementMetadata(page_number=1)
    assert element_box(bare) is None
