"""Which files an upload sends, and the idempotency key of each."""

from __future__ import annotations

import hashlib
import mimetypes
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import EXIT_USAGE, CliError

CHUNK_BYTES = 1024 * 1024  # 1 MiB per upload message

# mimetypes knows these only on some systems.
_EXTRA_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".eml": "message/rfc822",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".epub": "application/epub+zip",
    ".rst": "text/x-rst",
}


@dataclass(frozen=True)
class Candidate:
    """A file to upload, as named on the command line or found under a folder."""

    path: Path
    display: str


def is_hidden(name: str) -> bool:
    return name.startswith(".")


def find_files(paths: list[str]) -> list[Candidate]:
    """Files named directly, and every non-hidden file under named folders, in a stable order.

    A path that does not exist is a usage error (nothing is uploaded). Hidden files and
    folders (".git", ".DS_Store") are skipped inside folders but taken when named directly.
    """
    found: list[Candidate] = []
    seen: set[Path] = set()
    missing = [p for p in paths if not os.path.lexists(p)]
    if missing:
        raise CliError(f"no such file or directory: {', '.join(missing)}", EXIT_USAGE, "PATH_NOT_FOUND")
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, files in os.walk(path, followlinks=False):
                dirs[:] = sorted(d for d in dirs if not is_hidden(d))
                for name in sorted(files):
                    if is_hidden(name):
                        continue
                    _add(found, seen, Path(root) / name)
        else:
            _add(found, seen, path)
    return found


def _add(found: list[Candidate], seen: set[Path], path: Path) -> None:
    key = Path(os.path.abspath(path))
    if key in seen:
        return
    seen.add(key)
    found.append(Candidate(path=path, display=str(path)))


def guess_mime_type(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in _EXTRA_TYPES:
        return _EXTRA_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(path.name)
    return guessed or ""


def content_sha256(path: Path) -> tuple[str, int]:
    """The file's SHA-256 (hex) and size; OSError if it cannot be read."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK_BYTES):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def request_id(collection: str, path: Path, sha256: str) -> str:
    """Stable per (collection, file, content): uploading the same folder again is idempotent,
    and a changed file is a new request."""
    key = "\0".join([collection, os.path.abspath(path), sha256])
    return "cli-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]


def read_error(path: Path, error: OSError) -> str:
    reason = error.strerror or str(error)
    if isinstance(error, IsADirectoryError):
        reason = "is a directory"
    if os.path.islink(path) and not os.path.exists(path):
        reason = "broken symbolic link"
    return f"cannot read {path}: {reason}"
