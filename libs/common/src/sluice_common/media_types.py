"""The one table of file extensions and the media types Sluice stores for them.

ingest-api reads it to give an upload without a stated type its type (`detect_mime_type`); the
worker's parser table agrees with it for every format it reads (tests/test_media_types.py); the
Python and TypeScript SDKs carry generated copies (`scripts/gen_media_types.py` writes
`clients/python/src/sluice_client/media_types.py` and `clients/typescript/src/media_types.ts`;
`--check`, in the tests, fails when they differ from this). Edit this table only.

An extension missing here is left to the server: the SDKs send no type, and ingest-api falls
back to Python's `mimetypes`, then to the content (a PDF's `%PDF`).
"""

from __future__ import annotations

from pathlib import PurePosixPath

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


def media_type_of(filename: str) -> str:
    """The table's media type for the file name's extension (any case), or "" when it has none."""
    return MEDIA_TYPES.get(PurePosixPath(filename).suffix.lower(), "")
