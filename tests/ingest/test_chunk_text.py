"""JobService refuses chunk text PostgreSQL cannot store (U+0000) at the edge, with
INVALID_ARGUMENT naming the chunk, instead of failing with INTERNAL at the database."""

from __future__ import annotations

import grpc
import psycopg
import pytest
from sluice.v1 import document_pb2 as D
from sluice.v1 import job_service_pb2 as js
from sluice_common.errors import reason_of

from .helpers import vector_for


def chunks_with_nul(field: str) -> list[js.Chunk]:
    good = js.Chunk(index=0, text="clean text", element_type="NarrativeText", embedding=vector_for("clean text"))
    bad = js.Chunk(index=1, text="also clean", element_type="NarrativeText", embedding=vector_for("also clean"))
    setattr(bad, field, getattr(bad, field) + "\x00")
    return [good, bad]


@pytest.mark.parametrize("field", ["text", "section_title", "element_type", "text_as_html"])
def test_a_chunk_with_nul_is_refused_with_invalid_argument(c, database_url, field):
    document = c.upload(content=b"some text")
    job = c.claim()
    c.run_to_indexing(job)
    chunks = chunks_with_nul(field)

    def snapshot():
        yield js.SaveSnapshotRequest(header=js.SnapshotHeader(lease=job.lease, pipeline_version="v1", chunk_count=2))
        yield js.SaveSnapshotRequest(chunks=js.ChunkBatch(chunks=chunks))

    def complete():
        yield js.CompleteJobRequest(header=js.CompleteJobHeader(lease=job.lease, chunk_count=2))
        yield js.CompleteJobRequest(chunks=js.ChunkBatch(chunks=chunks))

    for call in (lambda: c.jobs.SaveSnapshot(snapshot()), lambda: c.jobs.CompleteJob(complete())):
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
        assert reason_of(err.value) == "INVALID_CHUNK_TEXT"
        assert "chunk 1" in err.value.details() and "U+0000" in err.value.details()

    # Nothing was stored, and the job is still the worker's to fail.
    assert c.get(document.id).status == D.DOCUMENT_STATUS_INDEXING
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM chunk_snapshots").fetchone()[0] == 0
