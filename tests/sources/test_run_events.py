"""A sync run's start, progress and end in the collection's events log (docs/sources.md, "Run
events"): on WatchCollection, in log order with the document events and resumable by the same
cursor; on webhooks that name the run event types; never on another tenant's watch; written in
the transaction of the change they report (a runner whose lease was taken over writes none, and a
resumed run starts once).

Real ingest-api (SourceService, DocumentService), the real runner over the test's PostgreSQL,
real files, a real HTTP receiver; the log read straight from SQL is the oracle of the order."""

from __future__ import annotations

import asyncio

import grpc
import psycopg
import pytest
from google.protobuf import json_format
from helpers import wait_for
from ingest.webhook_receiver import Receiver
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import source_service_pb2 as src
from sluice.v1 import webhook_service_pb2 as wh
from sluice.v1 import webhook_service_pb2_grpc

from .helpers import Sources, create_tenant_key, run_pending, runner_settings

HEARTBEAT = ds.COLLECTION_EVENT_TYPE_HEARTBEAT
CHANGED = ds.COLLECTION_EVENT_TYPE_CHANGED
STARTED = ds.COLLECTION_EVENT_TYPE_SOURCE_RUN_STARTED
PROGRESS = ds.COLLECTION_EVENT_TYPE_SOURCE_RUN_PROGRESS
FINISHED = ds.COLLECTION_EVENT_TYPE_SOURCE_RUN_FINISHED
RUN_TYPES = {STARTED, PROGRESS, FINISHED}
INCLUDED = ds.SOURCE_RUN_EVENTS_INCLUDED
ONLY = ds.SOURCE_RUN_EVENTS_ONLY


@pytest.fixture
def api(ingest_api_factory, root):
    # Frequent heartbeats: `until_quiet` stops at the first one after the backlog.
    return ingest_api_factory(
        source_local_roots=str(root),
        source_allow_private_networks=True,
        watch_heartbeat_seconds=0.2,
        webhook_allow_private_networks=True,
    )


def write(folder, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def until_quiet(s: Sources, **request) -> list[ds.CollectionEvent]:
    """The collection's retained events (from the oldest, or after a cursor) up to the first
    heartbeat after the backlog."""
    if "after_cursor" not in request:
        request["start_from_oldest"] = True
    got = []
    for event in s.clients.docs.WatchCollection(ds.WatchCollectionRequest(collection="docs", **request), timeout=60):
        if event.type == HEARTBEAT:
            break
        got.append(event)
    return got


def log_order(database_url: str) -> list[int]:
    """Event ids of the collection's log in (txid, id) order: the order a reader must see."""
    with psycopg.connect(database_url) as conn:
        return [
            r[0]
            for r in conn.execute(
                "SELECT e.id FROM document_events e JOIN collections c ON c.id = e.collection_id"
                " WHERE c.name = 'docs' ORDER BY e.txid, e.id"
            ).fetchall()
        ]


def counts(run: src.SourceRun) -> tuple[int, int, int, int, int]:
    return run.listed, run.uploaded, run.unchanged, run.deleted, run.failed


def test_a_sync_run_is_seen_started_then_progress_then_finished_in_log_order_with_its_documents(api, root, database_url):
    s = Sources(api.address)
    s.clients.create_collection("docs")
    folder = root / "handbook"
    write(folder, {"a.md": "alpha", "b.md": "bravo", "c.md": "charlie"})
    source = s.create_folder("docs", str(folder), display_name="handbook")
    run = s.sync(source)
    assert run_pending(database_url, source_local_roots=str(root)) == 1

    events = until_quiet(s, source_runs=INCLUDED)
    assert [e.event_id for e in events] == log_order(database_url)  # every event, in log order
    kinds = [e.type for e in events]
    assert kinds == [STARTED, CHANGED, CHANGED, CHANGED, PROGRESS, FINISHED], kinds
    started, progress, finished = (e.source_run for e in events if e.type in RUN_TYPES)
    for event in (started, progress, finished):
        assert event.source == source.name and event.source_display_name == "handbook"
        assert event.run.id == run.id and event.run.name == f"{source.name}/runs/{run.id}"
    assert all(not e.HasField("document") for e in events if e.type in RUN_TYPES)
    assert started.run.state == src.SOURCE_RUN_STATE_RUNNING and started.run.attempts == 1
    assert started.run.HasField("start_time") and counts(started.run) == (0, 0, 0, 0, 0)
    # The counts once every item was compared (before the deletions), then the final ones.
    assert progress.run.state == src.SOURCE_RUN_STATE_RUNNING and counts(progress.run) == (3, 3, 0, 0, 0)
    assert finished.run.state == src.SOURCE_RUN_STATE_SUCCEEDED and counts(finished.run) == (3, 3, 0, 0, 0)
    assert finished.run.HasField("end_time") and finished.run == s.last_run(source)
    assert {e.document.filename for e in events if e.type == CHANGED} == {"a.md", "b.md", "c.md"}

    # Resumable by the same cursor: after the PROGRESS event comes the FINISHED one, once.
    after_progress = until_quiet(s, after_cursor=events[4].cursor, source_runs=INCLUDED)
    assert [e.event_id for e in after_progress] == [events[5].event_id]
    assert until_quiet(s, after_cursor=events[5].cursor, source_runs=INCLUDED) == []

    # A client that does not ask for run events (every client written before them) gets the
    # document events alone; ONLY gives the run events alone.
    assert [e.type for e in until_quiet(s)] == [CHANGED, CHANGED, CHANGED]
    assert [e.type for e in until_quiet(s, source_runs=ONLY)] == [STARTED, PROGRESS, FINISHED]
    # statuses and terminal_only filter document events only: the run events still come.
    assert [e.type for e in until_quiet(s, source_runs=INCLUDED, statuses=[D.DOCUMENT_STATUS_READY])] == [
        STARTED,
        PROGRESS,
        FINISHED,
    ]  # nothing is READY (no worker): no document event passes
    assert [e.type for e in until_quiet(s, source_runs=INCLUDED, terminal_only=True)] == [STARTED, PROGRESS, FINISHED]
    assert [e.type for e in until_quiet(s, source_runs=INCLUDED, statuses=[D.DOCUMENT_STATUS_PENDING])] == kinds
    assert [e.type for e in until_quiet(s, statuses=[D.DOCUMENT_STATUS_READY])] == []

    # A second sync, unchanged: started, progress (all unchanged), finished; the stream that
    # follows from the last cursor sees exactly these.
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    second = until_quiet(s, after_cursor=events[-1].cursor, source_runs=INCLUDED)
    assert [e.type for e in second] == [STARTED, PROGRESS, FINISHED]
    assert counts(second[-1].source_run.run) == (3, 0, 3, 0, 0)


def test_a_blocked_and_a_failed_run_finish_with_a_client_safe_message(api, root, database_url):
    s = Sources(api.address)
    s.clients.create_collection("docs")
    folder = root / "f"
    write(folder, {"a.md": "alpha", "b.md": "bravo"})
    source = s.create_folder("docs", str(folder))
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    first = until_quiet(s, source_runs=ONLY)
    for name in ("a.md", "b.md"):
        (folder / name).unlink()  # every item gone: the mass-delete guard stops the run
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    blocked = until_quiet(s, after_cursor=first[-1].cursor, source_runs=ONLY)
    assert [e.type for e in blocked] == [STARTED, FINISHED]  # no progress: it compared nothing
    run = blocked[-1].source_run.run
    assert run.state == src.SOURCE_RUN_STATE_BLOCKED_MASS_DELETE and run.would_delete == 2
    assert "allow_mass_delete" in run.error_message and run.deleted == 0

    folder.rmdir()  # the folder itself gone: the run cannot list it and FAILS
    s.sync(source, allow_mass_delete=True)
    run_pending(database_url, source_local_roots=str(root))
    failed = until_quiet(s, after_cursor=blocked[-1].cursor, source_runs=ONLY)
    assert [e.type for e in failed] == [STARTED, FINISHED]
    run = failed[-1].source_run.run
    assert run.state == src.SOURCE_RUN_STATE_FAILED and run.error_message
    assert str(root) not in run.error_message and run == s.last_run(source)


def test_another_tenant_never_sees_the_run_events(api, root, database_url):
    s = Sources(api.address)
    s.clients.create_collection("docs")
    other = Sources(api.address, create_tenant_key(api.address, "other", "client"))
    other.clients.create_collection("docs")  # the same name in another tenant
    write(root / "f", {"a.md": "alpha"})
    s.sync(s.create_folder("docs", str(root / "f")))
    run_pending(database_url, source_local_roots=str(root))
    assert [e.type for e in until_quiet(s, source_runs=ONLY)] == [STARTED, PROGRESS, FINISHED]
    assert until_quiet(other, source_runs=INCLUDED) == []
    assert until_quiet(other, source_runs=ONLY) == []
    s.clients.create_collection("ours")  # a name only our tenant has: NOT_FOUND for the other
    with pytest.raises(grpc.RpcError) as error:
        next(iter(other.clients.docs.WatchCollection(ds.WatchCollectionRequest(collection="ours", source_runs=ONLY))))
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_webhooks_that_name_the_run_types_get_the_run_events_as_the_stream_shows_them(api, root, database_url, webhooks_factory):
    webhooks_factory(webhook_allow_private_networks=True, webhook_poll_seconds=0.5)
    s = Sources(api.address)
    s.clients.create_collection("docs")
    hooks = webhook_service_pb2_grpc.WebhookServiceStub(s.clients.channel)
    runs_receiver, documents_receiver = Receiver(), Receiver()
    try:
        runs_hook = hooks.CreateWebhook(
            wh.CreateWebhookRequest(
                webhook=wh.Webhook(
                    collection="docs",
                    url=runs_receiver.url,
                    event_types=[
                        wh.WEBHOOK_EVENT_TYPE_SOURCE_RUN_STARTED,
                        wh.WEBHOOK_EVENT_TYPE_SOURCE_RUN_PROGRESS,
                        wh.WEBHOOK_EVENT_TYPE_SOURCE_RUN_FINISHED,
                    ],
                )
            )
        )
        # No types named: the document events, as before run events existed.
        documents_hook = hooks.CreateWebhook(
            wh.CreateWebhookRequest(webhook=wh.Webhook(collection="docs", url=documents_receiver.url))
        )
        assert len(documents_hook.webhook.event_types) == 4
        write(root / "f", {"a.md": "alpha", "b.md": "bravo"})
        source = s.create_folder("docs", str(root / "f"))
        s.sync(source)
        run_pending(database_url, source_local_roots=str(root))
        wait_for(lambda: len(runs_receiver.delivered()) >= 3, 30, what="the run events' deliveries")
        wait_for(lambda: len(documents_receiver.delivered()) >= 2, 30, what="the documents' deliveries")

        payloads = [r.payload for r in runs_receiver.delivered()]
        assert [p["type"] for p in payloads] == ["source_run.started", "source_run.progress", "source_run.finished"]
        stream = until_quiet(s, source_runs=ONLY)
        for payload, event in zip(payloads, stream, strict=True):
            data = payload["data"]
            assert data["event_id"] == event.event_id and data["cursor"] == event.cursor and data["collection"] == "docs"
            shown = json_format.MessageToDict(
                event.source_run, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
            )
            assert {k: v for k, v in data.items() if k not in ("event_id", "cursor", "collection")} == shown
        assert payloads[-1]["data"]["run"]["state"] == "SOURCE_RUN_STATE_SUCCEEDED"
        assert payloads[-1]["data"]["run"]["uploaded"] == "2"
        assert all(r.payload["type"].startswith("document.") for r in documents_receiver.delivered())

        deliveries = hooks.ListWebhookDeliveries(wh.ListWebhookDeliveriesRequest(webhook_id=runs_hook.webhook.id)).deliveries
        assert len(deliveries) == 3 and {d.source_run_id for d in deliveries} == {stream[0].source_run.run.id}
        assert all(d.document_id == "" and d.state == wh.WEBHOOK_DELIVERY_STATE_DELIVERED for d in deliveries)
    finally:
        runs_receiver.close()
        documents_receiver.close()


def run_events(database_url: str) -> list[tuple[str, str]]:
    """(run_event, the run's state in it) of the log, in log order."""
    with psycopg.connect(database_url) as conn:
        return [
            (r[0], r[1])
            for r in conn.execute(
                "SELECT run_event, run ->> 'state' FROM document_events WHERE source_run_id IS NOT NULL ORDER BY txid, id"
            ).fetchall()
        ]


def test_a_run_taken_over_starts_once_and_the_old_runner_writes_no_event(api, root, database_url):
    """Written in the transaction of the change: the old runner's fenced checkpoint and end
    change nothing, so they leave no event; the takeover is no second start."""
    from sluice_common.db import open_pool
    from sluice_common.errors import LeaseNotHeld
    from sluice_ingest.sources.domain import RunState
    from sluice_ingest.sources.store import Progress, RunStore

    s = Sources(api.address)
    s.clients.create_collection("docs")
    write(root / "f", {"a.md": "alpha"})
    run = s.sync(s.create_folder("docs", str(root / "f")))
    lease = runner_settings(database_url).source_lease_seconds

    async def scenario() -> None:
        pool = await open_pool(database_url, max_size=4, name="test-run-events")
        try:
            store = RunStore(pool, lease)
            old = await store.claim()
            assert old is not None and old.run.id.hex == run.id.replace("-", "")
            await store.checkpoint(old, {"after": "a.md"}, Progress(listed=1, unchanged=1), progress_event=True)
            await store.forget_item(old, "gone.md")  # a deletion is counted on the run as it happens
            async with pool.connection() as conn:  # the old runner stops renewing: its lease expires
                await conn.execute("UPDATE source_runs SET locked_at = now() - interval '1 hour' WHERE id = %s", (old.run.id,))
            new = await store.claim()
            assert new is not None and new.run.id == old.run.id and new.run.attempts == 2
            assert new.run.deleted == 1  # the resumed run counts on from it
            with pytest.raises(LeaseNotHeld):
                await store.checkpoint(old, {"after": "a.md"}, Progress(listed=1, uploaded=1), progress_event=True)
            with pytest.raises(LeaseNotHeld):
                await store.forget_item(old, "other.md", progress_event=True)
            assert not await store.finish(old, RunState.SUCCEEDED, Progress(listed=1, uploaded=1), {})
            assert await store.finish(new, RunState.SUCCEEDED, Progress(listed=1, unchanged=1, deleted=1), {})
        finally:
            await pool.close()

    asyncio.run(scenario())
    assert run_events(database_url) == [("STARTED", "RUNNING"), ("PROGRESS", "RUNNING"), ("FINISHED", "SUCCEEDED")]
    assert s.last_run(s.stub.ListSources(src.ListSourcesRequest()).sources[0]).deleted == 1
