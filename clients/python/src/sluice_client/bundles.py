"""Collection bundles (docs/bundles.md): ExportCollection's stream written where the caller asked,
and ImportCollection's stream read from a path or a binary file object, both a piece at a time
(never the whole bundle in memory). The sync and the asyncio client share this.

An export is checked against its trailer (size and SHA-256) before it counts as done; a path is
written to a temporary file beside it and renamed into place only then, so a failed export leaves
no partial bundle under the name asked for. An import sends the size and SHA-256 of what it read in
its trailer: ingest-api stores nothing unless they match (docs/bundles.md, "Import").
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .errors import DownloadError
from .protos import document_service_pb2

# A bundle's place: a path, or a binary file object (open for writing to export, for reading to import).
BundleFile = str | os.PathLike[str] | IO[bytes]
PIECE_BYTES = 256 * 1024  # one ImportCollectionRequest's data


@dataclass(frozen=True)
class ExportedBundle:
    """What `export_collection` wrote (its size and SHA-256 checked against the trailer)."""

    collection: str
    format_version: int
    document_count: int
    chunk_count: int
    size_bytes: int
    sha256: str
    path: Path | None  # None for a file object


class BundleReceiver:
    """ExportCollection's messages: the header, the bytes (written, counted and hashed), the trailer."""

    def __init__(self, name: str, destination: BundleFile) -> None:
        self.name = name
        self.header: document_service_pb2.ExportCollectionHeader | None = None
        self.trailer: document_service_pb2.ExportCollectionTrailer | None = None
        self.received = 0
        self._sha256 = hashlib.sha256()
        self._path: Path | None = None
        self._temporary: Path | None = None
        if isinstance(destination, (str, os.PathLike)):
            self._path = Path(destination)
            handle, temporary = tempfile.mkstemp(prefix=f".{self._path.name}.", suffix=".part", dir=self._path.parent)
            self._temporary = Path(temporary)
            self._file: IO[bytes] = os.fdopen(handle, "wb")
        elif hasattr(destination, "write"):
            self._file = destination
        else:
            raise TypeError(f"export to a path or a binary file object, not {type(destination).__name__}")

    def take(self, message: document_service_pb2.ExportCollectionResponse) -> None:
        kind = message.WhichOneof("payload")
        if kind == "header":
            self.header = message.header
        elif kind == "data":
            if self.header is None or self.trailer is not None:
                raise DownloadError(f"the export of {self.name} sent bytes out of order", reason="DOWNLOAD_MALFORMED")
            self._file.write(message.data)
            self.received += len(message.data)
            self._sha256.update(message.data)
        elif kind == "trailer":
            self.trailer = message.trailer

    def finish(self) -> ExportedBundle:
        """Check what arrived against the trailer; rename a path's file into place when it matches."""
        header, trailer = self.header, self.trailer
        if header is None or trailer is None:
            raise DownloadError(f"the export of {self.name} ended before its trailer", reason="DOWNLOAD_MALFORMED")
        if self.received != trailer.size_bytes:
            raise DownloadError(
                f"{self.name}: received {self.received} bytes, the server announced {trailer.size_bytes}",
                reason="SIZE_MISMATCH",
            )
        digest = self._sha256.hexdigest()
        if digest != trailer.sha256.lower():
            raise DownloadError(
                f"{self.name}: the bundle received has SHA-256 {digest}, the server announced {trailer.sha256}",
                reason="CHECKSUM_MISMATCH",
            )
        if self._temporary is not None and self._path is not None:
            self._file.close()
            os.replace(self._temporary, self._path)
            self._temporary = None
        else:
            self._file.flush()
        return ExportedBundle(
            header.collection, header.format_version, header.document_count, header.chunk_count, self.received, digest, self._path
        )

    def discard(self) -> None:
        """The export failed: remove the temporary file we made (a caller's file object is theirs)."""
        if self._temporary is not None:
            self._file.close()
            with contextlib.suppress(FileNotFoundError):
                self._temporary.unlink()
            self._temporary = None


def import_options(as_name: str, reembed: bool) -> document_service_pb2.ImportCollectionRequest:
    return document_service_pb2.ImportCollectionRequest(
        options=document_service_pb2.ImportCollectionOptions(name=as_name, reembed=reembed)
    )


@contextlib.contextmanager
def opened(source: BundleFile) -> Iterator[IO[bytes]]:
    if isinstance(source, (str, os.PathLike)):
        with Path(source).open("rb") as f:
            yield f
    elif hasattr(source, "read"):
        yield source
    else:
        raise TypeError(f"import from a path or a binary file object, not {type(source).__name__}")


class ImportPieces:
    """The data messages of an import, read a piece at a time, then the trailer of what was read."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.size = 0
        self._sha256 = hashlib.sha256()

    def next_message(self) -> document_service_pb2.ImportCollectionRequest | None:
        """The next data message; the trailer at the end; None after it."""
        if self._sha256 is None:
            return None
        piece = self.file.read(PIECE_BYTES)
        if piece:
            self.size += len(piece)
            self._sha256.update(piece)
            return document_service_pb2.ImportCollectionRequest(data=piece)
        trailer = document_service_pb2.ImportCollectionTrailer(size_bytes=self.size, sha256=self._sha256.hexdigest())
        self._sha256 = None  # type: ignore[assignment]
        return document_service_pb2.ImportCollectionRequest(trailer=trailer)


def import_messages(file: IO[bytes], as_name: str, reembed: bool) -> Iterator[document_service_pb2.ImportCollectionRequest]:
    yield import_options(as_name, reembed)
    pieces = ImportPieces(file)
    while (message := pieces.next_message()) is not None:
        yield message


async def import_messages_async(
    file: IO[bytes], as_name: str, reembed: bool
) -> AsyncIterator[document_service_pb2.ImportCollectionRequest]:
    """As import_messages, each read in a thread (a file's read blocks)."""
    import asyncio

    yield import_options(as_name, reembed)
    pieces = ImportPieces(file)
    while (message := await asyncio.to_thread(pieces.next_message)) is not None:
        yield message


__all__ = [
    "BundleFile",
    "BundleReceiver",
    "ExportedBundle",
    "import_messages",
    "import_messages_async",
    "opened",
]
