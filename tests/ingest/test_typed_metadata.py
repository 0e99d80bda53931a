"""Typed metadata at upload: stored with its type, shown typed and as text, refused when wrong,
and filterable by search once the document is READY (ingest-api and search, real gRPC)."""

from __future__ import annotations

import datetime as dt
import hashlib

import auth_keys
import grpc
import psycopg
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from search_server import RunningSearch
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import search_service_pb2 as sp
from sluice.v1 import search_service_pb2_grpc
from sluice_common.errors import error_info


def stamp(text: str) -> Timestamp:
    value = Timestamp()
    value.FromDatetime(dt.datetime.fromisoformat(text))
    return value


TYPED = {
    "year": D.MetadataValue(number_value=2024),
    "ratio": D.MetadataValue(number_value=0.125),
    "draft": D.MetadataValue(bool_value=False),
    "published": D.MetadataValue(timestamp_value=stamp("2024-05-01T12:00:00.123456789+00:00")),
    "tags": D.MetadataValue(string_list_value=D.StringList(values=["db", "search"])),
    "title": D.MetadataValue(string_value="Sluice"),
}


def upload(c, *, metadata=None, typed=None, content: bytes | None = None):
    content = content or f"typed {sorted((typed or {}).items())!r} {metadata!r}".encode()

    def messages():
        yield ds.UploadDocumentRequest(
            metadata=ds.UploadDocumentMetadata(
                collection="docs", filename="t.txt", metadata=metadata or {}, typed_metadata=typed or {}
            )
        )
        yield ds.UploadDocumentRequest(data=content)
        yield ds.UploadDocumentRequest(
            trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
        )

    return c.docs.UploadDocument(messages())


def test_typed_metadata_is_kept_with_its_type_and_shown_as_text(c, database_url):
    doc = upload(c, metadata={"team": "search"}, typed=TYPED)
    got = c.docs.GetDocument(ds.GetDocumentRequest(id=doc.id))
    assert dict(got.metadata) == {
        "team": "search",
        "year": "2024",
        "ratio": "0.125",
        "draft": "false",
        "published": "2024-05-01T12:00:00.123456Z",
        "tags": '["db", "search"]',
        "title": "Sluice",
    }
    typed = got.typed_metadata
    assert typed["team"].string_value == "search"  # a string entry is a string value
    assert typed["year"].number_value == 2024 and typed["ratio"].number_value == 0.125
    assert typed["draft"].WhichOneof("kind") == "bool_value" and typed["draft"].bool_value is False
    assert list(typed["tags"].string_list_value.values) == ["db", "search"]
    # Kept to the microsecond.
    assert typed["published"].timestamp_value.ToDatetime(dt.UTC) == dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
    with psycopg.connect(database_url) as conn:
        (stored,) = conn.execute("SELECT metadata FROM documents WHERE id = %s", (doc.id,)).fetchone()
    assert stored["year"] == 2024 and stored["draft"] is False and stored["tags"] == ["db", "search"]
    assert stored["published"] == {"$timestamp": "2024-05-01T12:00:00.123456Z"}
    # Workers see the text form.
    job = c.claim()
    assert dict(job.metadata)["year"] == "2024" and dict(job.metadata)["draft"] == "false"


@pytest.mark.parametrize(
    "metadata, typed, words",
    [
        ({"k": "a"}, {"k": D.MetadataValue(number_value=1)}, "both in metadata and in typed_metadata"),
        ({}, {"n": D.MetadataValue(number_value=float("nan"))}, "typed_metadata['n']: a number must be finite"),
        ({}, {"n": D.MetadataValue(number_value=float("inf"))}, "finite"),
        ({}, {"e": D.MetadataValue()}, "typed_metadata['e']: no value is set"),
        ({}, {"l": D.MetadataValue(string_list_value=D.StringList(values=["x"] * 101))}, "at most 100"),
        ({}, {"l": D.MetadataValue(string_list_value=D.StringList(values=["a\x00"]))}, "NUL"),
        ({}, {"s": D.MetadataValue(string_value="x" * 1025)}, "at most 1024"),
        ({}, {"x" * 65: D.MetadataValue(bool_value=True)}, "1 to 64 characters"),
        ({f"k{i}": "v" for i in range(40)}, {f"t{i}": D.MetadataValue(bool_value=True) for i in range(25)}, "at most 64"),
    ],
)
def test_bad_typed_metadata_is_refused(c, metadata, typed, words):
    with pytest.raises(grpc.RpcError) as err:
        upload(c, metadata=metadata, typed=typed)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(err.value).reason == "INVALID_METADATA"
    assert words in err.value.details(), err.value.details()


@pytest.mark.parametrize("metadata", [{"": "v"}, {"k": "v" * 1025}, {f"k{i}": "v" for i in range(65)}])
def test_string_metadata_limits_still_hold(c, metadata):
    with pytest.raises(grpc.RpcError) as err:
        upload(c, metadata=metadata)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and error_info(err.value).reason == "INVALID_METADATA"


def test_search_filters_what_upload_typed(c, database_url):
    """The whole path: typed metadata through UploadDocument, READY through JobService, found
    through SearchService's where (the stored form is the one the filter compares with)."""
    years = {}
    for year in (2022, 2023, 2024):
        doc = upload(
            c,
            typed={
                "year": D.MetadataValue(number_value=year),
                "published": D.MetadataValue(timestamp_value=stamp(f"{year}-06-01T00:00:00+00:00")),
                "tags": D.MetadataValue(string_list_value=D.StringList(values=[f"y{year}", "all"])),
            },
        )
        job = c.claim()
        c.run_to_indexing(job)
        c.complete(job, [f"report of {year}"])
        years[doc.id] = year
    search = RunningSearch(database_url)
    channel = auth_keys.channel(search.address)
    try:
        stub = search_service_pb2_grpc.SearchServiceStub(channel)

        def found(condition):
            response = stub.Search(
                sp.SearchRequest(
                    collection="docs",
                    query="report",
                    mode=sp.SEARCH_MODE_VECTOR,
                    filter=sp.SearchFilter(where=sp.MetadataFilter(condition=condition)),
                )
            )
            return sorted(years[h.document_id] for h in response.hits)

        assert found(sp.MetadataCondition(key="year", op=sp.FILTER_OPERATOR_GTE, value=D.MetadataValue(number_value=2023))) == [
            2023,
            2024,
        ]
        assert found(
            sp.MetadataCondition(
                key="published",
                op=sp.FILTER_OPERATOR_LT,
                value=D.MetadataValue(timestamp_value=stamp("2023-06-01T00:00:00+00:00")),
            )
        ) == [2022]
        assert found(
            sp.MetadataCondition(
                key="tags",
                op=sp.FILTER_OPERATOR_IN,
                values=[D.MetadataValue(string_value="y2022"), D.MetadataValue(string_value="y2024")],
            )
        ) == [2022, 2024]
        assert found(sp.MetadataCondition(key="tags", op=sp.FILTER_OPERATOR_EQ, value=D.MetadataValue(string_value="all"))) == [
            2022,
            2023,
            2024,
        ]
    finally:
        channel.close()
        search.stop()
