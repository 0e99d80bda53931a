"""Tables kept whole: a table is its own chunk (or chunks), never cut in the middle of a row.

unstructured gives a Table element its text as all cells run together and its structure as
`metadata.text_as_html`. Here that HTML is read back into rows, and the chunk text becomes a
Markdown table (readable, and what an embedding model and a keyword index see); the HTML of
the part is kept for the hit. A table longer than the chunk limit is split between rows, the
header row repeated at the top of every part. A single row longer than the limit stays whole
(a chunk over the limit beats a row cut in two).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lxml.html import HtmlElement

_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class TablePart:
    text: str  # Markdown
    html: str


def _cell_text(cell: HtmlElement) -> str:
    return _SPACES.sub(" ", cell.text_content()).strip()


def _rows(table_html: str) -> list[HtmlElement]:
    """The <tr> elements of the first table in `table_html`, in order."""
    from lxml import html as lxml_html

    try:
        root = lxml_html.fromstring(table_html)
    except Exception:  # unreadable HTML: the caller keeps the element's text
        return []
    return [row for row in root.iter("tr") if row.xpath("./td|./th")]


def _markdown_row(cells: list[str], width: int) -> str:
    cells = cells + [""] * (width - len(cells))
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def split_table(table_html: str, fallback_text: str, max_characters: int) -> list[TablePart]:
    """The table as one or more parts of at most `max_characters` of Markdown each (unless one
    row alone is longer), each part with the header row first."""
    from lxml import etree

    rows = _rows(table_html) if table_html else []
    if not rows:
        return [TablePart(fallback_text, table_html)]
    cells = [[_cell_text(cell) for cell in row.xpath("./td|./th")] for row in rows]
    width = max(len(row) for row in cells)
    header_cells, body_cells = cells[0], cells[1:]
    header = _markdown_row(header_cells, width) + "\n" + _markdown_row(["---"] * width, width)
    header_html = etree.tostring(rows[0], encoding="unicode", with_tail=False)
    if not body_cells:
        return [TablePart(header, f"<table>{header_html}</table>")]
    parts: list[TablePart] = []
    lines: list[str] = []
    htmls: list[str] = []
    size = len(header)
    for row, row_cells in zip(rows[1:], body_cells):
        line = _markdown_row(row_cells, width)
        if lines and size + 1 + len(line) > max_characters:
            parts.append(_part(header, header_html, lines, htmls))
            lines, htmls, size = [], [], len(header)
        lines.append(line)
        htmls.append(etree.tostring(row, encoding="unicode", with_tail=False))
        size += 1 + len(line)
    parts.append(_part(header, header_html, lines, htmls))
    return parts


def _part(header: str, header_html: str, lines: list[str], htmls: list[str]) -> TablePart:
    text = header + "\n" + "\n".join(lines)
    return TablePart(text, f"<table><thead>{header_html}</thead><tbody>{''.join(htmls)}</tbody></table>")
