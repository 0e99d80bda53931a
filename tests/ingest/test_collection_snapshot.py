"""GetCollection and GetDocument answer from one snapshot: the collection's own columns and its generations
are read together, so the embedder it shows is the ACTIVE generation's at every moment, even
while a switch commits (docs/architecture.md, generations: the switch moves both in one
transaction). Found by CI: after a switch, an answer showed generation 2 ACTIVE with generation
1's embedder, because the two reads ran in two READ COMMITTED statements."""

from __future__ import annotations

import threading

import psycopg
from helpers import reads_beside
from sluice.v1 import collection_pb2
from sluice.v1 import document_service_pb2 as ds

from .helpers import Clients

READS = 400


def test_get_collection_never_mixes_a_collection_and_generations_of_two_commits(ingest_api, database_url):
    c = Clients(ingest_api.address)
    c.create_collection("docs")
    stop = threading.Event()
    flips = [0]

    def flip_both_in_one_transaction() -> None:
        """What a switch does to what GetCollection shows: the ACTIVE generation's embedder and
        the collection's columns, changed together, as fast as PostgreSQL commits."""
        with psycopg.connect(database_url, autocommit=True) as conn:
            while not stop.is_set():
                flips[0] += 1
                model = f"hashing-flip-{flips[0]}"
                with conn.transaction():
                    conn.execute(
                        "UPDATE collection_generations SET embedder_model = %s"
                        " WHERE state = 'ACTIVE' AND collection_id = (SELECT id FROM collections WHERE name = 'docs')",
                        (model,),
                    )
                    conn.execute("UPDATE collections SET embedder_model = %s WHERE name = 'docs'", (model,))

    flipper = threading.Thread(target=flip_both_in_one_transaction, daemon=True)
    flipper.start()
    mixed = []
    try:
        for _ in reads_beside(flips, READS):
            answer = c.docs.GetCollection(ds.GetCollectionRequest(name="docs"))
            (active,) = [g for g in answer.generations if g.state == collection_pb2.GENERATION_STATE_ACTIVE]
            if active.embedder.model != answer.embedder.model:
                mixed.append((answer.embedder.model, active.embedder.model))
    finally:
        stop.set()
        flipper.join(30)
    assert flips[0] > READS // 4, "the flips must run beside the reads"
    assert mixed == [], f"{len(mixed)} of {READS} answers mixed two commits, e.g. {mixed[:3]}"


def test_get_document_never_mixes_a_document_and_attempts_of_two_commits(ingest_api, database_url):
    """GetDocument reads the document, then its attempts (and versions): one snapshot too."""
    c = Clients(ingest_api.address)
    c.create_collection("docs")
    document = c.upload("docs", b"text", "a.txt")
    c.fail(c.claim(), retryable=False, code="DOCUMENT_CORRUPT", message="damaged 0")
    stop = threading.Event()
    flips = [0]

    def flip_both_in_one_transaction() -> None:
        with psycopg.connect(database_url, autocommit=True) as conn:
            while not stop.is_set():
                flips[0] += 1
                with conn.transaction():
                    conn.execute(
                        "UPDATE job_attempts SET error_message = %s WHERE job_id = (SELECT id FROM ingestion_jobs WHERE document_id = %s)",
                        (f"damaged {flips[0]}", document.id),
                    )
                    conn.execute("UPDATE documents SET error_message = %s WHERE id = %s", (f"damaged {flips[0]}", document.id))

    flipper = threading.Thread(target=flip_both_in_one_transaction, daemon=True)
    flipper.start()
    mixed = []
    try:
        for _ in reads_beside(flips, READS):
            answer = c.get(document.id)
            if answer.error_message != answer.attempt_history[-1].error_message:
                mixed.append((answer.error_message, answer.attempt_history[-1].error_message))
    finally:
        stop.set()
        flipper.join(30)
    assert flips[0] > READS // 4, "the flips must run beside the reads"
    assert mixed == [], f"{len(mixed)} of {READS} answers mixed two commits, e.g. {mixed[:3]}"
