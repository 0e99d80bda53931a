"""Unit tests of the upload-stream module (no gRPC, no database)."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from sluice_common.errors import DeadlineExceeded, InvalidArgument, ResourceExhausted
from sluice_ingest import uploads
from sluice_ingest.uploads import Expected, Trailer, UploadGate


async def stream(*items):
    for item in items:
        yield item


async def receive(*items, expected=Expected(), max_bytes=1000, spool_memory_bytes=16):
    return await uploads.receive(
        stream(*items), expected, max_bytes=max_bytes, spool_memory_bytes=spool_memory_bytes, spool_dir=None
    )


async def test_a_confirmed_upload_reads_back_whole():
    data = [b"abc" * 10, b"", b"defg" * 7]
    whole = b"".join(data)
    content = await receive(*data, Trailer(len(whole), hashlib.sha256(whole).hexdigest()))
    try:
        assert (content.size, content.sha256, content.head) == (len(whole), hashlib.sha256(whole).hexdigest(), whole)
        assert b"".join([piece async for piece in content.pieces(size=7)]) == whole
    finally:
        content.close()


@pytest.mark.parametrize(
    ("items", "reason"),
    [
        ((b"abc",), "UPLOAD_INCOMPLETE"),
        ((b"abc", Trailer(4)), "UPLOAD_INCOMPLETE"),
        ((b"abc", Trailer(2)), "SIZE_MISMATCH"),
        ((b"abc", Trailer(3, "00" * 32)), "CHECKSUM_MISMATCH"),
        ((b"abc", Trailer(3, "xyz")), "INVALID_CHECKSUM"),
        ((b"abc", Trailer(-1)), "INVALID_TRAILER"),
        ((b"abc", Trailer(3), b"d"), "TRAILER_NOT_LAST"),
        ((Trailer(0),), "EMPTY_UPLOAD"),
    ],
)
async def test_refusals(items, reason):
    with pytest.raises(InvalidArgument) as error:
        await receive(*items)
    assert error.value.reason == reason


async def test_limits_and_expectations_stop_the_stream_early():
    async def endless():
        while True:
            yield b"x" * 100

    with pytest.raises(ResourceExhausted, match="upload limit"):
        await uploads.receive(endless(), Expected(), max_bytes=1000, spool_memory_bytes=16, spool_dir=None)
    with pytest.raises(InvalidArgument) as error:
        await uploads.receive(endless(), Expected(size_bytes=250), max_bytes=1000, spool_memory_bytes=16, spool_dir=None)
    assert error.value.reason == "SIZE_MISMATCH"
    with pytest.raises(ResourceExhausted):
        await receive(expected=Expected(size_bytes=1001))


def test_spool_threshold_zero_means_on_disk_at_once():
    content = uploads.SpooledContent(0, None)
    try:
        content._append(b"x")
        assert content._file._rolled
    finally:
        content.close()


def test_gate_admits_up_to_its_limit_and_gives_slots_back():
    gate = UploadGate(max_concurrent=2, idle_timeout_seconds=1)
    with gate.admit(), gate.admit():
        with pytest.raises(ResourceExhausted) as error, gate.admit():
            pass
        assert error.value.reason == "TOO_MANY_UPLOADS"
        assert gate.active == 2
    assert gate.active == 0
    with pytest.raises(InvalidArgument), gate.admit():
        raise InvalidArgument("refused inside", reason="UPLOAD_INCOMPLETE")
    assert gate.active == 0


async def test_gate_ends_a_silent_stream():
    async def silent_after_one():
        yield 1
        await asyncio.sleep(60)
        yield 2

    gate = UploadGate(max_concurrent=1, idle_timeout_seconds=0.05)
    received = []
    with pytest.raises(DeadlineExceeded) as error:
        async for item in gate.paced(silent_after_one()):
            received.append(item)
    assert received == [1] and error.value.reason == "UPLOAD_IDLE_TIMEOUT"


def test_nul_characters_are_refused_with_the_field_named():
    uploads.check_no_nul("docs", "a.txt", "", "r", {"k": "v"})
    with pytest.raises(InvalidArgument, match="metadata value") as error:
        uploads.check_no_nul("docs", "a.txt", "", "r", {"k": "v\x00"})
    assert error.value.reason == "INVALID_METADATA"
