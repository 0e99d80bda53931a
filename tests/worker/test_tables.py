"""Tables kept whole: DOCX, HTML, PPTX, XLSX and CSV tables become chunks of their own, split only
between rows, the header repeated in every part, Markdown in the text and HTML beside it."""

from __future__ import annotations

import asyncio
import io

import auth_keys
import pytest
from sluice.v1 import document_pb2 as D
from sluice.v1 import search_service_pb2 as S
from sluice.v1 import search_service_pb2_grpc
from sluice_worker.domain import ChunkingSettings
from sluice_worker.parsing.chunking import chunk_elements
from sluice_worker.parsing.partition import ParseLimits, partition_document
from sluice_worker.parsing.tables import split_table

from .e2e import Docs, InProcessWorker, worker_settings

HEADER = ["Vessel", "Harbour", "Tonnage"]
ROWS = [[f"V{r:02d}A", f"H{r:02d}B", f"T{r:02d}C"] for r in range(40)]
BEFORE = "The harbour register lists every vessel that moored during the season."
AFTER = "The register was closed at the end of October."
SETTINGS = ChunkingSettings(300, 250, 0)


def docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Harbour register", level=1)
    document.add_paragraph(BEFORE)
    table = document.add_table(rows=0, cols=3)
    for row in [HEADER, *ROWS]:
        cells = table.add_row().cells
        for cell, value in zip(cells, row):
            cell.text = value
    document.add_paragraph(AFTER)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def html_bytes() -> bytes:
    head = "".join(f"<th>{c}</th>" for c in HEADER)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in ROWS)
    return (
        f"<html><body><h1>Harbour register</h1><p>{BEFORE}</p><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table><p>{AFTER}</p></body></html>"
    ).encode()


def xlsx_bytes() -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Register"
    for row in [HEADER, *ROWS]:
        sheet.append(row)
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def pptx_bytes() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    presentation = Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "Harbour register"
    shape = slide.shapes.add_table(len(ROWS) + 1, len(HEADER), Inches(0.5), Inches(1.5), Inches(9), Inches(5))
    for r, row in enumerate([HEADER, *ROWS]):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def csv_bytes() -> bytes:
    return "\n".join(",".join(row) for row in [HEADER, *ROWS]).encode() + b"\n"


FILES = {
    "register.docx": docx_bytes,
    "register.html": html_bytes,
    "register.pptx": pptx_bytes,
    "register.xlsx": xlsx_bytes,
    "register.csv": csv_bytes,
}


def table_chunks(name: str):
    elements, _ = partition_document(FILES[name](), name, "", ParseLimits())
    records = chunk_elements(elements, SETTINGS, 1000)
    return records, [r for r in records if r.element_type == "Table"]


@pytest.mark.parametrize("name", list(FILES))
def test_tables_are_split_between_rows_with_the_header_repeated(name):
    records, tables = table_chunks(name)
    assert len(tables) > 1, [r.text for r in records]  # 40 rows do not fit in 300 characters
    header_line = "| " + " | ".join(HEADER) + " |"
    for part in tables:
        lines = part.text.splitlines()
        assert lines[0] == header_line and set(lines[1].replace("|", "").split()) == {"---"}, part.text
        assert "<table>" in part.text_as_html and all(h in part.text_as_html for h in HEADER)
        # Only table text in a table chunk.
        assert BEFORE not in part.text and AFTER not in part.text
    # Every cell is in exactly one chunk's table text, and every row whole in one line.
    for row in ROWS:
        line = "| " + " | ".join(row) + " |"
        holders = [part for part in tables if line in part.text.splitlines()]
        assert len(holders) == 1, (row, [p.text for p in holders])
        for cell in row:
            assert sum(part.text.count(cell) for part in tables) == 1
            assert sum(part.text_as_html.count(f">{cell}<") for part in tables) == 1
    # The parts keep the table's order.
    order = [line for part in tables for line in part.text.splitlines()[2:]]
    assert order == ["| " + " | ".join(row) + " |" for row in ROWS]


@pytest.mark.parametrize("name", ["register.docx", "register.html"])
def test_text_around_a_table_stays_in_text_chunks_in_document_order(name):
    records, _ = table_chunks(name)
    kinds = [r.element_type == "Table" for r in records]
    first_table, last_table = kinds.index(True), len(kinds) - 1 - kinds[::-1].index(True)
    assert all(kinds[first_table : last_table + 1])
    assert BEFORE in " ".join(r.text for r in records[:first_table])
    assert AFTER in " ".join(r.text for r in records[last_table + 1 :])
    assert all(r.section_title == "Harbour register" for r in records[first_table : last_table + 1])
    assert [r.index for r in records] == list(range(len(records)))


def test_a_row_longer_than_the_limit_stays_whole():
    long_cell = "word " * 100
    html = f"<table><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>{long_cell}</td></tr><tr><td>2</td><td>x</td></tr></table>"
    parts = split_table(html, "", 100)
    assert len(parts) == 2
    assert long_cell.strip() in parts[0].text and parts[1].text.splitlines()[-1] == "| 2 | x |"


def test_pipes_in_cells_are_escaped():
    parts = split_table("<table><tr><th>a|b</th></tr><tr><td>c</td></tr></table>", "", 1000)
    assert parts[0].text.splitlines()[0] == "| a\\|b |"


# --------------------------------------------------------------------------- end to end


async def test_e2e_spreadsheet_tables_are_indexed_and_hits_carry_their_html(ingest_api, sandbox_pool, database_url):
    from search_server import RunningSearch

    docs = Docs(ingest_api.address)
    await docs.create_collection("tables", max_characters=300, new_after=250)
    uploaded = [await docs.upload("tables", name, FILES[name]()) for name in ("register.xlsx", "register.csv")]
    async with InProcessWorker(worker_settings(ingest_api.address), sandbox_pool):
        finished = await docs.wait_all([d.id for d in uploaded])
    await docs.close()
    for document in finished:
        assert document.status == D.DOCUMENT_STATUS_READY, (document.filename, document.error_message)
    server = RunningSearch(database_url)
    channel = auth_keys.aio_channel(server.address)
    try:
        stub = search_service_pb2_grpc.SearchServiceStub(channel)
        response = await stub.Search(S.SearchRequest(collection="tables", query="H17B", mode=S.SEARCH_MODE_KEYWORD, top_k=5))
        assert {h.filename for h in response.hits} == {"register.xlsx", "register.csv"}
        for hit in response.hits:
            assert hit.element_type == "Table" and "| V17A | H17B | T17C |" in hit.text
            assert "<table>" in hit.text_as_html and ">H17B<" in hit.text_as_html
            assert hit.text_source == "text_layer"
    finally:
        await channel.close()
        server.stop()
    await asyncio.sleep(0)
