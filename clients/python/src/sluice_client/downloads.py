"""Downloads: DownloadDocument's stream (a header, then the bytes) written where the caller asked,
checked against the header's size and SHA-256 before it counts as done.

The sync and the asyncio client share this: they run the stream and hand each message to a
`Receiver`; it writes the bytes to a `Sink` (memory, a path, or a binary file object) while
counting and hashing them, and `finish()` compares both with the header. A path is written to a
temporary file beside it and renamed into place only once the bytes check out, so a download that
fails (or is retried) never leaves a partial file under the name asked for.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
from pathlib import Path
from typing import IO, Any

from .errors import DownloadError
from .protos import document_service_pb2
from .types import DownloadedDocument

# A destination: None (return the bytes), a path (a folder: the document's file name inside it),
# or a binary file object open for writing.
Destination = str | os.PathLike[str] | IO[bytes] | None
MIB = 1024 * 1024
# Without an explicit timeout, a download has until the header arrives the client's timeout,
# then this long at least, plus a second per MiB the header announces (as an upload's deadline).
MIN_TRANSFER_SECONDS = 60.0


def transfer_seconds(size_bytes: int) -> float:
    return max(MIN_TRANSFER_SECONDS, size_bytes / MIB)


def safe_filename(filename: str, document_id: str) -> str:
    """The document's file name as a name in a folder (no path parts), or its id when it has none."""
    name = Path(filename.replace("\\", "/")).name
    return name if name not in ("", ".", "..") else document_id


class Sink:
    """Where the bytes go; `reset()` says whether a retry may start again from the first byte."""

    def open(self, header: document_service_pb2.DownloadDocumentHeader, document_id: str) -> None:
        raise NotImplementedError

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def commit(self) -> Path | None:
        """The bytes checked out: make them visible; where they are (None: not a path)."""
        return None

    def discard(self) -> None:
        """The download failed for good: leave nothing behind that we made."""

    def reset(self) -> bool:
        """Before a retry: forget what was written; False when that cannot be done."""
        return True


class MemorySink(Sink):
    def __init__(self) -> None:
        self.buffer = io.BytesIO()

    def open(self, header: document_service_pb2.DownloadDocumentHeader, document_id: str) -> None:
        self.buffer = io.BytesIO()

    def write(self, data: bytes) -> None:
        self.buffer.write(data)

    def reset(self) -> bool:
        self.buffer = io.BytesIO()
        return True


class PathSink(Sink):
    """A file at `path` (or, for a folder, the document's file name inside it), written to a
    temporary file in the same folder and renamed over it once checked."""

    def __init__(self, path: Path) -> None:
        self.requested = path
        self.path: Path | None = None
        self._file: IO[bytes] | None = None
        self._temporary: Path | None = None

    def open(self, header: document_service_pb2.DownloadDocumentHeader, document_id: str) -> None:
        self._close(remove=True)
        target = self.requested
        if target.is_dir():
            target = target / safe_filename(header.filename, document_id)
        self.path = target
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
        self._temporary = Path(name)
        self._file = os.fdopen(handle, "wb")

    def write(self, data: bytes) -> None:
        assert self._file is not None
        self._file.write(data)

    def commit(self) -> Path | None:
        assert self._file is not None and self._temporary is not None and self.path is not None
        self._file.close()
        self._file = None
        os.replace(self._temporary, self.path)
        self._temporary = None
        return self.path

    def discard(self) -> None:
        self._close(remove=True)

    def reset(self) -> bool:
        self._close(remove=True)
        return True

    def _close(self, *, remove: bool) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if remove and self._temporary is not None:
            with contextlib.suppress(FileNotFoundError):
                self._temporary.unlink()
            self._temporary = None


class FileObjectSink(Sink):
    """A binary file object the caller opened: written as the bytes arrive. A retry starts again
    only when nothing was written yet, or when the object can seek back and truncate."""

    def __init__(self, target: IO[bytes]) -> None:
        self.target = target
        self.written = 0
        self._start: int | None = None
        with contextlib.suppress(OSError, AttributeError, ValueError):
            if target.seekable():
                self._start = target.tell()

    def open(self, header: document_service_pb2.DownloadDocumentHeader, document_id: str) -> None:
        pass

    def write(self, data: bytes) -> None:
        self.target.write(data)
        self.written += len(data)

    def reset(self) -> bool:
        if self.written == 0:
            return True
        if self._start is None:
            return False
        self.target.seek(self._start)
        self.target.truncate()
        self.written = 0
        return True


def sink_for(destination: Destination) -> Sink:
    if destination is None:
        return MemorySink()
    if isinstance(destination, (str, os.PathLike)):
        return PathSink(Path(destination))
    if not hasattr(destination, "write"):
        raise TypeError(f"download to a path, a binary file object or None (the bytes), not {type(destination).__name__}")
    return FileObjectSink(destination)


class Receiver:
    """One attempt's messages: the header first, then the bytes, counted and hashed as written."""

    def __init__(self, document_id: str, sink: Sink) -> None:
        self.document_id = document_id
        self.sink = sink
        self.header: document_service_pb2.DownloadDocumentHeader | None = None
        self.received = 0
        self._sha256 = hashlib.sha256()

    def take(self, message: document_service_pb2.DownloadDocumentResponse) -> None:
        kind = message.WhichOneof("payload")
        if kind == "header":
            if self.header is not None:
                raise DownloadError(f"the download of {self.document_id} sent a second header", reason="DOWNLOAD_MALFORMED")
            self.header = message.header
            self.sink.open(message.header, self.document_id)
        elif kind == "data":
            if self.header is None:
                raise DownloadError(
                    f"the download of {self.document_id} sent bytes before its header", reason="DOWNLOAD_MALFORMED"
                )
            self.sink.write(message.data)
            self.received += len(message.data)
            self._sha256.update(message.data)

    def finish(self) -> DownloadedDocument:
        """Check what arrived against the header; make it visible when it is the same."""
        header = self.header
        if header is None:
            raise DownloadError(f"the download of {self.document_id} ended without a header", reason="DOWNLOAD_MALFORMED")
        name = header.filename or self.document_id
        if self.received != header.size_bytes:
            raise DownloadError(
                f"{name}: received {self.received} bytes, the server announced {header.size_bytes}", reason="SIZE_MISMATCH"
            )
        digest = self._sha256.hexdigest()
        if header.content_sha256 and digest != header.content_sha256.lower():
            raise DownloadError(
                f"{name}: the bytes received have SHA-256 {digest}, the server announced {header.content_sha256}",
                reason="CHECKSUM_MISMATCH",
            )
        path = self.sink.commit()
        return DownloadedDocument(header.filename, header.mime_type, header.size_bytes, digest, path, header)

    def result(self, destination: Destination) -> Any:
        """finish(), then what `download` returns: the bytes without a destination, else the description."""
        done = self.finish()
        if destination is None:
            assert isinstance(self.sink, MemorySink)
            return self.sink.buffer.getvalue()
        return done


__all__ = ["Destination", "DownloadError", "Receiver", "Sink", "safe_filename", "sink_for", "transfer_seconds"]
