"""Which files an upload sends (as named on the command line), and the idempotency key of each."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sluice_client import uploads

from .client import REQUEST_ID_PREFIX
from .errors import EXIT_USAGE, CliError


@dataclass(frozen=True)
class Candidate:
    """A file to upload, as named on the command line or found under a folder."""

    path: Path
    display: str
    source_uri: str | None = None  # with --source-uri-from-path (docs/cli.md)


def find_files(paths: list[str]) -> list[Candidate]:
    """Files named directly, and every non-hidden file under named folders, in a stable order.

    A path that does not exist is a usage error (nothing is uploaded). Hidden files and
    folders (".git", ".DS_Store") are skipped inside folders but taken when named directly.
    """
    try:
        found = uploads.find_files(list(paths))
    except FileNotFoundError as error:
        raise CliError(str(error), EXIT_USAGE, "PATH_NOT_FOUND") from None
    return [Candidate(path=path, display=str(path)) for path in found]


def source_uri_from_path(candidate: Candidate, paths: list[str]) -> Candidate:
    """The candidate named in its source by its path relative to the folder it was found under
    (with "/" between parts), or by its file name when it was named directly."""
    return Candidate(candidate.path, candidate.display, uploads.source_uri_of(candidate.path, list(paths)))


def request_id(collection: str, path: Path, sha256: str) -> str:
    """Stable per (collection, file, content): uploading the same folder again is idempotent,
    and a changed file is a new request (the SDK's rule, with the CLI's prefix)."""
    return uploads.request_id(collection, os.path.abspath(path), sha256, REQUEST_ID_PREFIX)
