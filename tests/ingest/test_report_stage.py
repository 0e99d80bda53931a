"""ReportStage is one statement (store/stages.py REPORT_STAGE_SQL): what each of its outcomes
writes, and that a refused report writes nothing a reader can see (no status, no attempt
stage, no event), against PostgreSQL through gRPC."""

from __future__ import annotations

import datetime as dt

import grpc
import pytest
from sluice.v1 import document_pb2 as D
from sluice_common.errors import reason_of

from .test_rules import db


def snapshot(url, document_id):
    """The document's status and progress, its attempts' stages and its event count."""
    with db(url) as conn:
        document = conn.execute(
            "SELECT status::text, progress_stage::text, progress_done, progress_total, error_code FROM documents WHERE id = %s",
            (document_id,),
        ).fetchone()
        stages = conn.execute(
            "SELECT a.stage::text FROM job_attempts a JOIN ingestion_jobs j ON j.id = a.job_id"
            " WHERE j.document_id = %s ORDER BY a.id",
            (document_id,),
        ).fetchall()
        events = conn.execute("SELECT count(*) FROM document_events WHERE document_id = %s", (document_id,)).fetchone()[0]
    return document, [s[0] for s in stages], events


def test_a_stage_change_moves_the_document_and_the_attempt_and_writes_one_event(c, database_url):
    doc = c.upload()
    job = c.claim()
    _, _, events = snapshot(database_url, doc.id)
    c.stage(job, D.DOCUMENT_STATUS_PARSING, 0, 3)
    document, stages, after = snapshot(database_url, doc.id)
    assert document == ("PARSING", "PARSING", 0, 3, None)
    assert stages == ["PARSING"] and after == events + 1


def test_a_tick_updates_progress_only(c, database_url):
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    c.stage(job, D.DOCUMENT_STATUS_CHUNKING, 0, 10)
    _, _, events = snapshot(database_url, doc.id)
    c.stage(job, D.DOCUMENT_STATUS_CHUNKING, 4, 10)
    document, stages, after = snapshot(database_url, doc.id)
    assert document == ("CHUNKING", "CHUNKING", 4, 10, None)
    assert stages == ["CHUNKING"] and after == events + 1


def test_an_illegal_jump_writes_nothing(c, database_url):
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING, 1, 2)
    before = snapshot(database_url, doc.id)
    for stage in (D.DOCUMENT_STATUS_EMBEDDING, D.DOCUMENT_STATUS_INDEXING):
        with pytest.raises(grpc.RpcError) as err:
            c.stage(job, stage)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert reason_of(err.value) == "ILLEGAL_TRANSITION"
    assert snapshot(database_url, doc.id) == before
    c.stage(job, D.DOCUMENT_STATUS_CHUNKING)  # the lease still holds: the legal next stage goes through
    assert c.get(doc.id).status == D.DOCUMENT_STATUS_CHUNKING


def test_a_stolen_lease_and_a_deleted_job_are_told_apart_and_write_nothing(c, database_url):
    doc = c.upload()
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    with db(database_url) as conn:  # another attempt took the job over
        conn.execute("UPDATE ingestion_jobs SET lease_token = gen_random_uuid() WHERE id = %s", (job.lease.job_id,))
    before = snapshot(database_url, doc.id)
    with pytest.raises(grpc.RpcError) as err:
        c.stage(job, D.DOCUMENT_STATUS_CHUNKING)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and reason_of(err.value) == "LEASE_NOT_HELD"
    assert snapshot(database_url, doc.id) == before
    with db(database_url) as conn:
        conn.execute("DELETE FROM documents WHERE id = %s", (doc.id,))
    with pytest.raises(grpc.RpcError) as err:
        c.stage(job, D.DOCUMENT_STATUS_CHUNKING)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and reason_of(err.value) == "JOB_NOT_FOUND"


def test_a_report_renews_the_lease_once_a_tenth_of_it_has_passed(c, database_url, ingest_api):
    """Quick reports leave `locked_at` (an indexed column) as it is, so the job row is updated in
    place; a lease is still never shorter than 0.9 of its length after a report."""
    doc = c.upload()
    job = c.claim()
    lease = ingest_api.settings.lease_seconds

    def locked_at():
        with db(database_url) as conn:
            return conn.execute("SELECT locked_at FROM ingestion_jobs WHERE document_id = %s", (doc.id,)).fetchone()[0]

    claimed = locked_at()
    first = c.stage(job, D.DOCUMENT_STATUS_PARSING)
    assert locked_at() == claimed  # reported at once: not renewed
    assert first.lease_expire_time.ToDatetime(tzinfo=claimed.tzinfo) == claimed + dt.timedelta(seconds=lease)
    with db(database_url) as conn:  # as if a tenth of the lease had passed since the claim
        conn.execute(
            "UPDATE ingestion_jobs SET locked_at = locked_at - make_interval(secs => %s) WHERE document_id = %s",
            (lease / 10, doc.id),
        )
    aged = locked_at()
    renewed = c.stage(job, D.DOCUMENT_STATUS_PARSING, 1, 3)
    assert locked_at() > aged
    assert renewed.lease_expire_time.ToDatetime(tzinfo=claimed.tzinfo) == locked_at() + dt.timedelta(seconds=lease)
