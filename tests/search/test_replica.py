"""Search served by a streaming replica, with consistency tokens (docs/scaling.md#read-replicas-and-the-consistency-token).

Real replication: a primary and a hot standby started here from the embedded binaries
(sluice_common.embedded_pg.create_standby: pg_basebackup -R), ingest-api on the primary, one
search on the standby and one on the primary, documents made READY through JobService by hand.
Replay is paused and resumed on the standby with pg_wal_replay_pause() / pg_wal_replay_resume().
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

import auth_keys
import grpc
import psycopg
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from helpers import expect_error, wait_for
from ingest.helpers import Clients, vector_for
from prometheus_client import REGISTRY
from search_server import RunningSearch
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import search_service_pb2, search_service_pb2_grpc
from sluice_common import consistency
from sluice_common.embedded_pg import EmbeddedPostgres, create_standby, database_uri, ensure_database
from sluice_common.errors import reason_of
from sluice_common.reasons import Reason

DATABASE = "sluice"
DIMENSIONS = 8


class RunningIngest:
    """ingest-api (IngestApp) serving in a thread of its own, on the cluster's primary."""

    def __init__(self, settings) -> None:
        from sluice_ingest.main import IngestApp

        self.app = IngestApp(settings)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="ingest-api", daemon=True)
        self.thread.start()
        self._call(self._start())
        self.address = f"127.0.0.1:{self.app.port}"

    async def _start(self) -> None:
        await self.app.start()
        await self.app.serve()

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def stop(self) -> None:
        try:
            self._call(self.app.stop(0))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


class Cluster:
    """A primary, its standby, ingest-api on the primary, search on each."""

    def __init__(self) -> None:
        from sluice_ingest.migrations import upgrade
        from sluice_ingest.settings import IngestSettings

        self.base = Path(tempfile.mkdtemp(prefix="sluice-test-replica-"))
        self.base.chmod(0o755)
        self.primary = EmbeddedPostgres(self.base / "primary", cleanup="delete")
        admin = self.primary.start()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET fsync = off")
            conn.execute("SELECT pg_reload_conf()")
        ensure_database(admin, DATABASE)
        self.primary_url = database_uri(admin, DATABASE)
        upgrade(self.primary_url)
        auth_keys.install(self.primary_url)
        self.standby = create_standby(self.primary, self.base / "standby")
        self.standby_admin = self.standby.start()
        self.standby_url = database_uri(self.standby_admin, DATABASE)
        self.ingest = RunningIngest(
            IngestSettings(
                database_url=self.primary_url,
                bind="127.0.0.1:0",
                lease_seconds=5.0,
                log_json=False,
                log_level="WARNING",
                rate_limit_per_second=0.0,
            )
        )
        self.clients = Clients(self.ingest.address)
        # The reindex quality gate writes verdicts: a search on a standby runs without it (or
        # points it at the primary, as `make run --replica` does).
        # No per-key rate limit: several threads search at once here.
        self.replica_search = RunningSearch(
            self.standby_url, search_eval_gate_enabled=False, search_consistency_max_wait_seconds=30.0, rate_limit_per_second=0.0
        )
        self.primary_search = RunningSearch(self.primary_url, rate_limit_per_second=0.0)
        self.replica_channel = auth_keys.channel(self.replica_search.address)
        self.primary_channel = auth_keys.channel(self.primary_search.address)
        self.on_replica = search_service_pb2_grpc.SearchServiceStub(self.replica_channel)
        self.on_primary = search_service_pb2_grpc.SearchServiceStub(self.primary_channel)
        # The standby's superuser, to pause and resume replay as an operator would.
        self.standby_admin_conn = psycopg.connect(self.standby_admin, autocommit=True)

    def close(self) -> None:
        for close in (
            self.replica_channel.close,
            self.primary_channel.close,
            self.clients.close,
            self.replica_search.stop,
            self.primary_search.stop,
            self.ingest.stop,
            self.standby_admin_conn.close,
            self.standby.stop,
            self.primary.stop,
        ):
            try:
                close()
            except Exception as error:  # stop everything else, then report
                print(f"cleanup: {error!r}")
        shutil.rmtree(self.base, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def pause_replay(self) -> None:
        pause_replay(self.primary_url, self.standby_admin_conn)

    def resume_replay(self) -> None:
        self.standby_admin_conn.execute("SELECT pg_wal_replay_resume()")

    def replay_lsn(self) -> int:
        return consistency.lsn_value(self.standby_admin_conn.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()[0])

    def ready_document(self, collection: str, text: str) -> D.Document:
        """Upload a document and make it READY through JobService, as a worker would; the answer of
        GetDocument once it is READY."""
        uploaded = self.clients.upload(collection, content=f"{text} {uuid.uuid4()}".encode(), filename=f"{text}.txt")
        job = self.clients.claim(wait=5)
        assert job is not None and job.document_id == uploaded.id
        self.clients.run_to_indexing(job)
        self.clients.complete(job, texts=[text], dimensions=DIMENSIONS)
        document = self.clients.get(uploaded.id)
        assert document.status == D.DOCUMENT_STATUS_READY
        return document


def pause_replay(primary_url: str, standby_admin) -> None:
    """Pause a standby's replay, and wait until it has paused: the standby pauses at the next
    record it replays, so the primary writes one (a WAL message, no transaction) until it has."""
    standby_admin.execute("SELECT pg_wal_replay_pause()")
    with psycopg.connect(primary_url, autocommit=True) as primary:

        def paused() -> bool:
            primary.execute("SELECT pg_logical_emit_message(false, 'sluice-test', 'pause')")
            return standby_admin.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()[0] == "paused"

        wait_for(paused, 10, interval=0.05, what="replay to pause")


def skipped_connections() -> float:
    """sluice_search_consistency_connections_skipped_total of this process (the searches here
    serve in threads of the test's process)."""
    return REGISTRY.get_sample_value("sluice_search_consistency_connections_skipped_total") or 0.0


def search_request(collection: str, text: str, token: str = "", top_k: int = 10) -> search_service_pb2.SearchRequest:
    return search_service_pb2.SearchRequest(
        collection=collection,
        query_vector=vector_for(text, DIMENSIONS),
        top_k=top_k,
        mode=search_service_pb2.SEARCH_MODE_VECTOR,
        consistency_token=token,
    )


def hit_ids(response: search_service_pb2.SearchResponse) -> set[str]:
    return {hit.document_id for hit in response.hits}


def judge(
    observations: list[tuple[int, int, set[str]]], not_ready: dict[str, list[tuple[int, int]]]
) -> tuple[list[tuple[str, int, int]], int]:
    """The hits of documents inside one of their certain non-READY stretches (a search that
    began after the stretch's start was replayed and ended before its end was), and how many
    (search, document) pairs fell inside a stretch at all."""
    wrong, checked = [], 0
    for before, after, hits in observations:
        for doc, stretches in not_ready.items():
            if any(start <= before and after <= end for start, end in stretches):
                checked += 1
                if doc in hits:
                    wrong.append((doc, before, after))
    return wrong, checked


@pytest.fixture(scope="module")
def cluster():
    running = Cluster()
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def collection(cluster) -> str:
    name = f"c{uuid.uuid4().hex[:10]}"
    cluster.clients.create_collection(name, dimensions=DIMENSIONS)
    # Searches without a token follow: the replica must have the collection first.
    with psycopg.connect(cluster.primary_url, autocommit=True) as primary:
        created = consistency.lsn_value(primary.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0])
    wait_for(lambda: consistency.replayed(cluster.replay_lsn(), created), 10, what="the replica to replay the collection")
    return name


def test_search_reads_a_standby(cluster):
    with psycopg.connect(auth_keys.search_url(cluster.standby_url)) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone()[0] is True


def test_a_document_ready_on_the_primary_is_found_on_the_replica_with_its_token(cluster, collection):
    for n in range(5):
        document = cluster.ready_document(collection, f"ready on the primary {n}")
        assert document.consistency_token.startswith("lsn:")
        answer = cluster.on_replica.Search(
            search_request(collection, f"ready on the primary {n}", document.consistency_token), timeout=30
        )
        assert document.id in hit_ids(answer)


def test_every_answer_that_shows_a_write_carries_a_token_at_or_after_it(cluster, collection):
    uploaded = cluster.clients.upload(collection, content=b"token of an upload", filename="u.txt")
    listed = cluster.clients.docs.ListDocuments(ds.ListDocumentsRequest(collection=collection)).documents
    assert uploaded.consistency_token and all(d.consistency_token for d in listed)
    # Read after the upload committed: no earlier than the upload's own token.
    assert consistency.parse_token(listed[0].consistency_token) >= consistency.parse_token(uploaded.consistency_token)
    job = cluster.clients.claim(wait=5)
    events = cluster.clients.docs.WatchDocument(ds.WatchDocumentRequest(id=uploaded.id), timeout=30)
    cluster.clients.run_to_indexing(job)
    cluster.clients.complete(job, texts=["token of an upload"], dimensions=DIMENSIONS)
    ready = next(e.document for e in events if e.document.status == D.DOCUMENT_STATUS_READY)
    events.cancel()
    assert consistency.parse_token(ready.consistency_token) > consistency.parse_token(uploaded.consistency_token)
    cursor_events = cluster.clients.docs.WatchCollection(
        ds.WatchCollectionRequest(collection=collection, start_from_oldest=True), timeout=30
    )
    ready_event = next(e for e in cursor_events if e.document.status == D.DOCUMENT_STATUS_READY)
    cursor_events.cancel()
    assert ready_event.document.consistency_token.startswith("lsn:")
    # The token of the READY state finds the document on the replica.
    answer = cluster.on_replica.Search(search_request(collection, "token of an upload", ready.consistency_token), timeout=30)
    assert uploaded.id in hit_ids(answer)


def test_with_replay_paused_a_search_with_the_token_answers_unavailable_then_finds_the_document_once_resumed(cluster, collection):
    cluster.pause_replay()
    try:
        document = cluster.ready_document(collection, "written while replay is paused")
        request = search_request(collection, "written while replay is paused", document.consistency_token)
        # Without the token, the replica answers from where it stands: the document is not there yet.
        stale = cluster.on_replica.Search(search_request(collection, "written while replay is paused"), timeout=10)
        assert document.id not in hit_ids(stale)
        error = expect_error(
            lambda: cluster.on_replica.Search(request, timeout=1.0), grpc.StatusCode.UNAVAILABLE, Reason.REPLICA_BEHIND
        )
        assert "bytes of write-ahead log behind" in error.details() and "replay is paused" in error.details()
        status = rpc_status.from_call(error)
        retry = [d for d in status.details if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
        assert len(retry) == 1
        # The primary has the document at once, token or not.
        assert document.id in hit_ids(cluster.on_primary.Search(request, timeout=10))
        # A search that waits is answered once replay resumes.
        answers: list = []
        waiting = threading.Thread(target=lambda: answers.append(cluster.on_replica.Search(request, timeout=30)))
        waiting.start()
        time.sleep(0.5)  # let it start waiting; it must still be waiting (replay is paused)
        assert waiting.is_alive()
    finally:
        cluster.resume_replay()
    waiting.join(30)
    assert len(answers) == 1 and document.id in hit_ids(answers[0])


def test_a_bad_token_is_invalid_argument(cluster, collection):
    for token in ("garbage", "lsn:", "lsn:0/", "lsn:G/1", "lsn:0/123456789", "0/16B3748", "lsn:0/16B3748 ", "lsn:" + "1" * 80):
        for stub in (cluster.on_replica, cluster.on_primary):
            error = expect_error(
                lambda stub=stub, token=token: stub.Search(search_request(collection, "x", token), timeout=10),
                grpc.StatusCode.INVALID_ARGUMENT,
                Reason.INVALID_CONSISTENCY_TOKEN,
            )
            assert "consistency_token" in error.details()


def test_a_token_on_a_primary_pointed_search_is_satisfied_at_once(cluster, collection):
    document = cluster.ready_document(collection, "on the primary")
    # A token far in the future: a primary never waits, it has every commit a token can name.
    future = consistency.PREFIX + consistency.lsn_text(consistency.parse_token(document.consistency_token) + 10**12)
    answer = cluster.on_primary.Search(search_request(collection, "on the primary", future), timeout=10)
    assert document.id in hit_ids(answer)
    # The same token on the replica cannot be met: it says so within the call's deadline.
    expect_error(
        lambda: cluster.on_replica.Search(search_request(collection, "on the primary", future), timeout=0.5),
        grpc.StatusCode.UNAVAILABLE,
        Reason.REPLICA_BEHIND,
    )


def test_no_search_of_the_replica_returns_a_document_that_is_not_ready_during_replay(cluster, collection):
    """Documents go READY and back while other threads search the replica. Half of them keep their
    chunks while not READY: their status is moved out of READY and back by SQL on the primary,
    the case rule 3 guards ("even if vectors of it exist"; ReprocessDocument deletes a document's
    chunks in its move, rule 1, docs/architecture.md#the-rules). The other half go through
    ReprocessDocument and a commit. A hit is wrong when its document was certainly not READY over
    the whole stretch of WAL the replica replayed during that search: from a position at or after
    the move's commit (the reprocess's token, or one read after the UPDATE) to a position read
    before the move back to READY began. Each search is bracketed by the replica's replay
    position before and after it."""
    texts = [f"cycling document {n}" for n in range(4)]
    documents = {cluster.ready_document(collection, text).id: text for text in texts}
    with_chunks = set(list(documents)[:2])  # moved by SQL: their chunks stay
    not_ready: dict[str, list[tuple[int, int]]] = {doc: [] for doc in documents}  # certain non-READY WAL stretches
    observations: list[tuple[int, int, set[str]]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def primary_lsn(conn) -> int:
        return consistency.lsn_value(conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0])

    def set_status(conn, doc: str, status: str, current: str) -> None:
        moved = conn.execute("UPDATE documents SET status = %s WHERE id = %s AND status = %s", (status, doc, current))
        assert moved.rowcount == 1

    def cycle() -> None:
        try:
            with psycopg.connect(cluster.primary_url, autocommit=True) as conn:
                rounds = 0
                while not stop.is_set() or rounds < 3:
                    rounds += 1
                    for doc, text in documents.items():
                        if doc in with_chunks:
                            set_status(conn, doc, "PENDING", "READY")
                            start = primary_lsn(conn)  # after the UPDATE's commit
                            (chunks,) = conn.execute("SELECT count(*) FROM chunks WHERE document_id = %s", (doc,)).fetchone()
                            assert chunks == 1
                            time.sleep(0.05)  # a stretch of WAL replayed while the document is not READY
                            end = primary_lsn(conn)  # before the move back below begins
                            not_ready[doc].append((start, end))
                            set_status(conn, doc, "READY", "PENDING")
                            continue
                        pending = cluster.clients.docs.ReprocessDocument(ds.ReprocessDocumentRequest(id=doc))
                        start = consistency.parse_token(pending.consistency_token)
                        job = cluster.clients.claim(wait=5)
                        assert job is not None and job.document_id == doc
                        cluster.clients.run_to_indexing(job)
                        time.sleep(0.05)
                        end = primary_lsn(conn)  # before the READY commit below begins
                        not_ready[doc].append((start, end))
                        cluster.clients.complete(job, texts=[text], dimensions=DIMENSIONS)
                    if rounds >= 25:
                        break
        except BaseException as error:  # reported by the test
            errors.append(error)

    def search() -> None:
        try:
            with psycopg.connect(cluster.standby_admin, autocommit=True) as conn:
                while not stop.is_set():
                    before = consistency.lsn_value(conn.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()[0])
                    for text in texts:
                        answer = cluster.on_replica.Search(search_request(collection, text, top_k=10), timeout=10)
                        after = consistency.lsn_value(conn.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()[0])
                        observations.append((before, after, hit_ids(answer)))
                        before = after
        except BaseException as error:  # reported by the test
            errors.append(error)

    searchers = [threading.Thread(target=search) for _ in range(2)]
    cycler = threading.Thread(target=cycle)
    for thread in (*searchers, cycler):
        thread.start()
    time.sleep(4)
    stop.set()
    for thread in (cycler, *searchers):
        thread.join(120)
    assert errors == []
    wrong, checked = judge(observations, not_ready)
    assert wrong == [], f"{len(wrong)} hits of documents that were not READY on the replica"
    # Not vacuous: searches did fall inside stretches where a document holding its chunks was
    # not READY (only the READY join kept it out), and documents were found at other times.
    _, checked_with_chunks = judge(observations, {doc: not_ready[doc] for doc in with_chunks})
    assert checked_with_chunks > 0, f"no search fell inside a non-READY stretch with chunks ({len(observations)} searches)"
    assert checked > checked_with_chunks, f"no search fell inside a reprocess ({len(observations)} searches)"
    assert any(hits & with_chunks for _, _, hits in observations)


def test_a_search_the_replica_cancels_for_a_recovery_conflict_is_unavailable_and_retryable(cluster, collection):
    """A hot standby cancels a statement that holds what replay needs (here: a lock the primary
    took, with max_standby_streaming_delay 0 so that replay never waits). The client sees
    UNAVAILABLE (RECOVERY_CONFLICT), which it retries, not INTERNAL."""
    document = cluster.ready_document(collection, "conflicting with recovery")
    admin = cluster.standby_admin_conn
    admin.execute("ALTER SYSTEM SET max_standby_streaming_delay = 0")
    admin.execute("SELECT pg_reload_conf()")
    stop = threading.Event()
    outcomes: list = []

    def search() -> None:
        while not stop.is_set():
            try:
                answer = cluster.on_replica.Search(search_request(collection, "conflicting with recovery"), timeout=10)
                outcomes.append(document.id in hit_ids(answer))
            except grpc.RpcError as error:
                outcomes.append(error)

    try:
        searchers = [threading.Thread(target=search) for _ in range(3)]
        for thread in searchers:
            thread.start()
        # At least 150 locks, then on until a search was cancelled (a starved machine may need
        # more for a search's statement to overlap a lock's replay; seen: 276 searches, none).
        with psycopg.connect(cluster.primary_url, autocommit=True) as primary:
            for attempt in range(3000):
                with primary.transaction():
                    primary.execute("LOCK TABLE chunks IN ACCESS EXCLUSIVE MODE")
                time.sleep(0.01)
                if attempt >= 150 and any(isinstance(o, grpc.RpcError) for o in outcomes):
                    break
        stop.set()
        for thread in searchers:
            thread.join(30)
    finally:
        admin.execute("ALTER SYSTEM RESET max_standby_streaming_delay")
        admin.execute("SELECT pg_reload_conf()")
    errors = [o for o in outcomes if isinstance(o, grpc.RpcError)]
    assert errors, f"no search was cancelled ({len(outcomes)} searches): the conflict was not provoked"
    assert {(e.code(), reason_of(e)) for e in errors} == {(grpc.StatusCode.UNAVAILABLE, Reason.RECOVERY_CONFLICT)}
    assert all("Traceback" not in (e.details() or "") and "conflict with recovery" not in e.details() for e in errors)
    assert any(o is True for o in outcomes)  # the searches not cancelled found the document


@pytest.fixture(scope="module")
def second_standby(cluster):
    """Another standby of the same primary, and a search whose pool spreads its connections over
    both standbys (libpq's load_balance_hosts=random), as a pool behind CloudNativePG's `-ro`
    Service does."""
    from urllib.parse import parse_qs, urlsplit, urlunsplit

    standby = create_standby(cluster.primary, cluster.base / "standby2")
    admin = standby.start()
    sockets = [parse_qs(urlsplit(url).query)["host"][0] for url in (cluster.standby_admin, admin)]
    both = urlunsplit(urlsplit(cluster.standby_url)._replace(query=f"host={','.join(sockets)}&load_balance_hosts=random"))
    search = None
    try:

        def all_open() -> list[int] | None:
            """search's connections on each standby, once its 8 are open."""
            now = []
            for url in (cluster.standby_admin, admin):
                with psycopg.connect(url, autocommit=True) as conn:
                    query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sluice-search'"
                    now.append(conn.execute(query).fetchone()[0])
            return now if sum(now) >= 8 else None

        # Until each standby holds at least one of its 8 connections (each picks one at random).
        for _ in range(12):
            search = RunningSearch(
                both, search_eval_gate_enabled=False, rate_limit_per_second=0.0, search_pool_min_size=8, search_pool_max_size=8
            )

            opened = wait_for(all_open, 20, what="search's 8 connections")
            if min(opened) >= 1:
                break
            search.stop()
            search = None
        assert search is not None, "search's connections never reached both standbys"
        channel = auth_keys.channel(search.address)
        # The standby holding fewer of the connections first: the test pauses it.
        urls = sorted(zip(opened, (cluster.standby_admin, admin), strict=True))
        with psycopg.connect(urls[0][1], autocommit=True) as paused, psycopg.connect(urls[1][1], autocommit=True) as serving:
            yield search_service_pb2_grpc.SearchServiceStub(channel), paused, serving, search
        channel.close()
    finally:
        if search is not None:
            search.stop()
        standby.stop()


def wait_replayed(standby_admin, document) -> None:
    """Wait until a standby that is not paused has replayed `document`'s token. On a loaded machine
    (the suite's chaos run beside it) its replay can trail by more than a search's deadline; the
    tests that use this are about which connection answers, not about replay speed."""
    token = consistency.parse_token(document.consistency_token)

    def caught_up() -> bool:
        replay = standby_admin.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()[0]
        return consistency.replayed(consistency.lsn_value(replay), token)

    wait_for(caught_up, 30, what="the serving standby to replay the document")


def test_with_one_of_two_replicas_paused_every_search_with_the_token_is_answered_by_the_other(
    cluster, second_standby, collection
):
    """One standby's replay is paused (the one holding fewer of search's 8 connections, at least
    one), the other's is not. Each connection a search takes is checked for the token: one on the
    paused standby goes back to the pool and another is taken, so every search with the token
    finds the document, one at a time and two at a time; none answers REPLICA_BEHIND (before,
    most did: 96 of 96 two at a time, docs/scaling.md#read-replicas-and-the-consistency-token).
    A check made on one connection and a search run on another would give an answer without
    the document."""
    stub, second, serving, _ = second_standby
    pause_replay(cluster.primary_url, second)
    try:
        document = cluster.ready_document(collection, "on one replica of two")
        request = search_request(collection, "on one replica of two", document.consistency_token)
        wait_replayed(serving, document)

        def one_search(_: int) -> str:
            try:
                # 5 s: a search waiting on a paused connection answers REPLICA_BEHIND after 4.9 s.
                answer = stub.Search(request, timeout=5.0)
            except grpc.RpcError as error:
                assert (error.code(), reason_of(error)) == (grpc.StatusCode.UNAVAILABLE, Reason.REPLICA_BEHIND), error.details()
                return "behind"
            return "found" if document.id in hit_ids(answer) else "missed"

        # One at a time: each search takes three connections (counted with the pool's statistics) in
        # the pool's order (first idle, returned ones last), so 16 searches take every one of the
        # 8 connections, the paused standby's among them.
        before = skipped_connections()
        one_at_a_time = [one_search(n) for n in range(16)]
        assert one_at_a_time == ["found"] * 16, one_at_a_time
        assert skipped_connections() > before  # the paused standby's connections were taken and handed back
        # Two at a time: at most two of the serving standby's 4 or more connections are held.
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            two_at_a_time = list(pool.map(one_search, range(16)))
        assert two_at_a_time == ["found"] * 16, two_at_a_time
    finally:
        second.execute("SELECT pg_wal_replay_resume()")


def test_a_token_search_takes_a_current_connection_that_another_request_held(cluster, second_standby, collection):
    """One standby paused, and every connection on the other held elsewhere for a moment (as
    concurrent searches hold them), so the pool's idle connections are all behind. The search
    does not wait on one of them until its deadline: it sleeps between rounds of the pool and
    takes a current connection once one is back. Before, it waited on the lagging connection in
    hand and answered REPLICA_BEHIND (1 of 16 two-at-a-time searches in a clean-clone CI run)."""
    stub, second, serving, search = second_standby
    pause_replay(cluster.primary_url, second)
    pool = search.server.pool
    try:
        document = cluster.ready_document(collection, "behind held connections")
        request = search_request(collection, "behind held connections", document.consistency_token)
        wait_replayed(serving, document)

        async def hold_the_current() -> list:
            """Every connection of the pool checked out; those on the paused standby given back."""
            taken = [await pool.getconn() for _ in range(8)]
            held = []
            for conn in taken:
                paused = (await (await conn.execute("SELECT pg_is_wal_replay_paused()")).fetchone())[0]
                if paused:
                    await pool.putconn(conn)
                else:
                    held.append(conn)
            return held

        async def give_back(held: list) -> None:
            for conn in held:
                await pool.putconn(conn)

        held = search._call(hold_the_current())
        assert 1 <= len(held) < 8
        before = skipped_connections()
        answer = stub.Search.future(request, timeout=5.0)  # REPLICA_BEHIND after 4.9 s, waited on a paused one
        wait_for(lambda: skipped_connections() > before + 8 - len(held), 10, what="the search to try every idle connection")
        search._call(give_back(held))
        assert document.id in hit_ids(answer.result())
    finally:
        second.execute("SELECT pg_wal_replay_resume()")


def test_with_every_replica_behind_a_search_with_the_token_waits_and_answers_replica_behind(cluster, second_standby, collection):
    """Both standbys paused: every connection of search's pool is behind. The search hands back
    each connection it tries, sleeps a poll interval after each round of the pool's 8 and tries
    again (docs/scaling.md): REPLICA_BEHIND at its deadline, the document if replay resumes
    meanwhile. A search cancelled while it waits leaves every connection in the pool."""
    stub, second, serving, search = second_standby
    pause_replay(cluster.primary_url, second)
    try:
        pause_replay(cluster.primary_url, serving)
        document = cluster.ready_document(collection, "on two paused replicas")
        request = search_request(collection, "on two paused replicas", document.consistency_token)
        before = skipped_connections()
        error = expect_error(lambda: stub.Search(request, timeout=1.0), grpc.StatusCode.UNAVAILABLE, Reason.REPLICA_BEHIND)
        assert "bytes of write-ahead log behind" in error.details() and "replay is paused" in error.details()
        # Round after round: a first round of all 8, then more (the old search waited on the 8th).
        assert skipped_connections() - before > 8

        async def idle() -> int:
            return search.server.pool.get_stats()["pool_available"]

        # Cancelled by its client while it waits: every connection is back in the pool after.
        wait_for(lambda: search._call(idle()) == 8, 10, what="search's 8 connections to be idle")
        cancelled = stub.Search.future(request, timeout=30)
        busy = skipped_connections()
        wait_for(lambda: skipped_connections() > busy + 8, 10, what="the search to try its rounds")
        cancelled.cancel()
        wait_for(lambda: search._call(idle()) == 8, 10, what="the cancelled search to return its connection")
        # A search that waits is answered once replay resumes.
        answers: list = []
        waiting = threading.Thread(target=lambda: answers.append(stub.Search(request, timeout=30)))
        waiting.start()
        time.sleep(0.5)  # let it start waiting; it must still be waiting (replay is paused)
        assert waiting.is_alive()
    finally:
        serving.execute("SELECT pg_wal_replay_resume()")
        second.execute("SELECT pg_wal_replay_resume()")
    waiting.join(30)
    assert len(answers) == 1 and document.id in hit_ids(answers[0])
