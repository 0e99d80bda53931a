"""Generated from libs/common/src/sluice_common/media_types.py by scripts/gen_media_types.py: do not edit.

The media type this SDK sends for a file's extension; an extension not here is sent without
one, and the server detects it."""

from __future__ import annotations

MEDIA_TYPES: dict[str, str] = {
    ".bmp": "image/bmp",
    ".csv": "text/csv",
    ".doc": "application/msword",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".eml": "message/rfc822",
    ".epub": "application/epub+zip",
    ".heic": "image/heic",
    ".htm": "text/html",
    ".html": "text/html",
    ".jpeg": "image/jpeg",
    ".jpg": "image/jpeg",
    ".json": "application/json",
    ".log": "text/plain",
    ".markdown": "text/markdown",
    ".md": "text/markdown",
    ".msg": "application/vnd.ms-outlook",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".org": "text/org",
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".ppt": "application/vnd.ms-powerpoint",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".rst": "text/x-rst",
    ".rtf": "application/rtf",
    ".text": "text/plain",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
    ".tsv": "text/tab-separated-values",
    ".txt": "text/plain",
    ".webp": "image/webp",
    ".xhtml": "application/xhtml+xml",
    ".xls": "application/vnd.ms-excel",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".xml": "application/xml",
}
