"""The Python SDK carries Document.consistency_token (docs/scaling.md#read-replicas-and-the-consistency-token):
into its Document, through the merge of a bulk upload's states (an event's token replaces an
older answer's), and into SearchRequest. No server: the SDK's own conversions."""

from __future__ import annotations

from sluice_client import _core
from sluice_client.protos import document_pb2
from sluice_client.types import Document


def raw(status: int, token: str, *, described: bool, seconds: int) -> document_pb2.Document:
    message = document_pb2.Document(id="d1", status=status, consistency_token=token)
    message.update_time.FromSeconds(seconds)
    if described:  # an answer (GetDocument, UploadDocument) has the description; an event does not
        message.filename = "a.txt"
        message.create_time.FromSeconds(1)
    return message


def test_the_token_of_a_later_event_replaces_the_one_of_an_earlier_answer():
    uploaded = Document.from_proto(raw(document_pb2.DOCUMENT_STATUS_PENDING, "lsn:0/100", described=True, seconds=2))
    ready = Document.from_proto(raw(document_pb2.DOCUMENT_STATUS_READY, "lsn:0/200", described=False, seconds=3))
    assert uploaded.consistency_token == "lsn:0/100"
    merged = _core._newer(uploaded, ready)
    assert merged.ready and merged.filename == "a.txt"  # the description is kept...
    assert merged.consistency_token == merged.raw.consistency_token == "lsn:0/200"  # ...the token is the READY state's
    # An older event arriving late changes nothing.
    assert (
        _core._newer(
            merged, Document.from_proto(raw(document_pb2.DOCUMENT_STATUS_PENDING, "lsn:0/150", described=False, seconds=2))
        ).consistency_token
        == "lsn:0/200"
    )


def test_search_sends_the_token_and_only_when_given():
    common = dict(
        top_k=10,
        mode=None,
        filter=None,
        where=None,
        filenames=None,
        document_ids=None,
        neighbors=0,
        max_per_document=0,
        min_score=None,
        rerank=None,
        query_vector=None,
    )
    assert _core.search_request("docs", "q", consistency_token="lsn:0/200", **common).consistency_token == "lsn:0/200"
    assert _core.search_request("docs", "q", **common).consistency_token == ""
