"""OCR of scanned PDFs and images: accuracy on clean renders, page numbers, mixed PDFs, limits.

Parsing is called in-process here (the sandbox's own tests cover the process); the end-to-end
tests at the bottom go through upload, the worker's sandbox, ingest-api and search.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest
from sluice.v1 import document_pb2 as D
from sluice.v1 import search_service_pb2 as S
from sluice_worker.domain import DOCUMENT_EMPTY, IMAGE_TOO_LARGE, ChunkingSettings, DocumentInvalid
from sluice_worker.parsing.chunking import chunk_elements
from sluice_worker.parsing.partition import ParseLimits, partition_document

from . import ocr_fixtures as fx
from .e2e import InProcessWorker, worker_settings

SETTINGS = ChunkingSettings(1500, 1000, 0)


def parse(data: bytes, filename: str, **limits):
    progress = []
    elements, summary = partition_document(data, filename, "", ParseLimits(**limits), lambda d, t, u: progress.append((d, t, u)))
    return elements, summary, progress


def page_text(elements, page: int) -> str:
    return " ".join(e.text for e in elements if e.metadata.page_number == page)


def test_clean_english_scan_is_read_with_a_low_character_error_rate():
    elements, summary, progress = parse(fx.scanned_pdf(fx.PAGE_ONE, fx.PAGE_TWO), "scan.pdf")
    assert summary.pages == 2
    assert progress[-1] == (2, 2, "pages")
    for page, lines in ((1, fx.PAGE_ONE), (2, fx.PAGE_TWO)):
        cer = fx.character_error_rate(" ".join(lines), page_text(elements, page))
        print(f"english scan page {page}: CER {cer:.2%}")
        assert cer < 0.05, page_text(elements, page)
    records = chunk_elements(elements, ChunkingSettings(120, 100, 0), 100)
    assert {r.text_source for r in records} == {"ocr"}
    assert all(0.8 < r.ocr_confidence <= 1.0 for r in records)
    assert {r.page_number for r in records} == {1, 2}


def test_clean_chinese_scan_is_read_with_a_low_character_error_rate():
    elements, _, _ = parse(fx.scanned_pdf(fx.CHINESE_PAGE, font=fx.cjk_font()), "扫描.pdf")
    text = page_text(elements, 1)
    # Lines of Chinese join without spaces (no spaces between Chinese characters).
    cer = fx.character_error_rate("".join(fx.CHINESE_PAGE), text.replace(" ", ""))
    print(f"chinese scan: CER {cer:.2%}")
    assert cer < 0.05, text
    assert " " not in text


def test_pages_whose_text_layer_is_missing_or_garbage_are_ocrd():
    from sluice_worker.parsing.ocr import needs_ocr

    assert needs_ocr("")
    assert needs_ocr("  3  ")  # a page number and nothing else: a scan with a stamped number
    assert needs_ocr("(cid:12)(cid:7)(cid:44)(cid:3) " * 20 + "ab")  # glyphs without a Unicode mapping
    assert needs_ocr("\ufffd" * 40 + " some words here and there")
    assert not needs_ocr(fx.TEXT_LAYER_PAGE)
    assert not needs_ocr("水闸把扫描的页面变成可以搜索的文字。港务长在星期二记录了四十二艘船只。")


def test_mixed_pdf_keeps_the_text_layer_and_ocrs_the_scanned_page():
    elements, summary, _ = parse(fx.mixed_pdf(), "mixed.pdf")
    assert summary.pages == 2
    assert page_text(elements, 1) == fx.TEXT_LAYER_PAGE
    assert {e.metadata.text_source for e in elements if e.metadata.page_number == 1} == {"text_layer"}
    assert {e.metadata.text_source for e in elements if e.metadata.page_number == 2} == {"ocr"}
    assert fx.character_error_rate(" ".join(fx.PAGE_ONE), page_text(elements, 2)) < 0.05
    # Chunks that hold text of both pages say so.
    records = chunk_elements(elements, SETTINGS, 100)
    assert records[0].page_number == 1
    assert {r.text_source for r in records} <= {"text_layer", "ocr", "mixed"}
    assert any(r.ocr_confidence for r in records)


@pytest.mark.parametrize("fmt,options", [("PNG", {}), ("WEBP", {"lossless": True}), ("JPEG", {"quality": 90})])
def test_single_images_are_read(fmt, options):
    data = fx.image_bytes(fx.render_page(fx.PAGE_TWO, size=(1654, 600)), fmt, **options)
    elements, summary, _ = parse(data, f"page.{fmt.lower()}")
    assert summary.pages == 1
    assert fx.character_error_rate(" ".join(fx.PAGE_TWO), page_text(elements, 1)) < 0.05


def test_multipage_tiff_pages_keep_their_numbers():
    elements, summary, progress = parse(fx.multipage_tiff(fx.PAGE_ONE, fx.PAGE_TWO), "fax.tiff")
    assert summary.pages == 2 and progress[-1] == (2, 2, "pages")
    assert "forty-two vessels" in page_text(elements, 1)
    assert "lighthouse keeper" in page_text(elements, 2)


def test_photographed_page_rotated_and_noisy_is_still_read():
    data = fx.image_bytes(fx.render_page(fx.PAGE_ONE, rotate=3, noise=True), "JPEG", quality=70)
    elements, _, _ = parse(data, "photo.jpg")
    cer = fx.character_error_rate(" ".join(fx.PAGE_ONE), page_text(elements, 1))
    print(f"photographed page: CER {cer:.2%}")
    assert cer < 0.10


def test_pixel_bomb_is_refused_before_decoding():
    bomb = fx.pixel_bomb_png()
    assert len(bomb) < 200
    with pytest.raises(DocumentInvalid) as failure:
        parse(bomb, "bomb.png")
    assert failure.value.code == IMAGE_TOO_LARGE
    assert "60000×60000 pixels" in failure.value.message and "decompression bomb" in failure.value.message  # noqa: RUF001 - a times sign


def test_too_many_image_pages_is_refused():
    with pytest.raises(DocumentInvalid) as failure:
        parse(fx.multipage_tiff(fx.PAGE_TWO, fx.PAGE_TWO), "fax.tiff", max_pages=1)
    assert failure.value.code == "TOO_MANY_PAGES"


def test_empty_image_file_fails_clearly():
    with pytest.raises(DocumentInvalid) as failure:
        parse(b"", "photo.png")
    assert failure.value.code == DOCUMENT_EMPTY
    assert "empty" in failure.value.message


# --------------------------------------------------------------------------- end to end


async def test_e2e_scans_and_images_reach_ready_and_are_found_in_every_search_mode(ingest_api, docs, sandbox_pool, search):
    await docs.create_collection("scans", max_characters=400, new_after=300)
    files = {
        "scan.pdf": fx.scanned_pdf(fx.PAGE_ONE),
        "扫描.pdf": fx.scanned_pdf(fx.CHINESE_PAGE, font=fx.cjk_font()),
        "mixed.pdf": fx.mixed_pdf(),
        "fax.tiff": fx.multipage_tiff(fx.PAGE_TWO, fx.PAGE_TWO[:1]),
        "note.webp": fx.image_bytes(fx.render_page(fx.PAGE_TWO, size=(1654, 400)), "WEBP", lossless=True),
    }
    uploaded = {name: await docs.upload("scans", name, data) for name, data in files.items()}
    subscribed = asyncio.Event()
    progress = asyncio.create_task(docs.watch(uploaded["fax.tiff"].id, subscribed))
    await asyncio.wait_for(subscribed.wait(), 30)
    async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool):
        finished = {d.filename: d for d in await docs.wait_all([d.id for d in uploaded.values()])}
        events = await asyncio.wait_for(progress, 30)
    for name, document in finished.items():
        assert D.DocumentStatus.Name(document.status) == "DOCUMENT_STATUS_READY", (name, document.error_message)
    # PARSING reported page by page for the two-page TIFF.
    parsing = [(e.progress.done, e.progress.total) for e in events if e.status == D.DOCUMENT_STATUS_PARSING and e.progress.total]
    assert (2, 2) in parsing, parsing

    for mode in (S.SEARCH_MODE_VECTOR, S.SEARCH_MODE_KEYWORD, S.SEARCH_MODE_HYBRID):
        response = await search.Search(
            S.SearchRequest(collection="scans", query="harbour master recorded forty-two vessels", mode=mode, top_k=3)
        )
        assert response.hits, S.SearchMode.Name(mode)
        # The sentence is on the scan and on the mixed PDF's scanned page: those two lead.
        assert {h.filename for h in response.hits[:2]} == {"scan.pdf", "mixed.pdf"}, (S.SearchMode.Name(mode), response.hits)
        scan = next(h for h in response.hits if h.filename == "scan.pdf")
        assert "forty-two vessels" in scan.text and scan.page_number == 1
        assert scan.text_source == "ocr" and 0.8 < scan.ocr_confidence <= 1.0
    for mode in (S.SEARCH_MODE_VECTOR, S.SEARCH_MODE_KEYWORD, S.SEARCH_MODE_HYBRID):
        response = await search.Search(S.SearchRequest(collection="scans", query="港务长记录了四十二艘船只", mode=mode, top_k=3))
        assert response.hits and response.hits[0].filename == "扫描.pdf", (S.SearchMode.Name(mode), response.hits)
        assert "四十二艘船只" in response.hits[0].text and response.hits[0].text_source == "ocr"
    response = await search.Search(
        S.SearchRequest(collection="scans", query="canal locks and sluice gates", mode=S.SEARCH_MODE_KEYWORD, top_k=3)
    )
    assert response.hits[0].filename == "mixed.pdf" and response.hits[0].page_number == 1
    # The short text-layer page shares its chunk with the start of the scanned page.
    assert response.hits[0].text_source == "mixed" and response.hits[0].ocr_confidence > 0.8


async def test_e2e_pixel_bomb_and_empty_image_fail_clearly_and_the_worker_keeps_serving(ingest_api, docs, sandbox_pool):
    await docs.create_collection("bad-images")
    bomb = await docs.upload("bad-images", "bomb.png", fx.pixel_bomb_png())
    # An image of 0 bytes is refused at upload already, with the reason; the worker's own check
    # (test_empty_image_file_fails_clearly) is the second line.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await docs.upload("bad-images", "empty.png", b"")
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "empty" in refused.value.details()
    async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool):
        bomb = await docs.wait(bomb.id)
        good = await docs.upload("bad-images", "after.png", fx.image_bytes(fx.render_page(fx.PAGE_TWO, size=(1654, 400)), "PNG"))
        good = await docs.wait(good.id)
    assert bomb.status == D.DOCUMENT_STATUS_FAILED and bomb.error_code == "IMAGE_TOO_LARGE"
    assert "60000×60000 pixels" in bomb.error_message and "decompression bomb" in bomb.error_message  # noqa: RUF001 - a times sign
    assert good.status == D.DOCUMENT_STATUS_READY, good.error_message


async def test_e2e_ocr_past_the_parse_time_limit_fails_the_document_not_the_worker(ingest_api, docs, sandbox_pool):
    await docs.create_collection("slow-scans")
    slow = await docs.upload("slow-scans", "long-scan.pdf", fx.scanned_pdf(*[fx.PAGE_ONE] * 8))
    async with InProcessWorker(worker_settings(ingest_api.address, parse_timeout_seconds=2.0), sandbox_pool):
        slow = await docs.wait(slow.id)
        after = await docs.upload("slow-scans", "after.txt", b"The worker still parses documents after a timeout.")
        after = await docs.wait(after.id)
    assert slow.status == D.DOCUMENT_STATUS_FAILED and slow.error_code == "PARSE_TIMEOUT", slow.error_message
    assert "2 seconds" in slow.error_message
    assert after.status == D.DOCUMENT_STATUS_READY, after.error_message
