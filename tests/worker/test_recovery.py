"""Recovery without a person: ingest-api goes away in the middle of the work and comes back."""

from __future__ import annotations

import asyncio

import psycopg
from helpers import free_port
from sluice.v1 import document_pb2 as D

from .e2e import Docs, WorkerProcess


async def test_worker_rides_out_an_ingest_api_restart(ingest_api_factory, database_url, tmp_path):
    port = free_port()
    address = f"127.0.0.1:{port}"
    api = ingest_api_factory(bind=address, lease_seconds=3.0)
    docs = Docs(address)
    await docs.create_collection("restart")
    ids = [
        (await docs.upload("restart", f"note{i}.txt", f"Note {i}. Rivers carry boats through locks.\n\n{'x' * i}".encode())).id
        for i in range(8)
    ]
    worker = WorkerProcess(
        address, tmp_path / "worker.log", SLUICE_WORKER_CONCURRENCY="1", SLUICE_CLAIM_ERROR_BACKOFF_SECONDS="0.2"
    )
    try:
        await docs.wait(ids[0], {D.DOCUMENT_STATUS_READY}, timeout=120)
        # ingest-api disappears (crash, deploy) while the worker is between or inside jobs.
        await asyncio.to_thread(api.stop)
        await asyncio.sleep(2.0)
        assert worker.process.poll() is None, "the worker must survive ingest-api being away"
        ingest_api_factory(bind=address, lease_seconds=3.0)
        documents = await docs.wait_all(ids, timeout=120)
    finally:
        log = worker.log()
        worker.kill()
        await docs.close()
    assert "cannot claim jobs, ingest-api unreachable" in log  # the outage was real, and survived
    assert {d.status for d in documents} == {D.DOCUMENT_STATUS_READY}, [(d.filename, d.error_message) for d in documents]
    with psycopg.connect(database_url) as conn:
        # Exactly one set of chunks per document, whatever was interrupted.
        sets = conn.execute(
            "SELECT document_id, count(*), count(DISTINCT chunk_index) FROM chunks GROUP BY document_id"
        ).fetchall()
    assert len(sets) == len(ids) and all(total == distinct for _, total, distinct in sets)
