"""Events NOTIFY only what someone listens to (migration 0014, notify.py `Listeners`).

Every commit that notifies takes one database-wide lock, so the queue's transitions notify a
document's or a collection's channel only while a row of `event_listeners` names it. These
tests pin both halves: nothing is notified without a listener, and every kind of listener
(WatchDocument, WatchCollection, a webhook subscription) registers itself, is woken by the
notification rather than by its safety-net re-read, survives the registrations being lost, and
leaves nothing behind."""

from __future__ import annotations

import threading
import uuid

import psycopg
from helpers import wait_for
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice_ingest import notify
from sluice_ingest.service import watches

from .helpers import Clients

DOCS = notify.DOCUMENTS_CHANNEL
COLLECTIONS = notify.COLLECTIONS_CHANNEL


def notes_until_sentinel(listener: psycopg.Connection, url: str) -> list[tuple[str, str]]:
    """Every notification `listener` got before a sentinel sent now: notifications arrive in
    commit order, so the sentinel's arrival means all earlier commits' notes have arrived."""
    sentinel = uuid.uuid4().hex
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_notify('sluice_test_sentinel', %s)", (sentinel,))
    notes = []
    for note in listener.notifies(timeout=10):
        if note.channel == "sluice_test_sentinel" and note.payload == sentinel:
            return notes
        notes.append((note.channel, note.payload))
    raise AssertionError(f"the sentinel never arrived; got {notes}")


def listening(url: str) -> psycopg.Connection:
    conn = psycopg.connect(url, autocommit=True)
    for channel in (DOCS, COLLECTIONS, "sluice_test_sentinel"):
        conn.execute(f"LISTEN {channel}")
    return conn


def registered(url: str) -> set[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return {(c, k) for c, k in conn.execute("SELECT channel, key FROM event_listeners")}


def collection_id(url: str, name: str = "docs") -> str:
    with psycopg.connect(url) as conn:
        return str(conn.execute("SELECT id FROM collections WHERE name = %s", (name,)).fetchone()[0])


def test_transitions_notify_only_what_a_listener_row_names(c, database_url):
    doc = c.upload()
    with listening(database_url) as listener:
        job = c.claim()
        c.stage(job, D.DOCUMENT_STATUS_PARSING)
        assert notes_until_sentinel(listener, database_url) == []  # nobody listens: no NOTIFY, no lock

        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO event_listeners VALUES (%s, %s, gen_random_uuid(), now() + interval '1 minute')", (DOCS, doc.id)
            )
        c.stage(job, D.DOCUMENT_STATUS_CHUNKING)
        assert notes_until_sentinel(listener, database_url) == [(DOCS, doc.id)]

        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("DELETE FROM event_listeners")
            conn.execute(
                "INSERT INTO event_listeners VALUES (%s, %s, gen_random_uuid(), now() + interval '1 minute')",
                (COLLECTIONS, collection_id(database_url)),
            )
        c.stage(job, D.DOCUMENT_STATUS_EMBEDDING)
        assert notes_until_sentinel(listener, database_url) == [(COLLECTIONS, collection_id(database_url))]


def test_a_watch_is_registered_while_it_runs_and_woken_by_notifications(c, database_url, monkeypatch):
    # Without a notification the stream would wait an hour: it ends only if every change notified it.
    monkeypatch.setattr(watches, "FIRST_RECHECK_SECONDS", 3600.0)
    monkeypatch.setattr(watches, "RECHECK_SECONDS", 3600.0)
    monkeypatch.setattr(notify, "LINGER_SECONDS", 0.2)
    doc = c.upload()
    seen: list[int] = []
    first = threading.Event()

    def watch():
        for event in c.docs.WatchDocument(ds.WatchDocumentRequest(id=doc.id)):
            seen.append(event.document.status)
            first.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    assert first.wait(10)
    assert (DOCS, doc.id) in registered(database_url)  # registered before the first read
    job = c.claim()
    c.run_to_indexing(job)
    c.complete(job)
    watcher.join(30)
    assert not watcher.is_alive(), f"the watch was not woken: it saw {seen}"
    assert seen[-1] == D.DOCUMENT_STATUS_READY
    # The last watcher left: the registration goes after its linger.
    assert wait_for(lambda: (DOCS, doc.id) not in registered(database_url))


def test_watch_collection_is_registered_and_woken(ingest_api_factory, database_url, monkeypatch):
    monkeypatch.setattr(notify, "LINGER_SECONDS", 0.2)
    api = ingest_api_factory(watch_recheck_seconds=3600, watch_heartbeat_seconds=3600)
    c = Clients(api.address)
    try:
        c.create_collection()
        stream = c.docs.WatchCollection(ds.WatchCollectionRequest(collection="docs"), timeout=120)
        assert next(stream).type == ds.COLLECTION_EVENT_TYPE_HEARTBEAT
        assert (COLLECTIONS, collection_id(database_url)) in registered(database_url)
        doc = c.upload()
        event = next(stream)  # only a notification can bring it: no re-read for an hour
        assert event.type == ds.COLLECTION_EVENT_TYPE_CHANGED and event.document.id == doc.id
        stream.cancel()
        assert wait_for(lambda: not registered(database_url))
    finally:
        c.close()


def test_registrations_come_back_after_the_database_lost_them(c, database_url, ingest_api, monkeypatch):
    """Crash recovery empties the unlogged table; the hub writes every key again when its
    LISTEN connection comes back."""
    monkeypatch.setattr(watches, "FIRST_RECHECK_SECONDS", 3600.0)
    monkeypatch.setattr(watches, "RECHECK_SECONDS", 3600.0)
    doc = c.upload()
    stream = c.docs.WatchDocument(ds.WatchDocumentRequest(id=doc.id))
    assert next(stream).document.status == D.DOCUMENT_STATUS_PENDING
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("TRUNCATE event_listeners")
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
        )
    assert wait_for(lambda: (DOCS, doc.id) in registered(database_url))
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    claimed, parsing = next(stream), next(stream)
    assert claimed.document.job_status == D.INGESTION_JOB_STATUS_RUNNING
    assert parsing.document.status == D.DOCUMENT_STATUS_PARSING
    stream.cancel()


def test_rows_of_a_dead_process_expire_and_a_stopped_one_leaves_none(ingest_api_factory, database_url, monkeypatch):
    monkeypatch.setattr(notify, "RENEW_SECONDS", 0.2)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO event_listeners VALUES (%s, 'gone', gen_random_uuid(), now() - interval '1 second')", (DOCS,))
    api = ingest_api_factory()
    c = Clients(api.address)
    c.create_collection()
    doc = c.upload()
    stream = c.docs.WatchDocument(ds.WatchDocumentRequest(id=doc.id))
    next(stream)
    assert wait_for(lambda: registered(database_url) == {(DOCS, doc.id)})  # the dead one's row is gone
    api.stop()
    assert registered(database_url) == set()
    c.close()


def test_a_watch_on_one_replica_is_woken_by_work_done_through_another(ingest_api_factory, database_url, monkeypatch):
    """Registrations are in the database, not in a process: the replica that moves the document
    notifies because the other one's watcher is registered."""
    monkeypatch.setattr(watches, "FIRST_RECHECK_SECONDS", 3600.0)
    monkeypatch.setattr(watches, "RECHECK_SECONDS", 3600.0)
    watching, working = Clients(ingest_api_factory().address), Clients(ingest_api_factory().address)
    try:
        watching.create_collection()
        doc = watching.upload()
        stream = watching.docs.WatchDocument(ds.WatchDocumentRequest(id=doc.id), timeout=60)
        assert next(stream).document.status == D.DOCUMENT_STATUS_PENDING
        job = working.claim()
        working.run_to_indexing(job)
        working.complete(job)
        statuses = [event.document.status for event in stream]  # ends at READY, or times out
        assert statuses[-1] == D.DOCUMENT_STATUS_READY and D.DOCUMENT_STATUS_INDEXING in statuses
    finally:
        watching.close()
        working.close()
