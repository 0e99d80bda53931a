"""JobService keeps a chunk's element boxes (Chunk.boxes) in its snapshot and in the index, and
refuses boxes outside their page with INVALID_ARGUMENT naming the chunk."""

from __future__ import annotations

import grpc
import psycopg
import pytest
from sluice.v1 import document_pb2 as D
from sluice.v1 import job_service_pb2 as js
from sluice_common.errors import reason_of

from .helpers import vector_for

BOXES = [
    D.BoundingBox(page_number=1, left=0.1, top=0.2, right=0.9, bottom=0.25),
    D.BoundingBox(page_number=2, left=0.0, top=0.0, right=1.0, bottom=0.5),
]


def chunk(index: int, boxes=()) -> js.Chunk:
    text = f"chunk {index}"
    return js.Chunk(
        index=index, text=text, page_number=1, element_type="NarrativeText", embedding=vector_for(text), boxes=list(boxes)
    )


def complete(c, job, chunks):
    def messages():
        yield js.CompleteJobRequest(header=js.CompleteJobHeader(lease=job.lease, chunk_count=len(chunks)))
        yield js.CompleteJobRequest(chunks=js.ChunkBatch(chunks=chunks))

    return c.jobs.CompleteJob(messages())


def save_snapshot(c, job, chunks, version="v1"):
    def messages():
        yield js.SaveSnapshotRequest(header=js.SnapshotHeader(lease=job.lease, pipeline_version=version, chunk_count=len(chunks)))
        yield js.SaveSnapshotRequest(chunks=js.ChunkBatch(chunks=chunks))

    return c.jobs.SaveSnapshot(messages())


def test_boxes_are_kept_in_the_snapshot_and_the_index(c, database_url):
    c.upload(content=b"a document with boxes")
    job = c.claim()
    c.run_to_indexing(job)
    chunks = [chunk(0, BOXES), chunk(1)]
    save_snapshot(c, job, [js.Chunk(index=ch.index, text=ch.text, boxes=list(ch.boxes)) for ch in chunks])
    read = [
        ch for batch in c.jobs.ReadSnapshot(js.ReadSnapshotRequest(lease=job.lease, pipeline_version="v1")) for ch in batch.chunks
    ]
    assert [list(ch.boxes) for ch in read] == [BOXES, []]
    complete(c, job, chunks)
    with psycopg.connect(database_url) as conn:
        stored = [row[0] for row in conn.execute("SELECT boxes FROM chunks ORDER BY chunk_index")]
    assert stored == [
        [
            {"page": 1, "left": 0.1, "top": 0.2, "right": 0.9, "bottom": 0.25},
            {"page": 2, "left": 0.0, "top": 0.0, "right": 1.0, "bottom": 0.5},
        ],
        [],
    ]


@pytest.mark.parametrize(
    "box",
    [
        D.BoundingBox(page_number=0, left=0.1, top=0.1, right=0.2, bottom=0.2),
        D.BoundingBox(page_number=1, left=-0.1, top=0.1, right=0.2, bottom=0.2),
        D.BoundingBox(page_number=1, left=0.1, top=0.1, right=1.2, bottom=0.2),
        D.BoundingBox(page_number=1, left=0.5, top=0.1, right=0.2, bottom=0.2),
        D.BoundingBox(page_number=1, left=0.1, top=0.5, right=0.2, bottom=0.2),
        D.BoundingBox(page_number=1, left=float("nan"), top=0.1, right=0.2, bottom=0.2),
    ],
)
def test_a_box_outside_its_page_is_refused(c, box):
    c.upload(content=b"bad boxes")
    job = c.claim()
    c.run_to_indexing(job)
    with pytest.raises(grpc.RpcError) as err:
        complete(c, job, [chunk(0, [box])])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and reason_of(err.value) == "INVALID_CHUNK"
    assert "chunk 0 has a box outside its page" in err.value.details()


def test_at_most_64_boxes_a_chunk(c):
    c.upload(content=b"many boxes")
    job = c.claim()
    c.run_to_indexing(job)
    with pytest.raises(grpc.RpcError) as err:
        complete(c, job, [chunk(0, [BOXES[0]] * 65)])
    assert reason_of(err.value) == "INVALID_CHUNK" and "at most 64" in err.value.details()
