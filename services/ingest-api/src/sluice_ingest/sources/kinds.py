"""The kinds of source and the reader of each (docs/sources.md, "Kinds"): the registry on top of
one module per kind (folder, git, s3, http), which share the protocol and errors of `reader`.

A `Reader` lists a source's items sorted by source_uri (the order a run's checkpoint follows)
and reads one item's bytes. Listing reports a fingerprint where the source has one for free
(size and mtime of a file, an S3 ETag, a git blob id), so an unchanged item is not even read.
Every network request goes through `spec.check_url_host` first (no SSRF), and every local path
is checked to stay under the source's folder (no symbolic link out of it).
"""

from __future__ import annotations

from typing import Any

from .domain import SourceKind
from .folder import LocalFolderReader
from .git import GitReader
from .http import HttpReader
from .reader import Reader
from .s3 import S3Reader
from .spec import invalid


def reader_for(kind: str, spec: dict[str, Any], settings: Any) -> Reader:
    timeout = settings.source_request_timeout_seconds
    allow_private = settings.source_allow_private_networks
    if kind == SourceKind.LOCAL_FOLDER:
        return LocalFolderReader(spec, settings.source_local_roots, settings.max_upload_bytes)
    if kind == SourceKind.GIT:
        return GitReader(spec, settings.source_local_roots, allow_private, timeout)
    if kind == SourceKind.S3:
        return S3Reader(spec, allow_private, timeout, settings.max_upload_bytes)
    if kind == SourceKind.HTTP:
        return HttpReader(spec, allow_private, timeout, settings.max_upload_bytes, settings.source_http_default_max_pages)
    raise invalid(f"unknown source kind {kind!r}")
