"""Upload streams: admitted by number, bounded in time, spooled to disk, hashed, confirmed.

An upload becomes a document only when its last message, the trailer, confirms the size and
(optionally) the SHA-256 of what was sent, and the bytes received match. A stream that ends
any other way (half-close without a trailer, cancellation, a killed client, an idle timeout)
stores nothing, so the same request_id can simply be sent again.

Memory: an upload holds at most `spool_memory_bytes` plus the message being handled; the
rest waits in an anonymous temporary file (unlinked at creation, so even a crash leaves no
file behind) until the commit streams it into PostgreSQL. N concurrent uploads cost
O(N x message size), not O(N x file size).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import tempfile
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass
from typing import TypeVar

from sluice_common.errors import DeadlineExceeded, InvalidArgument, RateLimited, ResourceExhausted, SluiceError
from sluice_common.reasons import Reason

from . import metrics

log = logging.getLogger("sluice.ingest")

SHA256_HEX = re.compile(r"^[0-9a-fA-F]{64}$")
# Pieces at least this large are hashed and spooled in a thread: hashlib and file writes
# release the GIL, and the event loop keeps serving the other streams meanwhile.
THREAD_PIECE_BYTES = 1024 * 1024
# The commit reads the spool back in pieces of this size.
READ_PIECE_BYTES = 1024 * 1024

T = TypeVar("T")

# The wait a TOO_MANY_UPLOADS refusal names (its RetryInfo) stays within these bounds, seconds.
MIN_UPLOAD_RETRY_SECONDS = 0.1
MAX_UPLOAD_RETRY_SECONDS = 10.0
# How much one finished upload moves the running mean of upload durations.
DURATION_WEIGHT = 0.2


@dataclass(frozen=True)
class Trailer:
    """The client's closing confirmation: the size and SHA-256 (hex, or empty) of what it sent."""

    size_bytes: int
    sha256: str = ""


@dataclass(frozen=True)
class Expected:
    """What the metadata announced up front; zero and empty mean unknown."""

    size_bytes: int = 0
    sha256: str = ""


def check_sha256(value: str, field_name: str) -> str:
    """A SHA-256 given by a client, lower-cased; empty stays empty (not given)."""
    if value and not SHA256_HEX.match(value):
        raise InvalidArgument(f"{field_name} must be 64 hexadecimal digits (a SHA-256) or empty", reason=Reason.INVALID_CHECKSUM)
    return value.lower()


def check_no_nul(collection: str, filename: str, mime_type: str, request_id: str, metadata: dict[str, str]) -> None:
    """PostgreSQL text and jsonb cannot hold U+0000: refuse it here, as the caller's mistake."""
    fields = [
        (collection, "collection", "INVALID_COLLECTION_NAME"),
        (filename, "filename", "INVALID_FILENAME"),
        (mime_type, "mime_type", "INVALID_MIME_TYPE"),
        (request_id, "request_id", "INVALID_REQUEST_ID"),
    ]
    fields += [(key, "metadata key", "INVALID_METADATA") for key in metadata]
    fields += [(value, f"metadata value of {key[:64]!r}", "INVALID_METADATA") for key, value in metadata.items()]
    for value, what, reason in fields:
        if "\x00" in value:
            raise InvalidArgument(f"{what} contains a NUL character (U+0000), which cannot be stored", reason=reason)


class SpooledContent:
    """The bytes of one upload: in memory up to a small threshold, then in a temporary file.

    Counts and hashes as it goes. `close()` frees everything; it is called on every path.
    """

    def __init__(self, memory_bytes: int, directory: str | None) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=max(1, memory_bytes), dir=directory or None)  # noqa: SIM115 - held open for the upload's life, closed by close()
        if memory_bytes <= 0:  # max_size=0 would mean "never roll over"; here 0 means "always on disk"
            self._file.rollover()
        self._digest = hashlib.sha256()
        self.size = 0
        self.head = b""  # the first bytes, for media type detection

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    async def append(self, piece: bytes) -> None:
        if len(piece) >= THREAD_PIECE_BYTES:
            await asyncio.to_thread(self._append, piece)
        else:
            self._append(piece)

    def _append(self, piece: bytes) -> None:
        if len(self.head) < 512:
            self.head += piece[: 512 - len(self.head)]
        self._digest.update(piece)
        self._file.write(piece)
        self.size += len(piece)

    async def pieces(self, size: int = READ_PIECE_BYTES) -> AsyncIterator[bytes]:
        """The content from the start, `size` bytes at a time (the store streams it to PostgreSQL)."""
        await asyncio.to_thread(self._file.seek, 0)
        while piece := await asyncio.to_thread(self._file.read, size):
            yield piece

    def close(self) -> None:
        self._file.close()


class UploadGate:
    """Admission and pacing of upload streams in this process.

    At most `max_concurrent` streams are admitted at once; one more is refused at once with
    RESOURCE_EXHAUSTED (TOO_MANY_UPLOADS) rather than queued, so a client can back off. An
    admitted stream that sends nothing for `idle_timeout_seconds` is ended with
    DEADLINE_EXCEEDED (UPLOAD_IDLE_TIMEOUT) and everything it held is released.

    A refusal carries a RetryInfo whose delay is when a slot should be free: the running mean
    of recent uploads' durations shared among the streams holding the slots (one of N uploads
    of mean length D ends about every D/N seconds), never below MIN_UPLOAD_RETRY_SECONDS
    (docs/clients.md, "Retries and deadlines").
    """

    def __init__(self, max_concurrent: int, idle_timeout_seconds: float) -> None:
        self.max_concurrent = max_concurrent
        self.idle_timeout_seconds = idle_timeout_seconds
        self.active = 0
        self.mean_duration_seconds = 1.0  # until an upload has finished

    def retry_after_seconds(self) -> float:
        """The wait a refused client is told: about when the next slot frees."""
        wait = self.mean_duration_seconds / max(1, self.active)
        return min(MAX_UPLOAD_RETRY_SECONDS, max(MIN_UPLOAD_RETRY_SECONDS, wait))

    @contextlib.contextmanager
    def admit(self) -> Iterator[None]:
        if self.active >= self.max_concurrent:
            metrics.UPLOADS_REFUSED.labels(reason=Reason.TOO_MANY_UPLOADS).inc()
            wait = self.retry_after_seconds()
            raise RateLimited(
                f"ingest-api is receiving {self.active} uploads already (the limit); try again in {wait:.1f} s",
                retry_after=wait,
                reason=Reason.TOO_MANY_UPLOADS,
                limit=self.max_concurrent,
            )
        self.active += 1
        metrics.UPLOADS_ACTIVE.inc()
        started = time.monotonic()
        try:
            yield
        except SluiceError as error:
            metrics.UPLOADS_REFUSED.labels(reason=error.reason).inc()
            log.info("upload refused, nothing stored", extra={"reason": error.reason, "details": error.metadata})
            raise
        except asyncio.CancelledError:  # the client cancelled, vanished or was killed
            metrics.UPLOADS_REFUSED.labels(reason=Reason.CANCELLED).inc()
            log.info("upload cancelled by the client, nothing stored", extra={"reason": "CANCELLED"})
            raise
        finally:
            self.active -= 1
            metrics.UPLOADS_ACTIVE.dec()
            elapsed = time.monotonic() - started
            self.mean_duration_seconds += DURATION_WEIGHT * (elapsed - self.mean_duration_seconds)

    async def paced(self, messages: AsyncIterator[T]) -> AsyncGenerator[T, None]:
        """`messages`, ended with UPLOAD_IDLE_TIMEOUT when the next one takes too long."""
        iterator = aiter(messages)
        while True:
            try:
                async with asyncio.timeout(self.idle_timeout_seconds):
                    message = await anext(iterator)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise DeadlineExceeded(
                    f"the upload sent nothing for {self.idle_timeout_seconds:g} s and was cancelled; nothing was"
                    " stored, send it again",
                    reason=Reason.UPLOAD_IDLE_TIMEOUT,
                    idle_timeout_seconds=self.idle_timeout_seconds,
                ) from None
            yield message


async def receive(
    pieces: AsyncIterator[bytes | Trailer],
    expected: Expected,
    *,
    max_bytes: int,
    spool_memory_bytes: int,
    spool_dir: str | None,
) -> SpooledContent:
    """Spool the data messages up to the trailer and check them against it; the caller closes the result.

    Every refusal closes the spool before raising: nothing of a refused upload survives.
    """
    if expected.size_bytes < 0:
        raise InvalidArgument("expected_size_bytes must not be negative", reason=Reason.INVALID_EXPECTED_SIZE)
    if expected.size_bytes > max_bytes:
        raise ResourceExhausted(
            f"the file is larger than the upload limit of {max_bytes} bytes", reason=Reason.UPLOAD_TOO_LARGE, limit=max_bytes
        )
    expected_sha256 = check_sha256(expected.sha256, "expected_sha256")
    content = SpooledContent(spool_memory_bytes, spool_dir)
    try:
        trailer = None
        async for piece in pieces:
            if trailer is not None:
                raise InvalidArgument("the trailer must be the last message of an upload", reason=Reason.TRAILER_NOT_LAST)
            if isinstance(piece, Trailer):
                trailer = piece
                continue
            if content.size + len(piece) > max_bytes:
                raise ResourceExhausted(
                    f"the file is larger than the upload limit of {max_bytes} bytes",
                    reason=Reason.UPLOAD_TOO_LARGE,
                    limit=max_bytes,
                )
            if expected.size_bytes and content.size + len(piece) > expected.size_bytes:
                raise InvalidArgument(
                    f"more bytes arrived than the {expected.size_bytes} announced in expected_size_bytes",
                    reason=Reason.SIZE_MISMATCH,
                )
            await content.append(piece)
        if trailer is None:
            raise InvalidArgument(
                f"the upload ended after {content.size} bytes without its trailer (size and SHA-256), so it may be"
                " incomplete; nothing was stored, send it again",
                reason=Reason.UPLOAD_INCOMPLETE,
                received_bytes=content.size,
            )
        _check_against(content, trailer, expected, expected_sha256)
        return content
    except BaseException:
        content.close()
        raise


def _check_against(content: SpooledContent, trailer: Trailer, expected: Expected, expected_sha256: str) -> None:
    if trailer.size_bytes < 0:
        raise InvalidArgument("trailer.size_bytes must not be negative", reason=Reason.INVALID_TRAILER)
    trailer_sha256 = check_sha256(trailer.sha256, "trailer.sha256")
    sizes = [(trailer.size_bytes, "the trailer")]
    if expected.size_bytes:  # optional; the trailer's size is not
        sizes.append((expected.size_bytes, "expected_size_bytes"))
    for announced, where in sizes:
        if content.size < announced:
            raise InvalidArgument(
                f"{where} announced {announced} bytes but only {content.size} arrived; nothing was stored, send it again",
                reason=Reason.UPLOAD_INCOMPLETE,
                received_bytes=content.size,
            )
        if content.size > announced:
            raise InvalidArgument(
                f"{where} announced {announced} bytes but {content.size} arrived; nothing was stored",
                reason=Reason.SIZE_MISMATCH,
                received_bytes=content.size,
            )
    if content.size == 0:
        raise InvalidArgument("the file is empty: there is nothing to index", reason=Reason.EMPTY_UPLOAD)
    for given_sha256, where in ((trailer_sha256, "trailer.sha256"), (expected_sha256, "expected_sha256")):
        if given_sha256 and given_sha256 != content.sha256:
            raise InvalidArgument(
                f"the bytes received have SHA-256 {content.sha256}, not the {given_sha256} given in {where}: the file"
                " was changed or damaged on the way; nothing was stored",
                reason=Reason.CHECKSUM_MISMATCH,
                received_sha256=content.sha256,
            )


__all__ = ["Expected", "SpooledContent", "Trailer", "UploadGate", "check_no_nul", "check_sha256", "receive"]
