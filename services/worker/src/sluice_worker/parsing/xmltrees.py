"""HTML and Office XML that the parsers would read only in part. Runs inside the sandbox.

libxml2 (under lxml, under unstructured, python-docx and python-pptx) stops reading at a text
node of 10,000,000 characters and at 256 levels of nesting, unless asked for a "huge" tree
(then about 1 GB and 2048 levels). Its HTML parser says so only in its error log, so
unstructured returns the elements read until then: for one 10.5 MB paragraph, or text nested
100,000 `<div>`s deep, none at all, and the document would fail as "empty". unstructured then
walks the HTML tree recursively and meets Python's recursion limit at about 500 levels.

So, in the sandbox:
* every parser builds huge trees: the sandbox's memory and time limits bound a file, not
  libxml2's (entities stay unresolved in Office XML, so no entity expansion);
* HTML nested deeper than `MAX_HTML_DEPTH` is flattened before unstructured sees it: tags
  below that depth are dropped and their text kept (a block element leaves a line break);
* what libxml2 still cannot read fails with a message naming the limit, never silently.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from lxml import etree

from sluice_worker.domain import PARSER_LIMIT, DocumentInvalid

# Deep enough for any real page, shallow enough for unstructured's recursive walk.
MAX_HTML_DEPTH = 200
# libxml2's nesting limit with huge trees (XML_PARSE_HUGE), for messages.
LIBXML_HUGE_DEPTH = 2048

_installed = False


def use_huge_trees() -> None:
    """Swap the module-level lxml parsers of unstructured (HTML), python-docx and python-pptx
    for equal ones with `huge_tree=True`. Their parse functions look the parser up at call
    time, so the swap takes effect at once; done once per sandbox."""
    global _installed
    if _installed:
        return
    import docx.opc.oxml
    import docx.oxml.parser
    import pptx.oxml
    import unstructured.partition.html.parser as html_parser_module
    import unstructured.partition.html.partition as html_partition_module

    html_parser = etree.HTMLParser(remove_comments=True, remove_pis=True, huge_tree=True)
    html_parser.set_element_class_lookup(html_parser_module.element_class_lookup)
    html_parser_module.html_parser = html_parser
    # The module's own name for the parser (imported there, not exported): replaced on purpose.
    html_partition_module.html_parser = html_parser  # type: ignore[attr-defined]
    for module in (docx.oxml.parser, docx.opc.oxml, pptx.oxml):
        parser = etree.XMLParser(remove_blank_text=True, resolve_entities=False, huge_tree=True)
        parser.set_element_class_lookup(module.element_class_lookup)
        module.oxml_parser = parser  # type: ignore[attr-defined]  # each module's private parser, replaced
    _installed = True


def xml_limit_failure(exc: etree.XMLSyntaxError, format_name: str) -> DocumentInvalid | None:
    """A readable failure for an Office file's XML that hit one of libxml2's limits."""
    message = str(exc)
    if "Excessive depth" in message:
        return DocumentInvalid(
            PARSER_LIMIT,
            f"the {format_name} file's XML is nested more than {LIBXML_HUGE_DEPTH} levels deep, "
            f"more than the parser's limit of {LIBXML_HUGE_DEPTH}",
        )
    if "Resource limit" in message or "huge" in message.lower():
        return DocumentInvalid(PARSER_LIMIT, f"the {format_name} file's XML is beyond the parser's limits ({message[:200]})")
    return None


# ----------------------------------------------------------------------------------------- HTML


def prepare_html(text: str) -> str:
    """`text`, flattened when nested too deep for unstructured; fails with a named reason when
    libxml2 would still stop early."""
    depth, limit_error = _depth_and_limit_error(text)
    if depth > MAX_HTML_DEPTH or limit_error:
        # Room below the limit for the elements libxml2 adds (html, body, tbody...).
        flat = flatten_html(text, MAX_HTML_DEPTH - 20)
        depth, limit_error = _depth_and_limit_error(flat)
        if limit_error or depth > MAX_HTML_DEPTH:
            nesting = _tag_depth(text)
            if nesting > MAX_HTML_DEPTH:
                raise DocumentInvalid(
                    PARSER_LIMIT,
                    f"the HTML is nested {nesting} levels deep, more than the parser's limit of {MAX_HTML_DEPTH} "
                    "(and could not be flattened)",
                )
            raise DocumentInvalid(PARSER_LIMIT, f"the HTML is beyond the parser's limits ({limit_error.strip()})")
        return flat
    return text


def _depth_and_limit_error(text: str) -> tuple[int, str]:
    parser = etree.HTMLParser(remove_comments=True, remove_pis=True, huge_tree=True)
    try:
        root = etree.fromstring(text, parser)
    except ValueError:  # a str with an XML encoding declaration (see unstructured's partition)
        root = etree.fromstring(text.encode("utf-8"), parser)
    limit_error = next((e.message for e in parser.error_log if e.type_name == "ERR_RESOURCE_LIMIT"), "")
    if root is None:
        return 0, limit_error
    depth = deepest = 0
    for event, _ in etree.iterwalk(root, events=("start", "end")):
        depth += 1 if event == "start" else -1
        deepest = max(deepest, depth)
    return deepest, limit_error


# Elements whose end closes a paragraph: dropped ones leave a line break in their place.
_BLOCK = {
    "address",
    "article",
    "aside",
    "blockquote",
    "dd",
    "details",
    "dialog",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "td",
    "th",
    "tr",
    "ul",
    "caption",
    "tbody",
    "thead",
    "tfoot",
}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
# A start tag of the key closes an open element of these names (HTML's implied end tags), so
# that `<p>a<p>b` does not count as nesting.
_IMPLIED_END = {
    "li": {"li"},
    "dt": {"dt", "dd"},
    "dd": {"dt", "dd"},
    "tr": {"tr", "td", "th"},
    "td": {"td", "th"},
    "th": {"td", "th"},
    "option": {"option"},
    "p": {"p"},
}
_CLOSES_P = _BLOCK - {"li", "dd", "dt", "td", "th", "tr", "tbody", "thead", "tfoot", "caption"}


class _Flattener(HTMLParser):
    """Re-emits HTML token by token without recursion, dropping tags nested past `max_depth`."""

    def __init__(self, max_depth: int) -> None:
        super().__init__(convert_charrefs=False)
        self.max_depth = max_depth
        self.out: list[str] = []
        self.stack: list[tuple[str, bool]] = []  # (tag, emitted)
        self.out_text = ""
        self.deepest = 0  # how deep the start tags nested, implied end tags aside

    def _close_top(self) -> None:
        tag, emitted = self.stack.pop()
        self.out.append(f"</{tag}>" if emitted else ("\n" if tag in _BLOCK else ""))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or f"<{tag}>"
        if tag in _VOID:
            self.out.append(raw)
            return
        closes = _IMPLIED_END.get(tag, set()) | ({"p"} if tag in _CLOSES_P else set())
        if self.stack and self.stack[-1][0] in closes:
            self._close_top()
        emit = len(self.stack) < self.max_depth or tag in ("script", "style")
        self.stack.append((tag, emit))
        self.deepest = max(self.deepest, len(self.stack))
        self.out.append(raw if emit else ("\n" if tag in _BLOCK else ""))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.out.append(self.get_starttag_text() or f"<{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        for position in range(len(self.stack) - 1, -1, -1):
            if self.stack[position][0] == tag:
                while len(self.stack) > position:
                    self._close_top()
                return
        # A stray end tag: dropped, as a browser would.

    def handle_data(self, data: str) -> None:
        self.out.append(data)

    def handle_entityref(self, name: str) -> None:
        self.out.append(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self.out.append(f"&#{name};")

    def handle_decl(self, decl: str) -> None:
        self.out.append(f"<!{decl}>")

    def unknown_decl(self, data: str) -> None:
        self.out.append(f"<![{data}]>")


def flatten_html(text: str, max_depth: int) -> str:
    return _flatten(text, max_depth).out_text


def _tag_depth(text: str) -> int:
    """How deep the start tags nest (implied end tags aside), for the message."""
    return _flatten(text, 10**9).deepest


def _flatten(text: str, max_depth: int) -> _Flattener:
    flattener = _Flattener(max_depth)
    flattener.feed(text)
    flattener.close()
    while flattener.stack:
        flattener._close_top()
    flattener.out_text = "".join(flattener.out)
    return flattener


# ------------------------------------------------------------------------------- lost text

_INVISIBLE = re.compile(r"<(script|style|head|noscript|template)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


def visible_html_text(text: str) -> str:
    """A rough estimate of the text a browser would show, without parsing (no limits to hit)."""
    return html.unescape(_TAG.sub(" ", _INVISIBLE.sub(" ", text)))
