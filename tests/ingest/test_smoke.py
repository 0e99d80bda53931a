from sluice.v1 import document_pb2 as D

from .helpers import Clients


def test_upload_claim_complete(ingest_api):
    c = Clients(ingest_api.address)
    c.create_collection()
    doc = c.upload(content=b"hello world")
    assert doc.status == D.DOCUMENT_STATUS_PENDING and doc.job_status == D.INGESTION_JOB_STATUS_PENDING
    job = c.claim()
    assert job is not None and job.document_id == doc.id and job.attempt == 1
    c.run_to_indexing(job)
    done = c.complete(job)
    assert done.status == D.DOCUMENT_STATUS_READY and done.chunk_count == 2
    assert done.job_status == D.INGESTION_JOB_STATUS_SUCCEEDED
    got = c.get(doc.id)
    assert [a.outcome for a in got.attempt_history] == [D.ATTEMPT_OUTCOME_SUCCEEDED]
