"""The events log as an outbox: read a collection at a time in commit-safe order, deletions kept.

Real PostgreSQL, real transactions held open side by side: identity ids are taken at insert and
transactions commit in any order, so the reader must never hand out an event past one that a
still-running transaction can yet commit."""

from __future__ import annotations

import psycopg
import pytest
from sluice_common.errors import InvalidArgument
from sluice_ingest.domain import EventCursor
from sluice_ingest.store.events import COLLECTION_EVENTS_SQL

COPY_LAST_EVENT = """
    INSERT INTO document_events (document_id, status, progress_done, progress_total, progress_unit, chunk_count,
                                 job_status, attempts, max_attempts, available_at, updated_at)
    SELECT document_id, status, progress_done + 1, progress_total, progress_unit, chunk_count, job_status,
           attempts, max_attempts, available_at, updated_at
      FROM document_events WHERE document_id = %s ORDER BY id DESC LIMIT 1
    RETURNING id
"""


def read(url: str, after: EventCursor, limit: int = 100) -> list[tuple[int, int, str, bool]]:
    with psycopg.connect(url, autocommit=True) as conn:
        tenant_id, collection_id = conn.execute("SELECT tenant_id, id FROM collections WHERE name = 'docs'").fetchone()
        rows = conn.execute(
            COLLECTION_EVENTS_SQL,
            {
                "tenant_id": tenant_id,
                "collection_id": collection_id,
                "txid": after.txid,
                "event_id": after.event_id,
                "limit": limit,
            },
        ).fetchall()
        return [(row[0], row[1], str(row[2]), row[3]) for row in rows]


def drain(url: str, cursor: EventCursor) -> tuple[list[int], EventCursor]:
    rows = read(url, cursor)
    if rows:
        cursor = EventCursor(rows[-1][1], rows[-1][0])
    return [row[0] for row in rows], cursor


def test_an_event_committed_late_with_a_lower_id_is_not_skipped(c, database_url):
    first, second = c.upload(content=b"first"), c.upload(content=b"second")
    _, cursor = drain(database_url, EventCursor(0, 0))
    with psycopg.connect(database_url) as slow, psycopg.connect(database_url) as fast:
        (low,) = slow.execute(COPY_LAST_EVENT, (first.id,)).fetchone()  # takes the lower id, stays open
        (high,) = fast.execute(COPY_LAST_EVENT, (second.id,)).fetchone()
        fast.commit()
        assert high > low
        seen, cursor = drain(database_url, cursor)
        assert seen == []  # 'high' is committed but an older writer is still running
        slow.commit()
    seen, cursor = drain(database_url, cursor)
    assert sorted(seen) == sorted([low, high])  # both, once, after the slow writer ended
    assert drain(database_url, cursor)[0] == []


def test_a_writer_that_took_its_transaction_id_first_is_waited_for(c, database_url):
    first, second = c.upload(content=b"one"), c.upload(content=b"two")
    _, cursor = drain(database_url, EventCursor(0, 0))
    with psycopg.connect(database_url) as early, psycopg.connect(database_url) as late:
        early.execute("SELECT pg_current_xact_id()")  # the older transaction...
        (late_id,) = late.execute(COPY_LAST_EVENT, (second.id,)).fetchone()
        late.commit()
        (early_id,) = early.execute(COPY_LAST_EVENT, (first.id,)).fetchone()  # ...writes the higher id
        assert drain(database_url, cursor)[0] == []
        early.commit()
    seen, cursor = drain(database_url, cursor)
    assert seen == [early_id, late_id]  # log order is transaction order
    assert drain(database_url, cursor)[0] == []


def test_events_are_filled_with_collection_and_tenant_and_read_in_pages(c, database_url):
    for i in range(5):
        c.upload(content=f"page {i}".encode())
    everything = read(database_url, EventCursor(0, 0))
    assert len(everything) == 5
    cursor, paged = EventCursor(0, 0), []
    while page := read(database_url, cursor, limit=2):
        paged += [row[0] for row in page]
        cursor = EventCursor(page[-1][1], page[-1][0])
    assert paged == [row[0] for row in everything]


def test_a_deleted_document_leaves_one_last_event_and_a_deleted_collection_takes_its_log(c, database_url):
    doc = c.upload(content=b"short-lived")
    from sluice.v1 import document_service_pb2 as ds

    c.docs.DeleteDocument(ds.DeleteDocumentRequest(id=doc.id))
    rows = read(database_url, EventCursor(0, 0))
    assert [(row[2], row[3]) for row in rows][-1] == (doc.id, True)
    assert sum(row[3] for row in rows) == 1
    c.upload(content=b"stays until the collection goes")
    c.docs.DeleteCollection(ds.DeleteCollectionRequest(name="docs", force=True))
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM document_events").fetchone()[0] == 0


@pytest.mark.parametrize("text", ["", "12", ".3", "1.", "a.b", "1.2.3", "-1.2", "9" * 30 + "." + "9" * 20])
def test_a_malformed_cursor_is_refused(text):
    with pytest.raises(InvalidArgument):
        EventCursor.parse(text)


def test_a_cursor_round_trips():
    cursor = EventCursor(123456789012, 42)
    assert EventCursor.parse(cursor.encode()) == cursor
    assert EventCursor(1, 9) < EventCursor(2, 1)
