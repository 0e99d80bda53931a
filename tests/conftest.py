"""Test fixtures: one embedded PostgreSQL (with pgvector) per test session, a migrated
template database, and a fresh copy of it for each test that asks for `database_url`."""

from __future__ import annotations

import itertools
import os

# Tests start PostgreSQL (pg_ctl) from a process whose gRPC threads are busy; gRPC's fork
# handlers then crash the forked child (SIGBUS before exec). Nothing here forks to run gRPC.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
# pytest-xdist's worker processes (make test) start with COLUMNS=80 and LINES=24 in their
# environment, which a run in one process does not have: the CLI's consoles, made when a test
# module first imports it, would then cut tables and wrap paths at 80 columns. Tests that need a
# width set COLUMNS themselves (tests/cli/conftest.py).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)
import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest
from auth_keys import install as install_keys
from auth_keys import search_url
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database

# Every message a client reads in any test is scanned for server internals (issue 21).
pytest_plugins = ["client_messages"]

TEMPLATE = "sluice_template"
_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_admin_uri():
    # Not under pytest's tmp dir: pytest re-chmods it to 0700 at every session start, which
    # locks the unprivileged postgres user out while another session's tests are running.
    base = Path(tempfile.mkdtemp(prefix="sluice-test-pg-"))
    base.chmod(0o755)
    server = EmbeddedPostgres(base / "data", cleanup="delete")
    uri = server.start()
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET max_connections = 300")
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("ALTER SYSTEM SET synchronous_commit = off")
    server.stop()
    uri = server.start()
    yield uri
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def template_uri(pg_admin_uri):
    from sluice_ingest.migrations import upgrade

    ensure_database(pg_admin_uri, TEMPLATE)
    uri = database_uri(pg_admin_uri, TEMPLATE)
    upgrade(uri)
    # Keys of the `default` tenant and search's login, in the template: every test database has them.
    install_keys(uri)
    return uri


@pytest.fixture
def search_database_url(database_url) -> str:
    return search_url(database_url)


@pytest.fixture
def database_url(pg_admin_uri, template_uri):
    """A freshly migrated, empty database of its own for one test.

    Made and dropped in the test's own setup and teardown, never in the background while
    another test runs: CREATE and DROP DATABASE hold a transaction id, and the events log shows
    an event only once every older transaction of the whole cluster has ended
    (`pg_snapshot_xmin`, store/events.py), so a copy made or dropped beside a running test hid
    that test's events (test_event_log, test_watch_collection and test_event_listeners failed)."""
    name = f"t_{os.getpid()}_{next(_counter)}"
    ensure_database(pg_admin_uri, name, template=TEMPLATE)
    yield database_uri(pg_admin_uri, name)
    with psycopg.connect(pg_admin_uri, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(psycopg.sql.Identifier(name)))


def dump_tasks(loop) -> None:
    """Print the stack of every task still running on `loop` (a hung shutdown's diagnosis)."""
    import asyncio
    import sys

    for task in asyncio.all_tasks(loop):
        print(f"--- task {task.get_name()} still running:", file=sys.stderr)
        task.print_stack(file=sys.stderr)


class RunningApp:
    """A service app (`start()`, `serve()`, `stop(grace)`, `.port`) serving in a thread of its own
    (its own event loop), on a free port."""

    thread_name = "app"

    def __init__(self, app) -> None:
        import asyncio
        import threading

        self.app = app
        self.settings = app.settings
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=self.thread_name, daemon=True)
        self.thread.start()
        self._call(self._start())
        self.address = f"127.0.0.1:{self.app.port}"

    async def _start(self) -> None:
        await self.app.start()
        await self.app.serve()

    def _call(self, coro, timeout: float = 60):
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        if self.loop.is_closed():
            return  # already stopped (a test may stop it early, e.g. to simulate a crash)
        try:
            self._call(self.app.stop(0))
        except TimeoutError:
            dump_tasks(self.loop)  # where the stop hangs, for the failure report
            raise
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


class RunningIngestApi(RunningApp):
    """An ingest-api serving in a thread of its own."""

    thread_name = "ingest-api"

    def __init__(self, settings) -> None:
        from sluice_ingest.main import IngestApp

        super().__init__(IngestApp(settings))


INGEST_TEST_DEFAULTS = {
    "bind": "127.0.0.1:0",
    "lease_seconds": 5.0,
    "retry_delay_seconds": 0.05,
    "log_json": False,
    "log_level": "WARNING",
    "rate_limit_per_second": 0.0,  # the rate-limit tests turn it on
}


@pytest.fixture
def ingest_api_factory(database_url):
    """Start ingest-api servers on the test's database: `ingest_api_factory(lease_seconds=1)`."""
    from sluice_ingest.settings import IngestSettings

    running: list[RunningIngestApi] = []

    def start(**overrides) -> RunningIngestApi:
        settings = IngestSettings(database_url=database_url, **{**INGEST_TEST_DEFAULTS, **overrides})
        server = RunningIngestApi(settings)
        running.append(server)
        return server

    yield start
    for server in running:
        server.stop()


class RunningWebhooks(RunningApp):
    """The sluice-webhooks dispatcher (WebhooksApp) in a thread of its own (its own event loop,
    pool and LISTEN connection), as a separate process would run it."""

    thread_name = "sluice-webhooks"

    def __init__(self, settings) -> None:
        from sluice_ingest.webhooks.main import WebhooksApp

        super().__init__(WebhooksApp(settings))


@pytest.fixture
def webhooks_factory(database_url):
    """Start webhook dispatchers (sluice-webhooks' WebhooksApp) on the test's database:
    `webhooks_factory(webhook_allow_private_networks=True)`."""
    from sluice_ingest.settings import IngestSettings

    running: list[RunningWebhooks] = []

    def start(**overrides) -> RunningWebhooks:
        settings = IngestSettings(
            database_url=database_url, **{**INGEST_TEST_DEFAULTS, "webhooks_bind": "127.0.0.1:0", **overrides}
        )
        dispatcher = RunningWebhooks(settings)
        running.append(dispatcher)
        return dispatcher

    yield start
    for dispatcher in running:
        dispatcher.stop()


@pytest.fixture
def ingest_api(ingest_api_factory) -> RunningIngestApi:
    """An in-process ingest-api (lease 5 s, first retry after 0.05 s); `.address` is "127.0.0.1:PORT"."""
    return ingest_api_factory()
