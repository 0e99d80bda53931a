"""What an upload sends: the metadata (with size, SHA-256 and a request_id), the bytes, the trailer.

A source is a path, bytes, or a binary file object. It is hashed before the first message so
that the metadata can announce its size and SHA-256 (the server refuses a mismatch before
storing anything), and hashed again as it is streamed: a file that changed in between gets no
trailer, so the server stores nothing. The request_id is stable for (collection, file, content),
so a retried upload, or the same folder uploaded again, returns the same document instead of a
new one.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .errors import UploadSourceError
from .media_types import MEDIA_TYPES
from .protos import document_pb2, document_service_pb2

CHUNK_BYTES = 1024 * 1024  # bytes per upload message

Source = str | os.PathLike[str] | bytes | bytearray | memoryview | IO[bytes]


def guess_mime_type(name: str) -> str:
    """The media type of a file name, from the one table ingest-api reads too (media_types.py,
    generated); "" when the table has none: the server then detects it."""
    return MEDIA_TYPES.get(Path(name).suffix.lower(), "")


def request_id(collection: str, identity: str, sha256: str, prefix: str = "py-") -> str:
    """Stable per (collection, file, content): the same upload again is the same request, and a
    changed file a new one. `identity` is the file's absolute path, or its name for bytes."""
    key = "\0".join([collection, identity, sha256])
    return prefix + hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]


def read_error(path: Path, error: OSError) -> str:
    reason = error.strerror or str(error)
    if isinstance(error, IsADirectoryError):
        reason = "is a directory"
    if os.path.islink(path) and not os.path.exists(path):
        reason = "broken symbolic link"
    return f"cannot read {path}: {reason}"


@dataclass
class PreparedUpload:
    """A source ready to send: its name, size and SHA-256, and how to read it again for a retry."""

    filename: str
    size: int
    sha256: str
    identity: str
    open: Callable[[], IO[bytes]]
    path: Path | None = None
    read_failure: list[str] = field(default_factory=list)

    def messages(
        self, metadata: document_service_pb2.UploadDocumentMetadata
    ) -> Iterator[document_service_pb2.UploadDocumentRequest]:
        """The stream of one attempt: metadata, the bytes (hashed as they go), then the trailer
        only if they are still the bytes announced."""
        yield document_service_pb2.UploadDocumentRequest(metadata=metadata)
        digest = hashlib.sha256()
        sent = 0
        try:
            handle = self.open()
            try:
                while block := handle.read(CHUNK_BYTES):
                    digest.update(block)
                    sent += len(block)
                    if sent > self.size:
                        # It grew since it was hashed: say so here, before the extra bytes go out
                        # (else ingest-api's SIZE_MISMATCH may answer first, a race).
                        break
                    yield document_service_pb2.UploadDocumentRequest(data=block)
            finally:
                if self.path is not None:
                    handle.close()
        except OSError as error:  # the file went away or became unreadable: abandon the stream
            self.read_failure.append(read_error(self.path, error) if self.path else f"cannot read the source: {error}")
            raise
        if (sent, digest.hexdigest()) != (self.size, self.sha256):
            self.read_failure.append(
                f"{self.path or self.filename} changed while it was being uploaded; nothing was stored, upload it again"
            )
            raise UploadSourceError(self.read_failure[-1], reason="SOURCE_CHANGED")
        yield document_service_pb2.UploadDocumentRequest(
            trailer=document_service_pb2.UploadDocumentTrailer(size_bytes=sent, sha256=digest.hexdigest())
        )


def file_digest(path: Path) -> tuple[int, str]:
    """A file's size and SHA-256 (lowercase hex), read a block at a time.
    UploadSourceError (reason SOURCE_UNREADABLE) when it cannot be read."""
    digest, size = hashlib.sha256(), 0
    try:
        with open(path, "rb") as handle:
            while block := handle.read(CHUNK_BYTES):
                digest.update(block)
                size += len(block)
    except OSError as error:
        raise UploadSourceError(read_error(path, error), reason="SOURCE_UNREADABLE") from None
    return size, digest.hexdigest()


def prepare(source: Source, filename: str | None = None) -> PreparedUpload:
    """Hash a source once (size and SHA-256) and remember how to read it again.
    UploadSourceError (reason SOURCE_UNREADABLE, SOURCE_EMPTY) when it cannot be sent."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        name = filename or "document"
        prepared = PreparedUpload(name, len(data), hashlib.sha256(data).hexdigest(), name, lambda: io.BytesIO(data))
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        size, sha256 = file_digest(path)
        prepared = PreparedUpload(filename or path.name, size, sha256, os.path.abspath(path), lambda: open(path, "rb"), path=path)  # noqa: SIM115 - reopened for the caller, who closes it
    elif hasattr(source, "read"):
        stream = source
        start = stream.tell() if stream.seekable() else None
        if start is None:  # a pipe or socket: read it whole, since a retry must send it again
            data = stream.read()
            return prepare(data, filename or _name_of(stream))
        digest, size = hashlib.sha256(), 0
        while block := stream.read(CHUNK_BYTES):
            digest.update(block)
            size += len(block)

        def reopen() -> IO[bytes]:
            stream.seek(start)
            return stream

        name = filename or _name_of(stream)
        prepared = PreparedUpload(name, size, digest.hexdigest(), name, reopen)
    else:
        raise TypeError(f"cannot upload a {type(source).__name__}: give a path, bytes or a binary file object")
    if prepared.size == 0:
        raise UploadSourceError(f"{prepared.path or prepared.filename} is empty: nothing to index", reason="SOURCE_EMPTY")
    return prepared


def _name_of(handle: Any) -> str:
    name = getattr(handle, "name", "")
    return os.path.basename(name) if isinstance(name, str) and name else "document"


def metadata_message(
    collection: str,
    prepared: PreparedUpload,
    *,
    mime_type: str | None,
    metadata: Mapping[str, str] | None,
    typed_metadata: Mapping[str, Any] | None,
    request_id_value: str,
    source_uri: str | None = None,
    priority: str | None = None,
) -> document_service_pb2.UploadDocumentMetadata:
    from .filters import metadata_value

    return document_service_pb2.UploadDocumentMetadata(
        collection=collection,
        filename=prepared.filename,
        mime_type=mime_type if mime_type is not None else guess_mime_type(prepared.filename),
        metadata=dict(metadata or {}),
        typed_metadata={
            key: value if isinstance(value, document_pb2.MetadataValue) else metadata_value(value)
            for key, value in (typed_metadata or {}).items()
        },
        request_id=request_id_value,
        expected_size_bytes=prepared.size,
        expected_sha256=prepared.sha256,
        source_uri=source_uri or "",
        priority=priority_of(priority),
    )


# How soon the server processes an upload (docs/tenancy.md, "Priorities"): "interactive" (the
# server's default) or "bulk" (a sync, a folder load).
PRIORITIES = {"interactive": document_pb2.JOB_PRIORITY_INTERACTIVE, "bulk": document_pb2.JOB_PRIORITY_BULK}


def priority_of(priority: str | None) -> document_pb2.JobPriority.ValueType:
    if priority is None:
        return document_pb2.JOB_PRIORITY_UNSPECIFIED
    if priority not in PRIORITIES:
        raise ValueError(f"priority is 'interactive' or 'bulk', not {priority!r}")
    return PRIORITIES[priority]


def find_files(paths: list[str | os.PathLike[str]], *, include_hidden: bool = False) -> list[Path]:
    """Files named directly, and every non-hidden file under named folders, in a stable order.

    Hidden files and folders (".git", ".DS_Store") are skipped inside folders (unless
    `include_hidden`) but taken when named directly. FileNotFoundError names the paths that do
    not exist (nothing is uploaded)."""
    missing = [str(p) for p in paths if not os.path.lexists(p)]
    if missing:
        raise FileNotFoundError(f"no such file or directory: {', '.join(missing)}")
    found: list[Path] = []
    seen: set[str] = set()

    def add(path: Path) -> None:
        key = os.path.abspath(path)
        if key not in seen:
            seen.add(key)
            found.append(path)

    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, files in os.walk(path, followlinks=False):
                dirs[:] = sorted(d for d in dirs if include_hidden or not d.startswith("."))
                for name in sorted(files):
                    if include_hidden or not name.startswith("."):
                        add(Path(root) / name)
        else:
            add(path)
    return found


def source_uri_of(path: str | os.PathLike[str], roots: list[str | os.PathLike[str]]) -> str:
    """How a local file is named in its source: its path relative to the folder among `roots` it
    lies under, with "/" between parts ("notes/a.md"), or its file name when it lies under none
    (a file named directly). `sluice upload --source-uri-from-path` and `sync_folder` both name
    files so, so that either one's documents are the other's versions."""
    absolute = Path(os.path.abspath(path))
    for raw in roots:
        root = Path(os.path.abspath(raw))
        if root in absolute.parents and root.is_dir():
            return absolute.relative_to(root).as_posix()
    return absolute.name


__all__ = [
    "CHUNK_BYTES",
    "PreparedUpload",
    "Source",
    "file_digest",
    "find_files",
    "guess_mime_type",
    "prepare",
    "request_id",
    "source_uri_of",
]
