"""The SDK's pure parts, without servers: how states of many documents combine, when a call is
retried and for how long it waits, how a client paces itself, what an upload announces."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from sluice_client import _core, uploads
from sluice_client.errors import NotFound, RateLimited, TLSError, Unavailable
from sluice_client.protos import document_pb2
from sluice_client.retry import Pacer, RetryPolicy
from sluice_client.types import Document, DocumentStatus


def state(status: str, second: int, *, full: bool = False, **fields) -> Document:
    """A document state at `second`; `full` as from an upload or a listing (with its description),
    otherwise as a collection event carries it (state only)."""
    stamp = Timestamp()
    stamp.FromDatetime(dt.datetime(2026, 1, 1, 0, 0, second, tzinfo=dt.UTC))
    raw = document_pb2.Document(
        id="d1", status=document_pb2.DocumentStatus.Value(f"DOCUMENT_STATUS_{status}"), update_time=stamp, **fields
    )
    if full:
        raw.create_time.CopyFrom(stamp)
        raw.metadata["team"] = "search"
        raw.filename = raw.filename or "a.txt"
    return Document.from_proto(raw)


def test_an_event_before_the_upload_answer_is_not_lost_and_keeps_the_description():
    tracked = _core.TrackedDocuments()
    assert tracked.apply(state("PARSING", 2)) is None  # not tracked yet: kept aside
    merged = tracked.track(state("PENDING", 1, full=True))
    assert merged.status is DocumentStatus.PARSING and merged.metadata == {"team": "search"}
    assert tracked.apply(state("READY", 5, chunk_count=3)).chunk_count == 3
    assert tracked.documents["d1"].metadata == {"team": "search"} and tracked.all_done
    assert tracked.apply(state("EMBEDDING", 4)) is None  # older than what is known: ignored
    assert tracked.documents["d1"].ready


def test_a_deleted_document_ends_as_failed_with_the_reason():
    tracked = _core.TrackedDocuments()
    tracked.track(state("PENDING", 1, full=True))
    ended = tracked.remove(state("PENDING", 2))
    assert ended.failed and ended.error_code == "DELETED" and tracked.pending() == []


def test_what_is_retried_and_how_long_a_call_waits():
    policy = RetryPolicy(attempts=3, initial_backoff=0.2, max_backoff=5.0)
    limited = RateLimited("slow down", reason="RATE_LIMITED", retry_after=0.4, metadata={"limit_per_second": "100"})
    assert 0.4 <= policy.next_wait(limited, 0, remaining=10) <= 0.44
    assert policy.next_wait(limited, 50, remaining=10) is not None  # rate limits do not use up attempts
    assert policy.next_wait(limited, 0, remaining=0.3) is None  # the deadline comes first: raise it
    down = Unavailable("restarting")
    assert 0.1 <= policy.next_wait(down, 0, remaining=10) <= 0.2
    assert 0.2 <= policy.next_wait(down, 1, remaining=10) <= 0.4
    assert policy.next_wait(down, 2, remaining=10) is None  # the third try was the last
    busy = Unavailable("slots full", reason="TOO_MANY_UPLOADS")
    assert policy.next_wait(busy, 0, remaining=10) is not None
    assert policy.next_wait(TLSError("bad certificate", problem="untrusted certificate"), 0, remaining=10) is None
    assert policy.next_wait(NotFound("gone"), 0, remaining=10) is None


def test_a_refused_client_holds_back_and_then_paces_at_90_percent_of_the_limit():
    now = [100.0]
    pacer = Pacer(clock=lambda: now[0])
    assert pacer.reserve() == 0 and pacer.rate is None
    pacer.refused(RateLimited("slow down", retry_after=0.05, metadata={"limit_per_second": "100"}))
    assert pacer.rate == pytest.approx(90.0)
    assert pacer.reserve() == pytest.approx(0.05)  # held back as RetryInfo said
    assert [pacer.reserve() for _ in range(3)] == pytest.approx([0.05 + n / 90 for n in (1, 2, 3)])  # then 90 a second
    now[0] += 1.0
    assert pacer.reserve() == 0  # the booked starts are past


def test_an_upload_announces_size_and_hash_and_its_request_id_is_stable(tmp_path):
    path = tmp_path / "a.md"
    path.write_text("# Title\n\ncontent")
    prepared = uploads.prepare(path)
    assert (prepared.filename, prepared.size) == ("a.md", path.stat().st_size) and len(prepared.sha256) == 64
    same = uploads.request_id("docs", prepared.identity, prepared.sha256)
    assert same == uploads.request_id("docs", str(path.resolve()), prepared.sha256) and same.startswith("py-")
    assert same != uploads.request_id("other", prepared.identity, prepared.sha256)
    message = uploads.metadata_message(
        "docs", prepared, mime_type=None, metadata={"k": "v"}, typed_metadata={"n": 1}, request_id_value=same
    )
    assert (message.expected_size_bytes, message.expected_sha256, message.mime_type) == (
        prepared.size,
        prepared.sha256,
        "text/markdown",
    )
    stream = list(prepared.messages(message))
    assert stream[0].HasField("metadata") and stream[-1].trailer.sha256 == prepared.sha256
    assert b"".join(m.data for m in stream[1:-1]) == path.read_bytes()
    from_file = uploads.prepare(io.BytesIO(b"bytes of a file object"), "f.txt")
    assert from_file.sha256 == uploads.prepare(b"bytes of a file object", "f.txt").sha256


def test_a_source_that_grew_since_it_was_hashed_sends_none_of_its_extra_bytes():
    """The SDK, not ingest-api's SIZE_MISMATCH, says a grown source changed: before the fix the
    extra bytes went out and the server's answer could arrive first (a race seen in CI)."""
    import hashlib

    from sluice_client.errors import UploadSourceError
    from sluice_client.protos import document_service_pb2

    original = b"original content"
    prepared = uploads.PreparedUpload(
        filename="shifty.txt",
        size=len(original),
        sha256=hashlib.sha256(original).hexdigest(),
        identity="shifty",
        open=lambda: io.BytesIO(original + b"XXXX"),
    )
    sent = b""
    with pytest.raises(UploadSourceError) as raised:
        for message in prepared.messages(document_service_pb2.UploadDocumentMetadata(filename="shifty.txt")):
            sent += message.data
    assert raised.value.reason == "SOURCE_CHANGED"
    assert len(sent) <= len(original)
