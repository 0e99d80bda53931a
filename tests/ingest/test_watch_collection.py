"""WatchCollection over real PostgreSQL and real gRPC: every event of a collection, in log order,
exactly once across reconnects, with server-side filters; retention and its expired cursors.

The log read straight from SQL (ORDER BY txid, id once every writer has finished) is the oracle."""

from __future__ import annotations

import hashlib
import threading
import time

import grpc
import psycopg
import pytest
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import document_service_pb2_grpc
from sluice_common.channels import keyed_channel
from sluice_common.errors import error_info, reason_of

from .helpers import Clients

HEARTBEAT = ds.COLLECTION_EVENT_TYPE_HEARTBEAT
CHANGED = ds.COLLECTION_EVENT_TYPE_CHANGED
DELETED = ds.COLLECTION_EVENT_TYPE_DELETED


@pytest.fixture
def api(ingest_api_factory):
    # Frequent heartbeats: the readers below check their stop condition on each one.
    return ingest_api_factory(watch_heartbeat_seconds=0.2)


@pytest.fixture
def c(api):
    clients = Clients(api.address)
    clients.create_collection()
    yield clients
    clients.close()


def log_of(url: str, collection: str = "docs") -> list[tuple[int, str, bool, str]]:
    """(event id, status, deleted, document id) of the collection's whole log, in log order."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT e.id, e.status::text, e.deleted, e.document_id::text FROM document_events e"
            " JOIN collections c ON c.id = e.collection_id WHERE c.name = %s ORDER BY e.txid, e.id",
            (collection,),
        ).fetchall()
    return [(row[0], row[1], row[2], row[3]) for row in rows]


def cursor_of(url: str, event_id: int) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        (txid,) = conn.execute("SELECT txid::text FROM document_events WHERE id = %s", (event_id,)).fetchone()
    return f"{txid}.{event_id}"


def watch(c: Clients, **request):
    return c.docs.WatchCollection(ds.WatchCollectionRequest(collection="docs", **request), timeout=120)


def take(call, count: int, *, keep_heartbeats: bool = False) -> list[ds.CollectionEvent]:
    """The next `count` messages of a stream (heartbeats skipped unless asked for)."""
    got: list[ds.CollectionEvent] = []
    for event in call:
        if event.type != HEARTBEAT or keep_heartbeats:
            got.append(event)
        if len(got) == count:
            break
    return got


def until_quiet(call) -> list[ds.CollectionEvent]:
    """Events until the first heartbeat that follows the backlog (nothing more to send)."""
    got: list[ds.CollectionEvent] = []
    for event in call:
        if event.type == HEARTBEAT:
            break
        got.append(event)
    return got


def process(c: Clients, worker: str = "w1") -> bool:
    """Claim one job and take it to READY; False when nothing was due."""
    job = c.claim(worker, wait=0.5)
    if job is None:
        return False
    c.run_to_indexing(job)
    c.complete(job)
    return True


def test_a_client_disconnected_during_a_burst_resumes_with_its_cursor_and_gets_every_event_once_in_order(c, database_url):  # noqa: C901 - its threads are closures over the test's state
    opening = next(iter(watch(c)))  # from now: the first message says where the stream starts
    assert opening.type == HEARTBEAT and opening.cursor
    uploaders, workers, per_uploader = 3, 3, 12
    uploads_done = threading.Event()
    errors: list[BaseException] = []

    def upload(n: int) -> None:
        try:
            for i in range(per_uploader):
                c.upload(content=f"uploader {n} document {i}".encode(), filename=f"u{n}-{i}.txt")
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    def work(n: int) -> None:
        try:
            while process(c, f"w{n}") or not uploads_done.is_set():
                pass
        except BaseException as exc:
            errors.append(exc)

    upload_threads = [threading.Thread(target=upload, args=(n,)) for n in range(uploaders)]
    work_threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
    burst_started = time.perf_counter()
    for thread in [*upload_threads, *work_threads]:
        thread.start()

    received: list[ds.CollectionEvent] = []
    cursor = opening.cursor
    connections = 0
    expected: list[int] | None = None
    # Disconnect twice in the middle of the burst, then read to the end.
    for stop_after in (40, 100, None):
        connections += 1
        call = watch(c, after_cursor=cursor)
        for event in call:
            cursor = event.cursor
            if event.type != HEARTBEAT:
                received.append(event)
            if stop_after is not None and len(received) >= stop_after:
                call.cancel()  # the client goes away without warning
                time.sleep(0.2)  # and the burst goes on without it
                break
            if expected is None and not any(t.is_alive() for t in upload_threads):
                uploads_done.set()
                if not any(t.is_alive() for t in work_threads):
                    expected = [row[0] for row in log_of(database_url)]
            if expected is not None and len(received) >= len(expected):
                break
    burst_seconds = time.perf_counter() - burst_started
    for thread in [*upload_threads, *work_threads]:
        thread.join(60)
    assert errors == []
    assert expected is not None and len(expected) >= 200
    assert [e.event_id for e in received] == expected  # every event, once, in log order
    assert connections == 3
    ready = [e for e in received if e.document.status == D.DOCUMENT_STATUS_READY]
    assert len(ready) == uploaders * per_uploader and all(e.type == CHANGED for e in ready)

    # The figure: how fast one stream delivers a backlog (printed, not asserted).
    started = time.perf_counter()
    replayed = take(watch(c, start_from_oldest=True), len(expected))
    elapsed = time.perf_counter() - started
    assert [e.event_id for e in replayed] == expected
    print(f"\nburst: {len(received)} events over 3 connections in {burst_seconds:.2f} s (as fast as they were written)")
    print(f"WatchCollection delivered {len(replayed)} events in {elapsed:.3f} s: {len(replayed) / elapsed:.0f} events/s")


def test_filters_are_applied_on_the_server_and_resumption_stays_exactly_once(c, database_url):
    ready, failed, pending, gone = (c.upload(content=f"doc {i}".encode(), filename=f"{i}.txt") for i in range(4))
    process(c)  # the oldest job: `ready`
    job = c.claim("w1", wait=0.5)
    c.fail(job, retryable=False, code="DOCUMENT_CORRUPT", message="broken")
    c.docs.DeleteDocument(ds.DeleteDocumentRequest(id=gone.id))
    log = log_of(database_url)

    terminal = until_quiet(watch(c, start_from_oldest=True, terminal_only=True))
    expected = [row[0] for row in log if row[2] or row[1] in ("READY", "FAILED")]
    assert [e.event_id for e in terminal] == expected and len(expected) == 3
    assert [(e.document.id, e.type) for e in terminal] == [(ready.id, CHANGED), (failed.id, CHANGED), (gone.id, DELETED)]
    assert terminal[1].document.status == D.DOCUMENT_STATUS_FAILED and terminal[1].document.error_code == "DOCUMENT_CORRUPT"
    assert terminal[2].document.filename == "3.txt"  # the document is gone; its event kept its last state and name

    statuses = [D.DOCUMENT_STATUS_PENDING, D.DOCUMENT_STATUS_READY]
    wanted = [row[0] for row in log if row[2] or row[1] in ("PENDING", "READY")]
    first = take(watch(c, start_from_oldest=True, statuses=statuses), 2)
    rest = until_quiet(watch(c, after_cursor=first[-1].cursor, statuses=statuses))  # resume after the last delivered
    assert [e.event_id for e in first + rest] == wanted
    assert {e.document.status for e in first + rest} <= {D.DOCUMENT_STATUS_PENDING, D.DOCUMENT_STATUS_READY}
    assert pending.id in {e.document.id for e in first + rest}

    # Nothing matches: the stream still reads past every row, and says so in its heartbeat.
    c.create_collection("quiet")
    for i in range(3):
        c.upload("quiet", content=f"quiet {i}".encode())
    call = c.docs.WatchCollection(ds.WatchCollectionRequest(collection="quiet", start_from_oldest=True, terminal_only=True))
    opening = next(iter(call))
    call.cancel()
    assert opening.type == HEARTBEAT
    assert opening.cursor == cursor_of(database_url, log_of(database_url, "quiet")[-1][0])


def test_a_live_stream_sends_new_events_as_they_commit(c, database_url):
    call = watch(c)
    assert next(call).type == HEARTBEAT
    doc = c.upload(content=b"live")
    event = take(call, 1)[0]
    call.cancel()
    assert event.type == CHANGED and event.document.id == doc.id and event.document.filename == "a.txt"
    assert event.document.status == D.DOCUMENT_STATUS_PENDING and event.document.collection == "docs"
    assert event.event_id == log_of(database_url)[-1][0] and event.create_time.seconds > 0


def test_an_event_held_back_by_an_older_writer_is_sent_once_that_writer_ends_without_a_new_notification(c, database_url):
    call = watch(c)
    assert next(call).type == HEARTBEAT
    received: list[ds.CollectionEvent] = []
    reader = threading.Thread(target=lambda: received.extend(take(call, 1)))
    reader.start()
    with psycopg.connect(database_url) as older:
        older.execute("SELECT pg_current_xact_id()")  # an older transaction, still running, writes no event
        doc = c.upload(content=b"committed while an older writer runs")  # its notification comes now
        reader.join(1.0)
        assert received == []  # not readable yet: the older writer could still commit an earlier event
        older.commit()  # ends with no event, so no notification: the watcher's re-check finds it
    reader.join(30)
    call.cancel()
    assert [e.document.id for e in received] == [doc.id]


def expect(code: grpc.StatusCode, reason: str, call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        for _ in call:
            pass
    assert (err.value.code(), reason_of(err.value)) == (code, reason), err.value.details()
    return err.value


def test_bad_requests_and_other_tenants_collections(c, api):
    import auth_keys
    from sluice.v1 import admin_service_pb2 as admin_pb2
    from sluice.v1 import admin_service_pb2_grpc

    IA, NF = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
    for cursor in ("nonsense", "1.2.3", "-5.1", "12", "99999999999.1"):  # the last is ahead of the log
        expect(IA, "INVALID_CURSOR", watch(c, after_cursor=cursor))
    expect(IA, "INVALID_WATCH_START", watch(c, after_cursor="1.1", start_from_oldest=True))
    expect(IA, "MISSING_COLLECTION", c.docs.WatchCollection(ds.WatchCollectionRequest()))
    expect(IA, "INVALID_STATUS", watch(c, statuses=[99]))
    expect(NF, "COLLECTION_NOT_FOUND", c.docs.WatchCollection(ds.WatchCollectionRequest(collection="nope")))

    with keyed_channel(api.address, auth_keys.KEYS["admin"]) as admin_channel:
        admin = admin_service_pb2_grpc.AdminServiceStub(admin_channel)
        admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="b")))
        key = admin.CreateApiKey(admin_pb2.CreateApiKeyRequest(tenant="b", role=admin_pb2.API_KEY_ROLE_CLIENT)).secret
    channel = keyed_channel(api.address, key)
    b = document_service_pb2_grpc.DocumentServiceStub(channel)
    c.upload(content=b"default's own")
    theirs = expect(
        NF, "COLLECTION_NOT_FOUND", b.WatchCollection(ds.WatchCollectionRequest(collection="docs", start_from_oldest=True))
    )
    nobody = expect(
        NF, "COLLECTION_NOT_FOUND", b.WatchCollection(ds.WatchCollectionRequest(collection="none", start_from_oldest=True))
    )
    assert theirs.details().replace("docs", "X") == nobody.details().replace("none", "X")
    channel.close()


def test_deleting_the_collection_ends_its_watchers_with_not_found(c):
    call = watch(c)
    assert next(call).type == HEARTBEAT
    c.upload(content=b"soon gone")
    assert take(call, 1)[0].type == CHANGED
    c.docs.DeleteCollection(ds.DeleteCollectionRequest(name="docs", force=True))
    expect(grpc.StatusCode.NOT_FOUND, "COLLECTION_NOT_FOUND", call)


def test_a_quiet_stream_gets_heartbeats_with_the_same_cursor(c):
    c.upload(content=b"one")
    beats = take(watch(c), 3, keep_heartbeats=True)
    assert [e.type for e in beats] == [HEARTBEAT] * 3
    assert len({e.cursor for e in beats}) == 1 and not beats[0].HasField("document")


def test_server_shutdown_ends_streams_with_unavailable_and_the_cursor(ingest_api_factory):
    server = ingest_api_factory(watch_heartbeat_seconds=60)
    clients = Clients(server.address)
    clients.create_collection()
    call = watch(clients)
    opening = next(call)
    assert opening.type == HEARTBEAT

    def stop() -> None:  # what RunningIngestApi.stop does, with a long grace
        server._call(server.app.stop(60), timeout=90)
        server.loop.call_soon_threadsafe(server.loop.stop)
        server.thread.join(10)
        server.loop.close()

    stopping = threading.Thread(target=stop)
    stopping.start()
    err = expect(grpc.StatusCode.UNAVAILABLE, "SERVER_SHUTTING_DOWN", call)  # ended, not cut at the grace
    assert error_info(err).metadata["cursor"] == opening.cursor
    stopping.join(90)
    clients.close()


# --------------------------------------------------------------------------- retention


def age(url: str, event_ids: list[int], days: int = 8) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "UPDATE document_events SET created_at = now() - make_interval(days => %s) WHERE id = ANY(%s)", (days, event_ids)
        )


def prune(api) -> tuple[int, int]:
    return api._call(api.app.retention.prune_once())


def test_a_cursor_older_than_the_retention_gets_out_of_range_with_the_oldest_cursor(ingest_api_factory, database_url):
    api = ingest_api_factory(events_prune_batch=2, watch_heartbeat_seconds=0.2)  # several small batches
    c = Clients(api.address)
    c.create_collection()
    first, second = c.upload(content=b"first"), c.upload(content=b"second")
    process(c)  # `first` to READY: claim, four stages, complete
    log = log_of(database_url)
    start = take(watch(c, start_from_oldest=True), 1)[0].cursor  # a cursor after the first event
    old = [row[0] for row in log if row[3] == first.id][:-1]  # all of `first` but its latest
    horizon = cursor_of(database_url, max(old, key=lambda i: [row[0] for row in log].index(i)))
    age(database_url, [row[0] for row in log])  # everything is old; only superseded events may go
    assert prune(api) == (len(old), 0)
    remaining = log_of(database_url)
    assert [row[0] for row in remaining] == [row[0] for row in log if row[0] not in old]

    err = expect(grpc.StatusCode.OUT_OF_RANGE, "EVENTS_CURSOR_EXPIRED", watch(c, after_cursor=start))
    assert error_info(err).metadata["oldest_cursor"] == horizon and horizon in err.details()
    resumed = until_quiet(watch(c, after_cursor=horizon))  # from the oldest cursor: what is left after it
    after_horizon = [row[0] for row in log][[row[0] for row in log].index(int(horizon.split(".")[1])) + 1 :]
    assert [e.event_id for e in resumed] == after_horizon
    assert resumed[-1].document.status == D.DOCUMENT_STATUS_READY
    # A replay of everything retained still works, and shows both documents' latest states.
    replay = until_quiet(watch(c, start_from_oldest=True))
    assert [e.event_id for e in replay] == [row[0] for row in remaining]
    assert {e.document.id for e in replay} == {first.id, second.id}

    # WatchDocument reads a document by id: it works on a pruned document and sees what follows.
    watching = c.docs.WatchDocument(ds.WatchDocumentRequest(id=second.id), timeout=60)
    assert next(watching).document.status == D.DOCUMENT_STATUS_PENDING
    process(c)
    assert [e.document.status for e in watching][-1] == D.DOCUMENT_STATUS_READY
    c.close()


def test_pruning_by_count_keeps_each_documents_latest_events_and_watch_document_works(ingest_api_factory, database_url):
    api = ingest_api_factory(events_per_document=2, events_prune_batch=3, watch_heartbeat_seconds=0.2)
    c = Clients(api.address)
    c.create_collection()
    done, deleted, running = (c.upload(content=f"count {i}".encode()) for i in range(3))
    process(c)
    process(c)
    c.docs.DeleteDocument(ds.DeleteDocumentRequest(id=deleted.id))
    job = c.claim("w1", wait=0.5)
    c.run_to_indexing(job)  # `running` is INDEXING with a long history
    before = log_of(database_url)
    by_age, by_count = prune(api)
    after = log_of(database_url)
    assert by_age == 0 and by_count == len(before) - len(after) > 0
    for doc in (done, deleted, running):
        kept = [row for row in before if row[3] == doc.id][-2:]
        assert [row for row in after if row[3] == doc.id] == kept  # the newest two, latest included
    assert [row for row in after if row[3] == deleted.id][-1][2]  # the deletion stays
    # Resuming sees every document's final state.
    final = {e.document.id: e for e in until_quiet(watch(c, start_from_oldest=True))}
    assert final[done.id].document.status == D.DOCUMENT_STATUS_READY and final[deleted.id].type == DELETED
    # WatchDocument still follows `running` to READY.
    watching = c.docs.WatchDocument(ds.WatchDocumentRequest(id=running.id), timeout=60)
    assert next(watching).document.status == D.DOCUMENT_STATUS_INDEXING
    c.complete(job)
    assert [e.document.status for e in watching][-1] == D.DOCUMENT_STATUS_READY
    assert prune(api) == (0, 1)  # the completion pushed one more out; nothing else changed
    c.close()


# --------------------------------------------------------------------------- the event's whole document

# What a CollectionEvent's document and GetDocument's answer may differ in (docs/clients.md,
# "WatchCollection"): the token of each read, and what GetDocument alone fills.
# What GetDocument fills and an event's document does not (Document's comments say so): the
# priority is the job's, not in the log.
READ_ONLY_FIELDS = ("consistency_token", "attempt_history", "versions", "priority")


def comparable(document: D.Document) -> D.Document:
    copy = D.Document()
    copy.CopyFrom(document)
    for name in READ_ONLY_FIELDS:
        copy.ClearField(name)
    return copy


def event_numbered(call, event_id: int) -> ds.CollectionEvent:
    for event in call:
        if event.event_id == event_id:
            return event
    raise AssertionError(f"the stream ended before event {event_id}")


def test_each_event_carries_the_document_getdocument_shows_at_that_event(ingest_api_factory, database_url):
    """Upload with source_uri and metadata, a stage with progress, a retryable failure (a retry
    waiting), the retry, READY: after each step its event's document equals GetDocument's answer
    but for READ_ONLY_FIELDS. The deletion's event is the last of them with update_time moved on
    (its row is gone: the event kept its description, migration 0025); read again after the
    deletion, the earlier events keep their state but lose the description."""
    # The retry waits a minute, not the suite's 50 ms: GetDocument shows next_attempt_time only
    # while it lies ahead, so a read later than the retry's time would differ from the event.
    api = ingest_api_factory(watch_heartbeat_seconds=0.2, retry_delay_seconds=60.0)
    c = Clients(api.address)
    c.create_collection()
    call = watch(c)
    assert next(call).type == HEARTBEAT
    content = b"the amber signal, version one"
    created = c.docs.UploadDocument(
        iter(
            [
                ds.UploadDocumentRequest(
                    metadata=ds.UploadDocumentMetadata(
                        collection="docs",
                        filename="notes.txt",
                        source_uri="handbook/notes.txt",
                        metadata={"team": "ops"},
                        typed_metadata={"year": D.MetadataValue(number_value=2024), "draft": D.MetadataValue(bool_value=True)},
                    )
                ),
                ds.UploadDocumentRequest(data=content),
                ds.UploadDocumentRequest(
                    trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
                ),
            ]
        )
    )
    seen: list[D.Document] = []

    def check() -> D.Document:
        event = event_numbered(call, log_of(database_url)[-1][0])
        answer = c.get(created.id)
        assert comparable(event.document) == comparable(answer)
        assert event.document.consistency_token  # a token of its own read
        seen.append(event.document)
        return event.document

    first = check()
    assert first.source_uri == "handbook/notes.txt" and first.version == 1
    assert first.content_sha256 == hashlib.sha256(content).hexdigest() and first.size_bytes == len(content)
    assert first.metadata == {"team": "ops", "year": "2024", "draft": "true"}
    assert first.typed_metadata["year"].number_value == 2024 and first.create_time == created.create_time
    job = c.claim()
    check()
    c.stage(job, D.DOCUMENT_STATUS_PARSING, done=1, total=3)
    assert check().progress.total == 3
    c.fail(job, retryable=True)
    assert check().HasField("next_attempt_time")
    with psycopg.connect(database_url, autocommit=True) as conn:  # the retry is due now
        conn.execute("UPDATE ingestion_jobs SET available_at = now() WHERE document_id = %s", (created.id,))
    check()
    job = c.claim(wait=2)
    assert job is not None
    c.run_to_indexing(job)
    check()
    c.complete(job)
    ready = check()
    assert ready.status == D.DOCUMENT_STATUS_READY and ready.chunk_count == 2 and ready.attempts == 2
    assert ready.create_time == created.create_time and ready.update_time.seconds > 0
    c.docs.DeleteDocument(ds.DeleteDocumentRequest(id=created.id))
    gone = event_numbered(call, log_of(database_url)[-1][0])
    call.cancel()
    assert gone.type == DELETED
    deletion, last = comparable(gone.document), comparable(ready)
    deletion.ClearField("update_time")
    last.ClearField("update_time")
    assert deletion == last and gone.document.source_uri == "handbook/notes.txt"
    assert len(seen) >= 6
    replay = until_quiet(watch(c, start_from_oldest=True))
    assert [e.event_id for e in replay][-1] == gone.event_id and len(replay) >= len(seen) + 1
    assert (replay[-1].document.filename, replay[-1].document.source_uri) == ("notes.txt", "handbook/notes.txt")
    assert all(e.document.filename == "" and e.document.source_uri == "" and e.document.status for e in replay[:-1])
    c.close()
