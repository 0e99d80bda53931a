"""Parsing and chunking of real files, in the real sandbox (a separate process with limits)."""

from __future__ import annotations

import io
import itertools
import re
import struct
import zlib

import pytest
from sluice_worker.domain import ChunkingSettings, DocumentInvalid
from sluice_worker.parsing.chunking import pack_sentences, split_sentences
from sluice_worker.parsing.sandbox import Sandbox

LIMITS = {"max_pages": 2000, "max_unzipped_bytes": 100 * 1024 * 1024}
DEFAULT = ChunkingSettings(1500, 1000, 0)


async def parse_and_chunk(pool, data: bytes, filename: str, chunking: ChunkingSettings = DEFAULT, limits=LIMITS, mime_type=""):
    progress = []

    async def on_progress(done, total, unit):
        progress.append((done, total, unit))

    async with pool.session() as box:
        summary = await box.parse(data, filename, mime_type, limits, timeout=60, progress=on_progress)
        chunks = await box.chunk(chunking, 10_000, timeout=60)
    return summary, chunks, progress


def fixture(documents_dir, name: str) -> bytes:
    return (documents_dir / name).read_bytes()


async def test_pdf_keeps_pages_and_reports_page_progress(sandbox_pool, documents_dir):
    summary, chunks, progress = await parse_and_chunk(
        sandbox_pool, fixture(documents_dir, "report.pdf"), "report.pdf", ChunkingSettings(300, 250, 0)
    )
    assert summary.pages == 3
    assert [c.page_number for c in chunks] == sorted(c.page_number for c in chunks)
    assert {c.page_number for c in chunks} == {1, 2, 3}
    first = chunks[0]
    assert first.text.startswith("Sluice Quarterly Report")
    assert first.section_title == "Sluice Quarterly Report"
    assert first.element_type == "NarrativeText"
    page2 = next(c for c in chunks if c.page_number == 2)
    assert page2.section_title == "Throughput and Latency"
    assert progress[-1] == (3, 3, "pages")
    assert all(len(c.text) <= 300 for c in chunks)


async def test_docx_keeps_tables_as_tables(sandbox_pool, documents_dir):
    _, chunks, _ = await parse_and_chunk(sandbox_pool, fixture(documents_dir, "handbook.docx"), "handbook.docx")
    tables = [c for c in chunks if c.element_type == "Table"]
    assert len(tables) == 1
    assert "Vacation" in tables[0].text and "<table>" in tables[0].text_as_html and "<td>25</td>" in tables[0].text_as_html
    assert chunks[0].text.startswith("Employee Handbook")
    assert any("Never share your password" in c.text and c.section_title == "Security" for c in chunks)


async def test_pptx_has_slide_numbers(sandbox_pool, documents_dir):
    summary, chunks, _ = await parse_and_chunk(sandbox_pool, fixture(documents_dir, "architecture.pptx"), "architecture.pptx")
    assert summary.pages == 3
    assert chunks[0].page_number == 1 and "Sluice Architecture" in chunks[0].text
    table = next(c for c in chunks if c.element_type == "Table")
    assert table.page_number == 3 and "Documents per second" in table.text


async def test_html(sandbox_pool, documents_dir):
    _, chunks, _ = await parse_and_chunk(sandbox_pool, fixture(documents_dir, "retrieval.html"), "retrieval.html")
    assert chunks[0].text.startswith("Retrieval Basics")
    assert any(c.element_type == "Table" and "By title" in c.text for c in chunks)
    assert not any("<p>" in c.text for c in chunks)


async def test_markdown(sandbox_pool, documents_dir):
    _, chunks, _ = await parse_and_chunk(sandbox_pool, fixture(documents_dir, "operations.md"), "operations.md")
    assert chunks[0].text.startswith("Operations Guide")
    assert any(c.element_type == "Table" and "Upload size" in c.text for c in chunks)


async def test_email_includes_subject_and_body(sandbox_pool, documents_dir):
    _, chunks, _ = await parse_and_chunk(sandbox_pool, fixture(documents_dir, "status.eml"), "status.eml")
    text = "\n".join(c.text for c in chunks)
    assert text.startswith("Weekly ingestion status")
    assert "without a permanent failure" in text


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("minutes-latin1.txt", "La réunion a commencé à neuf heures."),
        ("notes-utf16.txt", "La réunion a commencé à neuf heures."),
        ("minutes-gb18030.txt", "本次会议讨论了系统的性能问题。"),
        ("overview-shift_jis.txt", "この文書は検索システムの仕組みを説明します。"),
    ],
)
async def test_plain_text_in_any_encoding(sandbox_pool, documents_dir, name, expected):
    _, chunks, _ = await parse_and_chunk(sandbox_pool, fixture(documents_dir, name), name)
    assert expected in "".join(c.text for c in chunks)


async def test_chinese_markdown_chunks_on_sentence_boundaries(sandbox_pool, documents_dir):
    settings = ChunkingSettings(max_characters=60, new_after_n_chars=50, overlap=0)
    _, chunks, _ = await parse_and_chunk(sandbox_pool, fixture(documents_dir, "chinese.md"), "chinese.md", settings)
    body = [c for c in chunks if c.element_type != "Title"]
    assert len(body) >= 6
    for chunk in chunks:
        assert len(chunk.text) <= 60
        # Every chunk ends a sentence (or is a heading).
        assert (
            chunk.text.endswith(("。", "！", "？"))  # noqa: RUF001 - CJK punctuation, meant
            or chunk.element_type == "Title"
            or ("\n\n" not in chunk.text and len(chunk.text) < 20)
        )
    # Nothing lost, nothing duplicated without overlap.
    joined = "".join(re.sub(r"\s", "", c.text) for c in chunks)
    source = fixture(documents_dir, "chinese.md").decode()
    for sentence in re.findall(r"[^。！？\n#]+[。！？]", source):  # noqa: RUF001 - CJK punctuation, meant
        assert joined.count(sentence.strip()) == 1
    assert {c.section_title for c in chunks} >= {"文档检索系统简介", "分块策略", "失败处理"}


async def test_chinese_overlap_repeats_whole_sentences(sandbox_pool, documents_dir):
    settings = ChunkingSettings(max_characters=80, new_after_n_chars=60, overlap=40)
    _, chunks, _ = await parse_and_chunk(sandbox_pool, fixture(documents_dir, "chinese.md"), "chinese.md", settings)
    for previous, current in itertools.pairwise(chunks):
        if previous.section_title == current.section_title and previous.element_type == current.element_type == "Text":
            head = re.split(r"(?<=[。！？])", current.text)[0]  # noqa: RUF001 - CJK punctuation, meant
            if head in previous.text:  # overlap present: it is a whole sentence of the previous chunk
                assert previous.text.endswith(head) or head + "" in previous.text


def test_sentence_packing_is_bounded_and_lossless():
    text = "第一句话很短。第二句话稍微长一点点！第三句是问题吗？" * 5  # noqa: RUF001 - CJK punctuation, meant
    sentences = split_sentences(text)
    assert "".join(sentences) == text
    pieces = pack_sentences(sentences, 30, 25, 0)
    assert all(len(p) <= 30 for p in pieces)
    assert "".join(pieces) == text
    assert all(p.endswith(("。", "！", "？")) for p in pieces)  # noqa: RUF001 - CJK punctuation, meant
    overlapped = pack_sentences(sentences, 30, 25, 10)
    assert all(len(p) <= 30 for p in overlapped)
    assert overlapped[1].startswith(pieces[0][-7:]) or overlapped[1].startswith("第")


def test_english_sentences_split_after_punctuation_only():
    sentences = split_sentences("Pi is 3.14 today. Is it? Yes! Done")
    assert sentences == ["Pi is 3.14 today. ", "Is it? ", "Yes! ", "Done"]


@pytest.mark.parametrize(
    ("name", "code", "words"),
    [
        ("truncated.pdf", "DOCUMENT_CORRUPT", "incomplete"),
        ("random.pdf", "DOCUMENT_CORRUPT", "not a valid PDF"),
        ("encrypted.pdf", "PDF_ENCRYPTED", "password"),
        ("not-a-zip.docx", "DOCUMENT_CORRUPT", "not a valid Word"),
        ("blank.txt", "DOCUMENT_EMPTY", "no text"),
        ("no-text.pdf", "DOCUMENT_EMPTY", "no text"),
    ],
)
async def test_malformed_files_fail_with_a_readable_reason(sandbox_pool, documents_dir, name, code, words):
    with pytest.raises(DocumentInvalid) as caught:
        await parse_and_chunk(sandbox_pool, fixture(documents_dir, "malformed/" + name), name)
    assert caught.value.code == code
    assert words in caught.value.message
    assert "Traceback" not in caught.value.message


async def test_unsupported_type(sandbox_pool):
    with pytest.raises(DocumentInvalid) as caught:
        await parse_and_chunk(sandbox_pool, bytes(range(256)) * 8, "photo.bin")
    assert caught.value.code == "UNSUPPORTED_TYPE"


def docx_bomb(expanded_bytes: int) -> bytes:
    """A real DOCX whose document.xml expands from a few hundred KB to `expanded_bytes`.

    Built without deflating `expanded_bytes` (at level 9 that took 6 to 27 s for a few hundred
    MB on a loaded machine): one megabyte of "a" is deflated once, closed with a full flush so
    that it stands alone, and that piece of the stream is repeated; the CRC runs over the same
    megabyte repeated. The archive is written by hand (plain zip: every size is below 4 GiB)."""
    head = b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>'
    tail = b"</w:t></w:r></w:p></w:body></w:document>"
    block = b"a" * (1024 * 1024)
    count = expanded_bytes // len(block)

    def deflated(data: bytes, mode: int) -> bytes:
        compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
        return compressor.compress(data) + compressor.flush(mode)

    crc = zlib.crc32(head)
    for _ in range(count):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    stream = deflated(head, zlib.Z_FULL_FLUSH) + deflated(block, zlib.Z_FULL_FLUSH) * count + deflated(tail, zlib.Z_FINISH)
    content_types = (
        b'<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        b'<Default Extension="xml" ContentType="application/xml"/>'
        b'<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
        b"</Types>"
    )
    relationships = (
        b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        b'<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>'
        b"</Relationships>"
    )
    entries = [
        ("[Content_Types].xml", deflated(content_types, zlib.Z_FINISH), zlib.crc32(content_types), len(content_types)),
        ("_rels/.rels", deflated(relationships, zlib.Z_FINISH), zlib.crc32(relationships), len(relationships)),
        ("word/document.xml", stream, crc, len(head) + count * len(block) + len(tail)),
    ]
    out, directory = io.BytesIO(), io.BytesIO()
    for name, data, checksum, size in entries:
        encoded = name.encode()
        offset = out.tell()
        # local header: version 2.0, no flags, deflate, 1980-01-01 00:00
        out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 33, checksum, len(data), size, len(encoded), 0))
        out.write(encoded + data)
        directory.write(
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                20,
                20,
                0,
                8,
                0,
                33,
                checksum,
                len(data),
                size,
                len(encoded),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
        )
        directory.write(encoded)
    start = out.tell()
    out.write(directory.getvalue())
    out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries), len(directory.getvalue()), start, 0))
    return out.getvalue()


async def test_decompression_bomb_is_refused_before_unpacking(sandbox_pool):
    bomb = docx_bomb(200 * 1024 * 1024)
    assert len(bomb) < 1024 * 1024
    with pytest.raises(DocumentInvalid) as caught:
        await parse_and_chunk(sandbox_pool, bomb, "bomb.docx")
    assert caught.value.code == "DOCUMENT_TOO_LARGE"
    assert "decompression bomb" in caught.value.message


async def test_bomb_past_the_check_hits_the_memory_limit_not_the_worker():
    """With the size check disabled, the real parser unpacks the bomb and meets RLIMIT_AS."""
    from sluice_worker.parsing.sandbox import SandboxPool

    pool = SandboxPool(1, memory_limit_mb=900, max_documents=10)
    bomb = docx_bomb(400 * 1024 * 1024)
    limits = {"max_pages": 2000, "max_unzipped_bytes": 10**12}
    try:
        with pytest.raises(DocumentInvalid) as caught:
            await parse_and_chunk(pool, bomb, "bomb.docx", limits=limits)
        assert caught.value.code in ("PARSE_MEMORY_LIMIT", "PARSER_CRASHED")
        assert "memory" in caught.value.message or "too large" in caught.value.message
        # The pool replaces the dead sandbox and goes on parsing.
        _, chunks, _ = await parse_and_chunk(pool, b"Still alive. Parsing goes on.", "after.txt")
        assert chunks[0].text == "Still alive. Parsing goes on."
    finally:
        await pool.close()


async def test_memory_limit_is_enforced_in_the_sandbox():
    box = Sandbox(memory_limit_mb=256, target="limits-only")
    try:
        await box.wait_ready(60)
        with pytest.raises(DocumentInvalid) as caught:
            await box.call("builtins.bytearray", 512 * 1024 * 1024, timeout=30)
        assert caught.value.code == "PARSE_MEMORY_LIMIT"
        assert "256 MB" in caught.value.message
    finally:
        box.kill()


async def test_a_hanging_parse_is_stopped_at_the_time_limit():
    box = Sandbox(memory_limit_mb=256, target="limits-only")
    try:
        await box.wait_ready(60)
        with pytest.raises(DocumentInvalid) as caught:
            await box.call("time.sleep", 30, timeout=0.5)
        assert caught.value.code == "PARSE_TIMEOUT"
        assert "0.5 seconds" in caught.value.message
        assert box.process.exitcode is not None  # killed, not left running
    finally:
        box.kill()
