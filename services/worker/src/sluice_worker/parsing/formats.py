"""Which parser reads a document: sniffed content first, then file name, then media type."""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePosixPath

from sluice_worker.domain import DOCUMENT_CORRUPT, DOCUMENT_EMPTY, DOCUMENT_TOO_LARGE, UNSUPPORTED_TYPE, DocumentInvalid

PDF, DOCX, PPTX, HTML, MARKDOWN, TEXT, EMAIL, MSG, EPUB = (
    "pdf",
    "docx",
    "pptx",
    "html",
    "markdown",
    "text",
    "email",
    "msg",
    "epub",
)
IMAGE = "image"  # PNG, JPEG, TIFF (multi-page too), WebP: read by OCR
XLSX, CSV = "xlsx", "csv"

# Names people understand, for error messages.
FORMAT_NAMES = {
    PDF: "PDF",
    DOCX: "Word (DOCX)",
    PPTX: "PowerPoint (PPTX)",
    HTML: "HTML",
    MARKDOWN: "Markdown",
    TEXT: "plain text",
    EMAIL: "e-mail",
    MSG: "Outlook message",
    EPUB: "EPUB",
    IMAGE: "image",
    XLSX: "Excel (XLSX)",
    CSV: "CSV",
}

_EXTENSIONS = {
    ".pdf": PDF,
    ".docx": DOCX,
    ".pptx": PPTX,
    ".html": HTML,
    ".htm": HTML,
    ".xhtml": HTML,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".txt": TEXT,
    ".text": TEXT,
    ".log": TEXT,
    ".eml": EMAIL,
    ".msg": MSG,
    ".epub": EPUB,
    ".xlsx": XLSX,
    ".csv": CSV,
    ".png": IMAGE,
    ".jpg": IMAGE,
    ".jpeg": IMAGE,
    ".tif": IMAGE,
    ".tiff": IMAGE,
    ".webp": IMAGE,
}
_MIME_TYPES = {
    "application/pdf": PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": DOCX,
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": PPTX,
    "text/html": HTML,
    "application/xhtml+xml": HTML,
    "text/markdown": MARKDOWN,
    "text/x-markdown": MARKDOWN,
    "text/plain": TEXT,
    "message/rfc822": EMAIL,
    "application/vnd.ms-outlook": MSG,
    "application/epub+zip": EPUB,
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": XLSX,
    "text/csv": CSV,
    "image/png": IMAGE,
    "image/jpeg": IMAGE,
    "image/tiff": IMAGE,
    "image/webp": IMAGE,
}
_ZIP_FORMATS = {DOCX, PPTX, EPUB, XLSX}
# Formats that are known but not supported, so the message can name them.
_KNOWN_UNSUPPORTED = {
    ".doc": "Word 97-2003 (.doc)",
    ".ppt": "PowerPoint 97-2003 (.ppt)",
    ".xls": "Excel 97-2003 (.xls)",
    ".gif": "GIF image",
    ".zip": "zip archive",
    ".exe": "program",
}


def detect_format(data: bytes, filename: str, mime_type: str) -> str:
    suffix = PurePosixPath(filename.lower()).suffix
    by_name = _EXTENSIONS.get(suffix)
    by_mime = _MIME_TYPES.get(mime_type.split(";")[0].strip().lower())
    head = data[:1024]
    if b"%PDF-" in head:
        return PDF
    if _is_image(data):
        return IMAGE
    if data[:4] == b"PK\x03\x04":
        return _zip_format(data, by_name or by_mime)
    claimed = by_name or by_mime
    if claimed == PDF:
        raise DocumentInvalid(DOCUMENT_CORRUPT, "the file is named as a PDF but is not a valid PDF file")
    if claimed in _ZIP_FORMATS:
        raise DocumentInvalid(
            DOCUMENT_CORRUPT,
            f"the file is named as {FORMAT_NAMES[claimed]} but is not a valid {FORMAT_NAMES[claimed]} file (not a zip package)",
        )
    if claimed == IMAGE:
        if not data:
            raise DocumentInvalid(DOCUMENT_EMPTY, "the image file is empty (0 bytes)")
        raise DocumentInvalid(DOCUMENT_CORRUPT, "the file is named as an image but is not a PNG, JPEG, TIFF or WebP image")
    if claimed == MSG:
        return MSG
    if claimed is not None:
        return claimed
    if suffix in _KNOWN_UNSUPPORTED:
        raise DocumentInvalid(UNSUPPORTED_TYPE, f"{_KNOWN_UNSUPPORTED[suffix]} files are not supported")
    if _looks_like_text(data):
        return TEXT
    raise DocumentInvalid(
        UNSUPPORTED_TYPE,
        f"the file type of {filename!r} is not supported; supported are PDF, DOCX, PPTX, HTML, Markdown, plain text, "
        "e-mail, Excel (XLSX), CSV and images (PNG, JPEG, TIFF, WebP)",
    )


def _zip_format(data: bytes, claimed: str | None) -> str:
    try:
        names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise DocumentInvalid(DOCUMENT_CORRUPT, f"the file is a damaged zip package: {exc}") from exc
    if "word/document.xml" in names:
        return DOCX
    if "ppt/presentation.xml" in names:
        return PPTX
    if "xl/workbook.xml" in names:
        return XLSX
    if "META-INF/container.xml" in names and claimed in (EPUB, None):
        return EPUB
    if claimed in _ZIP_FORMATS:
        raise DocumentInvalid(DOCUMENT_CORRUPT, f"the file is not a valid {FORMAT_NAMES[claimed]} file (its parts are missing)")
    raise DocumentInvalid(UNSUPPORTED_TYPE, "zip archives are not supported; upload the documents inside it")


def check_zip_bomb(data: bytes, max_unzipped_bytes: int, max_members: int = 20000) -> None:
    """Refuse a zip package that would expand past the limit, before any parser unpacks it.

    The declared sizes are checked here; a package that lies about them fails its CRC check
    when read, and the sandbox's memory limit is the last line.
    """
    try:
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise DocumentInvalid(DOCUMENT_CORRUPT, f"the file is a damaged zip package: {exc}") from exc
    total = sum(info.file_size for info in infos)
    if len(infos) > max_members or total > max_unzipped_bytes:
        raise DocumentInvalid(
            DOCUMENT_TOO_LARGE,
            f"the file would expand to {total // (1024 * 1024)} MB in {len(infos)} parts when unpacked, "
            f"more than the {max_unzipped_bytes // (1024 * 1024)} MB allowed (a decompression bomb?)",
        )


def _looks_like_text(data: bytes) -> bool:
    sample = data[:8192]
    if sample.startswith((b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf")):
        return True
    if b"\x00" in sample:
        return False
    controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 27))
    return controls <= len(sample) // 100


def _is_image(data: bytes) -> bool:
    return (
        data[:8] == b"\x89PNG\r\n\x1a\n"
        or data[:3] == b"\xff\xd8\xff"
        or data[:4] in (b"II*\x00", b"MM\x00*")
        or (data[:4] == b"RIFF" and data[8:12] == b"WEBP")
    )
