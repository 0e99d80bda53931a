"""One media-type table (sluice_common.media_types): ingest-api detects from it, the worker's
parser table agrees with it, and the SDKs' generated copies are current (issue 37: three tables
disagreed; the server knew no .xlsx or .epub)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sluice_client.uploads import guess_mime_type
from sluice_common.media_types import MEDIA_TYPES, media_type_of
from sluice_ingest.service.documents import detect_mime_type
from sluice_worker.parsing import formats

ROOT = Path(__file__).resolve().parent.parent


def test_the_sdks_copies_are_generated_from_the_table():
    done = subprocess.run([sys.executable, "scripts/gen_media_types.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    typescript = (ROOT / "clients/typescript/src/media_types.ts").read_text()
    assert all(f'"{ext}": "{media}"' in typescript for ext, media in MEDIA_TYPES.items())


@pytest.mark.parametrize("extension", sorted(formats._EXTENSIONS))
def test_every_extension_the_worker_reads_has_the_type_the_worker_reads_as_that_format(extension):
    media = MEDIA_TYPES.get(extension)
    assert media, f"{extension} is parsed by the worker but has no media type in the table"
    assert formats._MIME_TYPES.get(media) == formats._EXTENSIONS[extension], (extension, media)


@pytest.mark.parametrize("name", ["report.XLSX", "book.epub", "notes.md", "scan.webp", "page.xhtml", "a.docx", "deck.pptx"])
def test_ingest_and_the_sdk_give_a_name_the_same_type(name):
    expected = MEDIA_TYPES[Path(name).suffix.lower()]
    assert media_type_of(name) == expected
    assert detect_mime_type(name, "", b"") == expected
    assert guess_mime_type(name) == expected


def test_a_name_without_a_known_extension_is_left_to_the_server():
    assert guess_mime_type("README") == "" and guess_mime_type(".md") == ""
    assert detect_mime_type("mystery", "", b"%PDF-1.7") == "application/pdf"  # the content, last
    assert detect_mime_type("x.md", "Text/Plain", b"") == "text/plain"  # a stated type wins
