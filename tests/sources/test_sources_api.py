"""SourceService's tenancy and roles, a source that changes while it is synced, and the
schedule (docs/sources.md)."""

from __future__ import annotations

import threading

import grpc
import psycopg
from helpers import expect_error, wait_for
from sluice.v1 import source_service_pb2 as src

from .helpers import Sources, create_tenant_key, live_documents, run_pending


def test_a_tenant_never_sees_nor_syncs_another_tenants_sources_and_readers_only_read(api, root, database_url):
    (root / "a").mkdir()
    (root / "a" / "one.txt").write_text("tenant a's file")
    a = Sources(api.address)
    a.clients.create_collection("docs")
    source = a.create_folder("docs", str(root / "a"))

    b = Sources(api.address, create_tenant_key(api.address, "b", "client"))
    b.clients.create_collection("docs")  # the same collection name, another tenant
    for call in (
        lambda: b.stub.GetSource(src.GetSourceRequest(name=source.name)),
        lambda: b.stub.GetSource(src.GetSourceRequest(name=source.id)),
        lambda: b.stub.SyncSource(src.SyncSourceRequest(name=source.name)),
        lambda: b.stub.ListSourceRuns(src.ListSourceRunsRequest(name=source.name)),
        lambda: b.stub.DeleteSource(src.DeleteSourceRequest(name=source.name)),
    ):
        error = expect_error(call, grpc.StatusCode.NOT_FOUND, "SOURCE_NOT_FOUND")
        assert error.details() == f"source {source.id} does not exist"
    assert list(b.stub.ListSources(src.ListSourcesRequest()).sources) == []
    assert [s.id for s in a.stub.ListSources(src.ListSourcesRequest(collection="docs")).sources] == [source.id]

    reader = Sources(api.address, create_tenant_key(api.address, "default", "reader", create=False))
    assert reader.stub.GetSource(src.GetSourceRequest(name=source.name)).id == source.id
    for call in (
        lambda: reader.create_folder("docs", str(root / "a")),
        lambda: reader.stub.SyncSource(src.SyncSourceRequest(name=source.name)),
        lambda: reader.stub.DeleteSource(src.DeleteSourceRequest(name=source.name)),
    ):
        expect_error(call, grpc.StatusCode.PERMISSION_DENIED)

    expect_error(
        lambda: a.stub.GetSource(src.GetSourceRequest(name="collections/docs/sources/not-a-uuid")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_ID",
    )
    a.stub.DeleteSource(src.DeleteSourceRequest(name=source.name))
    expect_error(lambda: a.stub.GetSource(src.GetSourceRequest(name=source.name)), grpc.StatusCode.NOT_FOUND, "SOURCE_NOT_FOUND")
    assert run_pending(database_url, source_local_roots=str(root)) == 0


def run_state(database_url: str, run_id: str) -> dict:
    with psycopg.connect(database_url) as conn:
        cur = conn.execute("SELECT state, checkpoint FROM source_runs WHERE id = %s", (run_id,))
        state, checkpoint = cur.fetchone()
    return {"state": state, "checkpoint": checkpoint}


def test_a_folder_that_changes_during_its_sync_converges_at_the_next_sync(api, root, database_url):
    folder = root / "live"
    folder.mkdir()
    for i in range(400):
        (folder / f"{i:04}.txt").write_text(f"version one of {i}")
    s = Sources(api.address)
    s.clients.create_collection("docs")
    source = s.create_folder("docs", str(folder))
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    assert s.last_run(source).uploaded == 400

    # A second run over a folder whose even files were edited; while it works through the first
    # items, the last ones change under it: an edited one removed before its read, an unchanged
    # one (skipped by its fingerprint, never read) edited, one added after the listing.
    for i in range(0, 400, 2):
        (folder / f"{i:04}.txt").write_text(f"version two of {i}")
    run = s.sync(source)
    worker = threading.Thread(target=run_pending, args=(database_url,), kwargs={"source_local_roots": str(root)})
    worker.start()
    wait_for(
        lambda: run_state(database_url, run.id)["checkpoint"].get("after"), 60, interval=0.01, what="the run's first checkpoint"
    )
    (folder / "0398.txt").unlink()
    (folder / "0397.txt").write_text("edited during the sync")
    (folder / "0400.txt").write_text("added during the sync")
    worker.join(120)
    during = s.last_run(source)
    assert during.state == src.SOURCE_RUN_STATE_SUCCEEDED, during.error_message
    assert during.listed == 400 and during.failed == 0
    assert run_state(database_url, run.id)["checkpoint"]["after"] == "0399.txt"
    live = live_documents(database_url)
    assert "0398.txt" not in live  # listed, gone at its read: deleted at the end of this run
    assert during.deleted == 1 and during.uploaded == 199
    assert "0400.txt" not in live and [v for v, _ in live["0397.txt"]] == [1]

    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    after = s.last_run(source)
    assert (after.listed, after.uploaded, after.deleted) == (400, 2, 0)  # 0397.txt edited, 0400.txt new
    files = sorted(p.name for p in folder.iterdir())
    assert sorted(live_documents(database_url)) == files
    s.sync(source)
    run_pending(database_url, source_local_roots=str(root))
    assert s.last_run(source).uploaded == 0


def test_a_schedule_queues_a_run_when_due_and_none_beside_an_active_one(api, root, database_url):
    (root / "s").mkdir()
    (root / "s" / "x.txt").write_text("scheduled")
    s = Sources(api.address)
    s.clients.create_collection("docs")
    source = s.create_folder("docs", str(root / "s"), schedule_interval_seconds=3600)
    assert source.schedule_interval_seconds == 3600 and source.HasField("next_sync_time")
    assert run_pending(database_url, source_local_roots=str(root)) == 0  # not due yet
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE sources SET next_sync_at = now() - interval '1 second' WHERE id = %s", (source.id,))
    assert run_pending(database_url, source_local_roots=str(root)) == 1
    run = s.last_run(source)
    assert run.scheduled and run.state == src.SOURCE_RUN_STATE_SUCCEEDED and run.uploaded == 1
    again = s.stub.GetSource(src.GetSourceRequest(name=source.name))
    assert again.next_sync_time.ToDatetime() > run.end_time.ToDatetime()
    assert sorted(live_documents(database_url)) == ["x.txt"]

    pending = s.sync(source)  # a PENDING run: a schedule coming due adds none beside it
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE sources SET next_sync_at = now() - interval '1 second' WHERE id = %s", (source.id,))
        assert run_pending(database_url, source_local_roots=str(root)) == 1
        count = conn.execute("SELECT count(*) FROM source_runs WHERE source_id = %s", (source.id,)).fetchone()[0]
    assert count == 2 and s.last_run(source).id == pending.id
