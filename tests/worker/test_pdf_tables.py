"""Tables in text-layer PDFs are kept whole too: a ruled table (drawn cell borders) found by
pdfplumber becomes a Table element, then chunks of its own split between rows with the header
repeated, and its cells leave the running text."""

from __future__ import annotations

import zlib

from sluice_worker.domain import ChunkingSettings
from sluice_worker.parsing.chunking import chunk_elements
from sluice_worker.parsing.partition import ParseLimits, partition_document

HEADER = ["Vessel", "Harbour", "Tonnage"]
ROWS = [[f"V{r:02d}A", f"H{r:02d}B", f"T{r:02d}C"] for r in range(30)]
BEFORE = "The harbour register lists every vessel that moored during the season."
AFTER = "The register was closed at the end of October."


def ruled_table_pdf() -> bytes:
    """One A4-ish page: a sentence, a 3-column table with every cell outlined, a sentence."""
    ops = ["BT", f"/F1 11 Tf 1 0 0 1 72 760 Tm ({BEFORE}) Tj", "ET"]
    top, height, widths, x0 = 730, 16, [150, 150, 150], 72
    for r, row in enumerate([HEADER, *ROWS]):
        y = top - (r + 1) * height
        x = x0
        for c, cell in enumerate(row):
            ops.append(f"{x} {y} {widths[c]} {height} re S")
            ops += ["BT", f"/F1 10 Tf 1 0 0 1 {x + 4} {y + 4} Tm ({cell}) Tj", "ET"]
            x += widths[c]
    bottom = top - (len(ROWS) + 1) * height
    ops += ["BT", f"/F1 11 Tf 1 0 0 1 72 {bottom - 30} Tm ({AFTER}) Tj", "ET"]
    stream = zlib.compress("\n".join(ops).encode())
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_a_ruled_pdf_table_is_split_between_rows_with_the_header_repeated():
    elements, summary = partition_document(ruled_table_pdf(), "register.pdf", "application/pdf", ParseLimits())
    assert summary.pages == 1
    records = chunk_elements(elements, ChunkingSettings(300, 250, 0), 1000)
    tables = [r for r in records if r.element_type == "Table"]
    assert len(tables) > 1, [r.text for r in records]  # 30 rows do not fit in 300 characters
    header_line = "| " + " | ".join(HEADER) + " |"
    for part in tables:
        assert part.text.splitlines()[0] == header_line, part.text
        assert part.page_number == 1 and "<table>" in part.text_as_html
        assert BEFORE not in part.text and AFTER not in part.text
    for row in ROWS:
        line = "| " + " | ".join(row) + " |"
        assert sum(line in part.text.splitlines() for part in tables) == 1, row
        for cell in row:  # a cell is in the table, never also in the running text
            assert sum(r.text.count(cell) for r in records) == 1, cell
    text = " ".join(r.text for r in records if r.element_type != "Table")
    assert BEFORE in text and AFTER in text


def test_a_pdf_without_ruled_tables_reads_as_before():
    from pathlib import Path

    report = (Path(__file__).resolve().parents[1] / "fixtures" / "documents" / "report.pdf").read_bytes()
    elements, _ = partition_document(report, "report.pdf", "application/pdf", ParseLimits())
    assert elements and not any(type(e).__name__ == "Table" for e in elements)
