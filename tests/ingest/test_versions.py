"""Document versions (docs/architecture.md#document-versions) through real gRPC and a real
PostgreSQL: a new version of a source swaps in at its READY commit, a failed one leaves the
current one serving, the same content is not a version, and the races (uploads, deletions,
expired leases, reindexing, search) never show both versions or neither."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor

import auth_keys
import grpc
import psycopg
import pytest
from helpers import expect_error
from search_server import RunningSearch
from sluice.v1 import admin_service_pb2 as admin_pb2
from sluice.v1 import admin_service_pb2_grpc, collection_pb2, document_service_pb2_grpc, search_service_pb2_grpc
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import job_service_pb2 as js
from sluice.v1 import search_service_pb2 as sp
from sluice_common.channels import keyed_channel
from sluice_common.errors import reason_of

from .helpers import Clients, vector_for

SOURCE = "notes/notes.txt"


def upload(
    stub, content: bytes, source_uri: str = SOURCE, collection: str = "docs", filename: str = "notes.txt", request_id: str = ""
) -> D.Document:
    def messages():
        yield ds.UploadDocumentRequest(
            metadata=ds.UploadDocumentMetadata(
                collection=collection, filename=filename, source_uri=source_uri, request_id=request_id
            )
        )
        yield ds.UploadDocumentRequest(data=content)
        yield ds.UploadDocumentRequest(
            trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
        )

    return stub.UploadDocument(messages())


def by_source(c: Clients, source_uri: str = SOURCE, collection: str = "docs") -> D.Document:
    return c.docs.GetDocument(ds.GetDocumentRequest(collection=collection, source_uri=source_uri))


def run_to_ready(c: Clients, document_id: str, texts: list[str], worker: str = "w1") -> D.Document:
    job = c.claim(worker)
    assert job is not None and job.document_id == document_id
    c.run_to_indexing(job)
    return c.complete(job, texts)


def live_rows(url: str, source_uri: str = SOURCE) -> list[tuple[int, str, str]]:
    """(version, role, status) of the source's documents, oldest first."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT version, version_role, status::text FROM documents WHERE source_uri = %s ORDER BY version", (source_uri,)
        ).fetchall()


def searchable_versions(url: str, source_uri: str = SOURCE) -> list[int]:
    """The versions search's condition would return (READY documents with chunks), as SQL sees them."""
    with psycopg.connect(url) as conn:
        return [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT d.version FROM chunks c JOIN documents d ON d.id = c.document_id"
                " WHERE d.source_uri = %s AND d.status = 'READY' ORDER BY 1",
                (source_uri,),
            ).fetchall()
        ]


def states(view: D.DocumentVersions) -> list[tuple[int, int]]:
    return [(v.version, v.state) for v in view.history]


# ---------------------------------------------------------------- the swap


def test_new_content_is_a_new_version_that_swaps_in_at_its_ready_commit(c, database_url):
    v1 = upload(c.docs, b"the amber signal")
    assert (v1.source_uri, v1.version, v1.status) == (SOURCE, 1, D.DOCUMENT_STATUS_PENDING)
    run_to_ready(c, v1.id, ["amber one", "amber two"])
    v2 = upload(c.docs, b"the violet signal")
    assert v2.id != v1.id and v2.version == 2 and v2.status == D.DOCUMENT_STATUS_PENDING

    # While v2 is processed, v1 serves; GetDocument by source shows both.
    shown = by_source(c)
    assert shown.id == v1.id and shown.status == D.DOCUMENT_STATUS_READY
    assert (shown.versions.current.version, shown.versions.current.state) == (1, D.VERSION_STATE_CURRENT)
    assert (shown.versions.next.version, shown.versions.next.state) == (2, D.VERSION_STATE_PENDING)
    assert searchable_versions(database_url) == [1]
    listed = c.docs.ListDocuments(ds.ListDocumentsRequest(collection="docs", source_uri=SOURCE)).documents
    assert sorted(d.version for d in listed) == [1, 2]

    job = c.claim()
    c.run_to_indexing(job)
    assert searchable_versions(database_url) == [1]
    done = c.complete(job, ["violet one"])
    assert done.status == D.DOCUMENT_STATUS_READY and done.version == 2
    assert searchable_versions(database_url) == [2]
    assert live_rows(database_url) == [(2, "CURRENT", "READY")]
    expect_error(lambda: c.get(v1.id), grpc.StatusCode.NOT_FOUND, "DOCUMENT_NOT_FOUND")

    shown = by_source(c)
    assert shown.id == v2.id and not shown.versions.HasField("next")
    assert states(shown.versions) == [(2, D.VERSION_STATE_CURRENT), (1, D.VERSION_STATE_REPLACED)]
    assert shown.versions.history[1].HasField("end_time") and shown.versions.history[0].HasField("serving_time")
    with psycopg.connect(database_url) as conn:
        # The old version's row, job and content are gone (deleting is not a move), and the events
        # log has both changes in the one transaction: v2 READY and v1 deleted.
        assert conn.execute("SELECT count(*) FROM ingestion_jobs").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM document_contents").fetchone()[0] == 1
        events = conn.execute(
            "SELECT document_id::text, deleted, status::text FROM document_events WHERE txid ="
            " (SELECT txid FROM document_events WHERE document_id = %s AND status = 'READY')",
            (v2.id,),
        ).fetchall()
    assert sorted(events) == sorted([(v2.id, False, "READY"), (v1.id, True, "READY")])


def test_the_same_content_again_is_not_a_new_version(c, database_url):
    v1 = upload(c.docs, b"first text")
    assert upload(c.docs, b"first text").id == v1.id  # the current version, even while it is processed
    run_to_ready(c, v1.id, ["first"])
    assert upload(c.docs, b"first text").id == v1.id
    v2 = upload(c.docs, b"second text")
    assert upload(c.docs, b"second text").id == v2.id  # the pending version
    # The source went back to the current content: the pending version is superseded.
    assert upload(c.docs, b"first text").id == v1.id
    assert live_rows(database_url) == [(1, "CURRENT", "READY")]
    assert states(by_source(c).versions) == [(2, D.VERSION_STATE_SUPERSEDED), (1, D.VERSION_STATE_CURRENT)]
    # The same bytes under another source, or without one, are other documents.
    other = upload(c.docs, b"first text", source_uri="copies/first.txt")
    plain = c.upload(content=b"first text")
    assert len({v1.id, other.id, plain.id}) == 3
    assert c.upload(content=b"first text").id == plain.id  # dedup of plain uploads is unchanged


def test_a_failed_version_leaves_the_current_one_serving_and_shows_why(c, database_url):
    v1 = upload(c.docs, b"version one")
    run_to_ready(c, v1.id, ["one"])
    v2 = upload(c.docs, b"version two")
    job = c.claim()
    c.stage(job, D.DOCUMENT_STATUS_PARSING)
    c.fail(job, retryable=False, code="PDF_ENCRYPTED", message="the file is encrypted")
    shown = by_source(c)
    assert shown.id == v1.id and shown.status == D.DOCUMENT_STATUS_READY
    assert shown.versions.next.state == D.VERSION_STATE_FAILED
    assert shown.versions.next.error_message == "the file is encrypted"
    assert searchable_versions(database_url) == [1]
    assert c.get(v2.id).versions.next.document_id == v2.id  # by id too

    # Newer content replaces the failed version; its failure stays in the history.
    v3 = upload(c.docs, b"version three")
    assert v3.version == 3
    history = by_source(c).versions.history
    assert [(v.version, v.state) for v in history] == [
        (3, D.VERSION_STATE_PENDING),
        (2, D.VERSION_STATE_SUPERSEDED),
        (1, D.VERSION_STATE_CURRENT),
    ]
    assert history[1].error_message == "the file is encrypted"
    run_to_ready(c, v3.id, ["three"])
    assert searchable_versions(database_url) == [3]


def test_a_failed_first_version_is_replaced_by_the_next_ready_one(c, database_url):
    v1 = upload(c.docs, b"broken")
    job = c.claim()
    c.fail(job, retryable=False, code="PDF_ENCRYPTED", message="the file is encrypted")
    v2 = upload(c.docs, b"fixed")
    assert live_rows(database_url) == [(1, "CURRENT", "FAILED"), (2, "NEXT", "PENDING")]
    run_to_ready(c, v2.id, ["fixed"])
    assert live_rows(database_url) == [(2, "CURRENT", "READY")]
    assert by_source(c).versions.history[1].state == D.VERSION_STATE_REPLACED
    expect_error(lambda: c.get(v1.id), grpc.StatusCode.NOT_FOUND, "DOCUMENT_NOT_FOUND")


def test_delete_by_source_uri_deletes_every_live_version(c, database_url):
    v1 = upload(c.docs, b"one")
    run_to_ready(c, v1.id, ["one"])
    upload(c.docs, b"two")
    job = c.claim()  # v2 is RUNNING: its worker learns of the deletion at its next renewal
    response = c.docs.DeleteDocument(ds.DeleteDocumentRequest(collection="docs", source_uri=SOURCE))
    assert response.deleted_documents == 2 and response.cancelled_running_job
    assert c.jobs.RenewLease(js.RenewLeaseRequest(lease=job.lease)).cancelled
    assert live_rows(database_url) == [] and searchable_versions(database_url) == []
    expect_error(lambda: by_source(c), grpc.StatusCode.NOT_FOUND, "DOCUMENT_NOT_FOUND")
    expect_error(
        lambda: c.docs.DeleteDocument(ds.DeleteDocumentRequest(collection="docs", source_uri=SOURCE)),
        grpc.StatusCode.NOT_FOUND,
        "DOCUMENT_NOT_FOUND",
    )
    again = upload(c.docs, b"one")  # the numbering goes on after the history
    assert again.version == 3
    assert [v.state for v in by_source(c).versions.history][1:] == [D.VERSION_STATE_DELETED] * 2


def test_source_uri_is_validated(c):
    for bad in ("x" * 2049, "a\nb", "tab\there", "   ", "nul\x00"):
        expect_error(
            lambda bad=bad: upload(c.docs, b"content", source_uri=bad), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_SOURCE_URI"
        )
    expect_error(
        lambda: c.docs.GetDocument(ds.GetDocumentRequest(source_uri=SOURCE)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "COLLECTION_REQUIRED",
    )
    doc = upload(c.docs, b"content", source_uri="ü/" + "y" * 2000)  # long and not ASCII is fine
    expect_error(
        lambda: c.docs.GetDocument(ds.GetDocumentRequest(id=doc.id, collection="docs", source_uri=SOURCE)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_SOURCE_URI",
    )
    expect_error(
        lambda: c.docs.DeleteDocument(ds.DeleteDocumentRequest(collection="docs", source_uri="a\rb")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_SOURCE_URI",
    )
    expect_error(lambda: by_source(c, collection="nope"), grpc.StatusCode.NOT_FOUND, "COLLECTION_NOT_FOUND")


# ---------------------------------------------------------------- races


def test_concurrent_uploads_of_new_content_leave_one_pending_version(c, ingest_api, database_url):
    v1 = upload(c.docs, b"base")
    run_to_ready(c, v1.id, ["base"])
    for round_ in range(3):
        uploaded = upload_at_once(ingest_api.address, [f"round {round_} content {i}".encode() for i in range(6)])
        assert len({d.id for d in uploaded}) == 6
        rows = live_rows(database_url)
        assert [r[1] for r in rows] == ["CURRENT", "NEXT"] and rows[0][0] == 1
        # The survivor is the last upload the source saw: the highest version.
        assert rows[1][0] == max(d.version for d in uploaded)
    # Identical new content at once: one version.
    barrier = threading.Barrier(4)

    def same(_: int) -> str:
        barrier.wait()
        return upload(c.docs, b"identical").id

    with ThreadPoolExecutor(4) as pool:
        assert len(set(pool.map(same, range(4)))) == 1
    run_to_ready(c, live_rows_ids(database_url)["NEXT"], ["identical"])
    assert searchable_versions(database_url) == [max(r[0] for r in live_rows(database_url))]


def upload_at_once(address: str, contents: list[bytes]) -> list[D.Document]:
    """Each content uploaded by a client of its own, all released at one barrier."""
    barrier = threading.Barrier(len(contents))
    clients = [Clients(address) for _ in contents]

    def one(i: int) -> D.Document:
        barrier.wait()
        return upload(clients[i].docs, contents[i])

    try:
        with ThreadPoolExecutor(len(contents)) as pool:
            return list(pool.map(one, range(len(contents))))
    finally:
        for client in clients:
            client.close()


def live_rows_ids(url: str, source_uri: str = SOURCE) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT version_role, id::text FROM documents WHERE source_uri = %s", (source_uri,)).fetchall())


def test_a_superseded_version_in_flight_loses_its_job(c, database_url):
    v1 = upload(c.docs, b"one")
    run_to_ready(c, v1.id, ["one"])
    upload(c.docs, b"two")
    job = c.claim()
    c.run_to_indexing(job)
    v3 = upload(c.docs, b"three")
    assert c.jobs.RenewLease(js.RenewLeaseRequest(lease=job.lease)).cancelled
    err = expect_error(lambda: c.complete(job, ["two"]), grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND")
    assert err is not None
    assert searchable_versions(database_url) == [1]
    run_to_ready(c, v3.id, ["three"])
    assert searchable_versions(database_url) == [3]


@pytest.mark.parametrize("delete_by", ["id", "source"])
def test_the_swap_races_a_deletion_of_the_current_version(c, ingest_api, database_url, delete_by):
    """The READY commit of v2 (which deletes v1) and a DeleteDocument at the same moment, many
    times: never a deadlock or an error but the deletion's own NOT_FOUND, and the end state is
    one of the two orders."""
    other = Clients(ingest_api.address)
    for i in range(8):
        source = f"race/{delete_by}/{i}.txt"
        outcomes = race_swap_and_delete(c, other, source, delete_by, i)
        rows = live_rows(database_url, source)
        if delete_by == "id":
            # Either v1 was deleted first (then v2 swaps in alone) or v2 replaced it first (then
            # the deletion found nothing): v2 serves in both.
            assert outcomes["commit"] == D.DOCUMENT_STATUS_READY
            assert outcomes["delete"] in (1, "DOCUMENT_NOT_FOUND")
            assert rows == [(2, "CURRENT", "READY")]
        else:
            # Either the deletion took both (the commit finds its job gone) or the commit came
            # first (the deletion takes v2): nothing is left.
            assert (outcomes["commit"], outcomes["delete"]) in ((D.DOCUMENT_STATUS_READY, 1), ("JOB_NOT_FOUND", 2))
            assert rows == []
    other.close()


def race_swap_and_delete(c: Clients, other: Clients, source: str, delete_by: str, i: int) -> dict[str, object]:
    """v1 READY, v2 at INDEXING; then v2's commit and a deletion (of v1 by id, or of the source)
    released at one barrier. Returns what each call answered."""
    v1 = upload(c.docs, f"old {i}".encode(), source_uri=source)
    run_to_ready(c, v1.id, ["old"])
    upload(c.docs, f"new {i}".encode(), source_uri=source)
    job = c.claim()
    c.run_to_indexing(job)
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def commit():
        barrier.wait()
        try:
            outcomes["commit"] = c.complete(job, ["new"]).status
        except grpc.RpcError as err:
            outcomes["commit"] = reason_of(err)

    def delete():
        barrier.wait()
        request = (
            ds.DeleteDocumentRequest(id=v1.id)
            if delete_by == "id"
            else ds.DeleteDocumentRequest(collection="docs", source_uri=source)
        )
        try:
            outcomes["delete"] = other.docs.DeleteDocument(request).deleted_documents
        except grpc.RpcError as err:
            outcomes["delete"] = reason_of(err)

    threads = [threading.Thread(target=commit), threading.Thread(target=delete)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return outcomes


def test_a_version_whose_worker_lease_expires_is_taken_over_and_swaps_once(c, database_url):
    v1 = upload(c.docs, b"one")
    run_to_ready(c, v1.id, ["one"])
    v2 = upload(c.docs, b"two")
    first = c.claim("w1")
    c.run_to_indexing(first)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE ingestion_jobs SET locked_at = now() - interval '1 hour' WHERE id = %s", (first.lease.job_id,))
    second = c.claim("w2")
    assert second.document_id == v2.id and second.attempt == 2
    assert searchable_versions(database_url) == [1]  # v1 serves while v2 starts again
    expect_error(lambda: c.complete(first, ["stale"]), grpc.StatusCode.FAILED_PRECONDITION, "LEASE_NOT_HELD")
    c.run_to_indexing(second)
    assert c.complete(second, ["two"]).status == D.DOCUMENT_STATUS_READY
    assert live_rows(database_url) == [(2, "CURRENT", "READY")] and searchable_versions(database_url) == [2]


def test_a_building_generation_ends_with_the_new_versions_chunks(c, database_url):
    from .test_generations import hashing

    v1 = upload(c.docs, b"old text")
    run_to_ready(c, v1.id, ["old text"])
    c.docs.ReindexCollection(ds.ReindexCollectionRequest(name="docs", embedder=hashing()))
    embed_v1 = c.claim()
    assert embed_v1.kind == js.JOB_KIND_EMBED and embed_v1.document_id == v1.id
    v2 = upload(c.docs, b"new text")
    ingest = c.claim()
    assert ingest.kind == js.JOB_KIND_INGEST and ingest.document_id == v2.id
    c.run_to_indexing(ingest)
    c.complete(ingest, ["new text"])  # the swap: v1 goes with its EMBED job and chunks
    assert c.jobs.RenewLease(js.RenewLeaseRequest(lease=embed_v1.lease)).cancelled
    embed_v2 = c.claim()
    assert embed_v2.kind == js.JOB_KIND_EMBED and embed_v2.document_id == v2.id
    c.complete(embed_v2, ["new text"], dimensions=16)
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT g.state::text, d.version FROM chunks ch JOIN collection_generations g ON g.id = ch.generation_id"
            " JOIN documents d ON d.id = ch.document_id WHERE g.state IN ('ACTIVE', 'BUILDING')"
        ).fetchall()
    assert rows == [("ACTIVE", 2)]  # the switch happened; its generation holds v2 only
    col = c.docs.GetCollection(ds.GetCollectionRequest(name="docs"))
    assert col.embedder.dimensions == 16


def test_source_uri_is_per_collection_and_per_tenant(c, ingest_api, database_url):
    c.create_collection("other")
    a = upload(c.docs, b"alpha")
    b = upload(c.docs, b"beta", collection="other")  # the same source_uri in another collection
    assert a.version == b.version == 1 and a.id != b.id
    with keyed_channel(ingest_api.address, auth_keys.KEYS["admin"]) as admin_channel:
        admin = admin_service_pb2_grpc.AdminServiceStub(admin_channel)
        admin.CreateTenant(admin_pb2.CreateTenantRequest(tenant=admin_pb2.Tenant(name="b")))
        key = admin.CreateApiKey(admin_pb2.CreateApiKeyRequest(tenant="b", role=admin_pb2.API_KEY_ROLE_CLIENT)).secret
    with keyed_channel(ingest_api.address, key) as channel:
        theirs = document_service_pb2_grpc.DocumentServiceStub(channel)
        theirs.CreateCollection(
            ds.CreateCollectionRequest(
                collection=collection_pb2.Collection(
                    name="docs",
                    embedder=collection_pb2.EmbedderConfig(
                        provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=8
                    ),
                )
            )
        )
        mine = upload(theirs, b"alpha")  # the same content and source_uri as the default tenant's
        assert mine.id != a.id and mine.version == 1
        expect_error(
            lambda: theirs.DeleteDocument(ds.DeleteDocumentRequest(collection="other", source_uri=SOURCE)),
            grpc.StatusCode.NOT_FOUND,
            "COLLECTION_NOT_FOUND",
        )
        theirs.DeleteDocument(ds.DeleteDocumentRequest(collection="docs", source_uri=SOURCE))
    assert by_source(c).id == a.id and by_source(c, collection="other").id == b.id


# ---------------------------------------------------------------- search


def test_search_returns_exactly_one_version_at_every_moment(c, database_url):
    """Searches run without pause while versions are uploaded, processed and swapped in, many
    times: every answer holds the chunks of exactly one version, never both and never neither.
    Three threads search without pause: on a fast machine that is more than the default per-key
    rate limit, which is not what this test is about, so the limit is lifted."""
    search = RunningSearch(database_url, rate_limit_per_second=1e6, rate_limit_burst=1e6)
    stub = search_service_pb2_grpc.SearchServiceStub(auth_keys.channel(search.address))
    try:
        v1 = upload(c.docs, b"version 1")
        run_to_ready(c, v1.id, ["version 1 a", "version 1 b"])
        stop = threading.Event()
        seen: list[frozenset[str]] = []
        errors: list[BaseException] = []

        def searching():
            try:
                while not stop.is_set():
                    hits = stub.Search(sp.SearchRequest(collection="docs", query_vector=vector_for("anything"), top_k=20)).hits
                    seen.append(frozenset(h.document_id for h in hits))
            except BaseException as err:  # reported below
                errors.append(err)

        searchers = [threading.Thread(target=searching) for _ in range(3)]
        for t in searchers:
            t.start()
        for n in range(2, 14):
            upload(c.docs, f"version {n}".encode())
            if n % 4 == 0:  # now and then a version fails: the current one keeps serving
                job = c.claim()
                c.fail(job, retryable=False, code="PDF_ENCRYPTED", message="encrypted")
                continue
            job = c.claim()
            c.run_to_indexing(job)
            c.complete(job, [f"version {n} a", f"version {n} b"])
        stop.set()
        for t in searchers:
            t.join(30)
        assert not errors
        assert len(seen) > 20
        assert all(len(ids) == 1 for ids in seen), [len(ids) for ids in seen if len(ids) != 1][:5]
        assert len(set(seen)) > 1  # the searches did see the versions change
    finally:
        search.stop()


# ---------------------------------------------------------------- the migration


def test_migration_0021_upgrades_a_database_holding_documents(database_url):
    from alembic import command
    from sluice_ingest.migrations import alembic_config

    config = alembic_config(database_url)
    command.downgrade(config, "0019")
    with psycopg.connect(database_url, autocommit=True) as conn:
        cid = conn.execute(
            "INSERT INTO collections (tenant_id, name, embedder_provider, embedder_model, dimensions,"
            " chunk_max_characters, chunk_new_after_n_chars, chunk_overlap, max_attempts)"
            " VALUES (1, 'c', 'hashing', 'h', 3, 1000, 800, 0, 3) RETURNING id"
        ).fetchone()[0]
        doc = conn.execute(
            "INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256, size_bytes, status)"
            " VALUES (1, %s, 'a.txt', 'text/plain', repeat('a', 64), 1, 'READY') RETURNING id",
            (cid,),
        ).fetchone()[0]
    command.upgrade(config, "head")
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert conn.execute("SELECT source_uri, version, version_role FROM documents WHERE id = %s", (doc,)).fetchone() == (
            None,
            None,
            None,
        )
        # Plain documents keep their content dedup; a versioned one may share the content.
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                "INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256,"
                " size_bytes) VALUES (1, %s, 'b.txt', 'text/plain', repeat('a', 64), 1)",
                (cid,),
            )
        conn.execute(
            "INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256, size_bytes,"
            " source_uri, version, version_role) VALUES (1, %s, 'b.txt', 'text/plain', repeat('a', 64), 1,"
            " 'b.txt', 1, 'CURRENT')",
            (cid,),
        )
        # At most one current version per source, in PostgreSQL itself.
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(
                "INSERT INTO documents (tenant_id, collection_id, filename, mime_type, content_sha256,"
                " size_bytes, source_uri, version, version_role) VALUES (1, %s, 'b.txt', 'text/plain',"
                " repeat('b', 64), 1, 'b.txt', 2, 'CURRENT')",
                (cid,),
            )
