"""`make run` with a replica (`SLUICE_DEV_REPLICA=1`): sluice-dev makes a streaming standby of its
embedded PostgreSQL and points search at it (docs/scaling.md#a-replica-with-make-run)."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import uuid
from pathlib import Path

import grpc
import psutil
import psycopg
import pytest
from dev_stack import DevStack
from helpers import expect_error, free_port
from sluice.v1 import search_service_pb2, search_service_pb2_grpc
from sluice_client import Client
from sluice_common import consistency
from sluice_common.reasons import Reason


def replica_postmaster(home) -> psutil.Process | None:
    pid_file = home / "pg-replica" / "postmaster.pid"
    if not pid_file.exists():
        return None
    with contextlib.suppress(psutil.NoSuchProcess, ValueError):
        return psutil.Process(int(pid_file.read_text().split()[0]))
    return None


@pytest.fixture
def stack():
    # Not under pytest's tmp dir: another session's start re-chmods it to 0700, which locks the
    # unprivileged postgres user out of a data directory it has yet to open (as tests/conftest.py).
    base = Path(tempfile.mkdtemp(prefix="sluice-test-dev-replica-"))
    base.chmod(0o755)
    home = base / "home"
    running = DevStack(home, extra_env={"SLUICE_DEV_REPLICA": "1", "SLUICE_DEV_SOURCES_PORT": str(free_port())})
    try:
        running.wait_ready()
        yield running
    finally:
        standby = replica_postmaster(home)
        if running.process.poll() is None:
            running.stop()
        if standby is not None and standby.is_running():  # sluice-dev failed to stop it: do not leave it behind
            standby.kill()
        shutil.rmtree(base, ignore_errors=True)


def test_search_reads_the_replica_and_a_token_reads_your_writes(stack):
    home = stack.home
    assert "replica" in stack.output and str(home / "pg-replica") in stack.output
    status = json.loads((home / "dev-status.json").read_text())
    assert status["replica"]["pid"] == replica_postmaster(home).pid
    replica_url = (home / "replica_url").read_text().strip()
    with psycopg.connect(replica_url) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone()[0] is True
        # search's own sessions are on the standby, as its read-only login.
        users = {
            row[0]
            for row in conn.execute("SELECT usename FROM pg_stat_activity WHERE application_name = 'sluice-search'").fetchall()
        }
    assert users == {"sluice_search"}

    key = json.loads((home / "credentials").read_text())["keys"]["client"]
    with Client(stack.ingest, search_address=stack.search, api_key=key, timeout=30) as client:
        client.collections.create("notes", embedder="hashing", dimensions=64)
        marker = f"kumquat{uuid.uuid4().hex[:8]}"
        document = client.documents.wait(
            client.documents.upload("notes", f"{marker} grows on a tree".encode(), filename="fruit.txt").id
        )
        assert document.ready and document.consistency_token
        hits = client.search("notes", marker, mode="keyword", consistency_token=document.consistency_token)
        assert [hit.document_id for hit in hits] == [document.id]
        # With replay paused (as the standby's superuser), a token past the replica is refused in time.
        later = consistency.PREFIX + consistency.lsn_text(consistency.parse_token(document.consistency_token) + 10**9)
        request = search_service_pb2.SearchRequest(
            collection="notes", query=marker, consistency_token=later, mode=search_service_pb2.SEARCH_MODE_KEYWORD
        )
        with psycopg.connect(replica_url, autocommit=True) as conn, grpc.insecure_channel(stack.search) as channel:
            stub = search_service_pb2_grpc.SearchServiceStub(channel)
            conn.execute("SELECT pg_wal_replay_pause()")
            try:
                expect_error(
                    lambda: stub.Search(request, timeout=1.0, metadata=(("authorization", f"Bearer {key}"),)),
                    grpc.StatusCode.UNAVAILABLE,
                    Reason.REPLICA_BEHIND,
                )
            finally:
                conn.execute("SELECT pg_wal_replay_resume()")
    standby = replica_postmaster(home)
    assert stack.stop() == 0
    assert "stopping PostgreSQL replica" in stack.output
    assert standby is not None
    with contextlib.suppress(psutil.NoSuchProcess):  # stopped: gone, or a zombie its detached parent has not reaped
        assert standby.status() == psutil.STATUS_ZOMBIE
