"""Bytes to text for plain text, Markdown and HTML, in whatever encoding they came."""

from __future__ import annotations

import codecs
import re

from sluice_worker.domain import DOCUMENT_CORRUPT, DocumentInvalid

_BOMS = [
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
]
# When the detector cannot tell candidates apart (short Western text fits cp1250 as well as
# cp1252), prefer the encodings most often met; lower is better.
_PREFERENCE = {
    "utf_8": 0,
    "ascii": 0,
    "cp1252": 1,
    "latin_1": 2,
    "iso8859_15": 3,
    "gb18030": 4,
    "cp932": 5,
    "shift_jis": 5,
    "euc_jp": 6,
    "big5": 7,
    "euc_kr": 8,
    "cp949": 8,
    "cp1251": 9,
    "koi8_r": 10,
}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def decode_text(data: bytes, *, html: bool = False) -> tuple[str, str]:
    """The text and the encoding it was read with: BOM, then (HTML) a declared charset, then
    strict UTF-8, then charset detection."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data.decode(encoding, errors="replace"), encoding
    if html:
        declared = _META_CHARSET.search(data[:4096])
        if declared:
            encoding = declared.group(1).decode("ascii", "replace")
            try:
                return data.decode(encoding), encoding
            except (LookupError, UnicodeDecodeError):
                pass
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data))
    if not matches:
        raise DocumentInvalid(DOCUMENT_CORRUPT, "the text's character encoding could not be recognised")
    best = min(matches, key=lambda m: (round(m.chaos, 3), -round(m.coherence, 3)))
    ties = [m for m in matches if round(m.chaos, 3) == round(best.chaos, 3) and round(m.coherence, 3) == round(best.coherence, 3)]
    chosen = min(ties, key=lambda m: _PREFERENCE.get(m.encoding, 50))
    return str(chosen), chosen.encoding
