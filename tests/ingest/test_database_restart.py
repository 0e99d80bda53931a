"""PostgreSQL restarts under running services: callers see UNAVAILABLE at worst, never
INTERNAL, and the services recover by themselves (checked pools, the LISTEN reconnect).

These tests restart their own embedded PostgreSQL (not the session's, which other tests share):
`database_url` is overridden below, so the usual `ingest_api` fixture runs on it.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

import auth_keys
import grpc
import psycopg
import pytest
from search_server import RunningSearch
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import search_service_pb2, search_service_pb2_grpc
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database
from sluice_common.errors import DatabaseUnavailable, DeadlineExceeded, domain_error_of, reason_of, status_code_of

from .helpers import Clients
from .test_documents import assert_long_poll_woken_by_upload

OK_OR_RETRY = {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}


# ------------------------------------------------------------------ the error table (no IO)


def test_connection_failures_are_database_unavailable():
    for exc in (
        psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.errors.CannotConnectNow("the database system is starting up"),
        psycopg.errors.TooManyConnections("sorry, too many clients already"),
    ):
        error = domain_error_of(exc)
        assert isinstance(error, DatabaseUnavailable), exc
        assert error.reason == "DATABASE_UNAVAILABLE" and "server closed" not in error.message


def test_a_statement_timeout_is_deadline_exceeded():
    error = domain_error_of(psycopg.errors.QueryCanceled("canceling statement due to statement timeout"))
    assert isinstance(error, DeadlineExceeded) and error.reason == "DEADLINE_EXCEEDED"
    assert status_code_of(error) is grpc.StatusCode.DEADLINE_EXCEEDED
    assert "canceling statement" not in error.message


def test_other_database_errors_stay_internal():
    assert domain_error_of(psycopg.errors.UndefinedTable('relation "x" does not exist')) is None
    assert domain_error_of(ValueError("bug")) is None


# ------------------------------------------------------------------ real restarts


@pytest.fixture
def own_postgres():
    base = Path(tempfile.mkdtemp(prefix="sluice-test-pg-restart-"))
    base.chmod(0o755)  # the unprivileged postgres user must reach its data (we may be root)
    server = EmbeddedPostgres(base / "data", cleanup="delete")
    admin = server.start()
    ensure_database(admin, "sluice")
    url = database_uri(admin, "sluice")
    from sluice_ingest.migrations import upgrade

    upgrade(url)
    auth_keys.install(url)
    yield server, url
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def database_url(own_postgres):
    return own_postgres[1]


class Caller:
    """Calls ingest-api and search in a loop from a thread, recording every status code."""

    def __init__(self, ingest: str, search: str) -> None:
        self.clients = Clients(ingest)
        self.search_channel = auth_keys.channel(search)
        self.search = search_service_pb2_grpc.SearchServiceStub(self.search_channel)
        self.codes: list[tuple[str, grpc.StatusCode, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def call_all(self) -> list[grpc.StatusCode]:
        seen = []
        for name, call in (
            ("GetCollection", lambda: self.clients.docs.GetCollection(ds.GetCollectionRequest(name="docs"), timeout=60)),
            ("ListDocuments", lambda: self.clients.docs.ListDocuments(ds.ListDocumentsRequest(collection="docs"), timeout=60)),
            (
                "Search",
                lambda: self.search.Search(
                    search_service_pb2.SearchRequest(collection="docs", query="sluice gates", top_k=3), timeout=60
                ),
            ),
        ):
            try:
                call()
                code, reason = grpc.StatusCode.OK, ""
            except grpc.RpcError as error:
                code, reason = error.code(), reason_of(error)
            self.codes.append((name, code, reason))
            seen.append(code)
        return seen

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.call_all()
            time.sleep(0.02)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def close(self) -> None:
        self.clients.close()
        self.search_channel.close()


def listening(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
        ).fetchone()[0]


def recovered(caller: Caller, within: float = 60) -> bool:
    """Every call OK, five rounds in a row."""
    deadline = time.monotonic() + within
    streak = 0
    while time.monotonic() < deadline and streak < 5:
        streak = streak + 1 if set(caller.call_all()) == {grpc.StatusCode.OK} else 0
        time.sleep(0.05)
    return streak >= 5


def test_postgres_restarts_under_ingest_api_and_search_give_no_internal(own_postgres, ingest_api):
    server, url = own_postgres
    search = RunningSearch(url, search_collection_cache_seconds=0.0, search_pool_min_size=2, log_level="ERROR")
    caller = Caller(ingest_api.address, search.address)
    try:
        collection_name = caller.clients.create_collection("docs").name
        assert collection_name.endswith("docs")
        # Warm every pool: the connections that the restarts will kill.
        for _ in range(5):
            assert set(caller.call_all()) == {grpc.StatusCode.OK}, caller.codes

        caller.start()  # calls in flight while the database goes away
        # An operator's restart (fast shutdown: backends terminated with an admin command)…
        server.pg_ctl("-w", "-m", "fast", "restart")
        time.sleep(1.0)
        # …and a crash: stopped at once, down for a moment, started again.
        server.pg_ctl("-w", "-m", "immediate", "stop")
        time.sleep(1.5)
        assert server.ensure_running()
        caller.stop()

        assert recovered(caller), caller.codes[-10:]
        unexpected = [c for c in caller.codes if c[1] not in OK_OR_RETRY]
        assert not unexpected, unexpected
        retried = [c for c in caller.codes if c[1] == grpc.StatusCode.UNAVAILABLE]
        assert all(reason == "DATABASE_UNAVAILABLE" for _, _, reason in retried), retried

        # The LISTEN connections are back (ingest-api's notify.py and search's collection cache
        # listener reconnect), and ingest-api's wakes ClaimJob long-polls.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and listening(url) != 2:
            time.sleep(0.2)
        assert listening(url) == 2
        assert_long_poll_woken_by_upload(caller.clients, "after-restart")
    finally:
        caller.stop() if caller._thread.is_alive() else None
        caller.close()
        search.stop()
