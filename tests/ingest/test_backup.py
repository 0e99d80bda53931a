"""Backup and restore on a real PostgreSQL (docs/operations.md, "Backup and restore"): a base
backup taken while ingest-api serves, restored (a) to its end, where search answers the same,
the queue resumes, the consistency check is clean and no lease from before the backup can write,
and (b) with the WAL archive to a chosen moment, which it lands on: what was committed before
is there, what came after is not. A damaged backup is refused naming the file."""

from __future__ import annotations

import datetime as dt
import gzip
import shutil
import tempfile
import time
from pathlib import Path

import auth_keys
import grpc
import psycopg
import pytest
from conftest import INGEST_TEST_DEFAULTS, RunningIngestApi
from helpers import expect_error
from search_server import RunningSearch
from sluice.v1 import search_service_pb2 as sp
from sluice.v1 import search_service_pb2_grpc
from sluice_common import backup
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database
from sluice_ingest import check, fence
from sluice_ingest.migrations import upgrade
from sluice_ingest.settings import IngestSettings

from .helpers import Clients, D
from .test_chunks import complete, ready

QUERIES = ["rivers and mills", "lighthouse keeper brass lamp", "old town number3", "chapter tells"]


class Server:
    """An embedded PostgreSQL of its own (archiving WAL when asked), a database `sluice`
    migrated with the test keys, and ingest-api and search on it while `serve()` runs."""

    def __init__(self, data_dir: Path, archive: Path | None = None) -> None:
        self.pg = EmbeddedPostgres(data_dir, cleanup="stop")
        admin = self.pg.start()
        assert self.pg._server is not None
        self.system_user = self.pg._server.system_user  # who owns the files (root runs it as another user)
        if archive is not None:
            backup.archive_wal_to(admin, archive)
            self.pg.stop()
            self.pg = EmbeddedPostgres(data_dir, cleanup="stop")
            admin = self.pg.start()
        self.admin = admin
        self.url = database_uri(admin, "sluice")
        self.ingest: RunningIngestApi | None = None
        self.search: RunningSearch | None = None

    def create(self) -> None:
        ensure_database(self.admin, "sluice")
        upgrade(self.url)
        auth_keys.install(self.url)

    def serve(self) -> Clients:
        # Leases outlast the test (5 s by default): an expired one would be taken over by `ready`.
        self.ingest = RunningIngestApi(IngestSettings(database_url=self.url, **{**INGEST_TEST_DEFAULTS, "lease_seconds": 600.0}))
        self.search = RunningSearch(self.url)
        return Clients(self.ingest.address)

    def answers(self) -> list[list[tuple[str, int]]]:
        assert self.search is not None
        with auth_keys.channel(self.search.address) as channel:
            stub = search_service_pb2_grpc.SearchServiceStub(channel)
            return [
                [(h.document_id, h.chunk_index) for h in stub.Search(sp.SearchRequest(collection="docs", query=q, top_k=10)).hits]
                for q in QUERIES
            ]

    def stop(self) -> None:
        for service in (self.ingest, self.search):
            if service is not None:
                service.stop()
        self.ingest = self.search = None
        self.pg.stop()


@pytest.fixture
def workdir():
    # Not under pytest's tmp dir (0700): the embedded server runs as its own user when we are root.
    base = Path(tempfile.mkdtemp(prefix="sluice-backup-"))
    base.chmod(0o755)
    archive = base / "archive"
    archive.mkdir()
    archive.chmod(0o777)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_a_backup_restores_to_its_end_and_to_a_chosen_moment(workdir):
    primary = Server(workdir / "primary", archive=workdir / "archive")
    try:
        primary.create()
        c = primary.serve()
        c.create_collection()
        texts = [f"Chapter {i} tells of rivers and mills near the old town number{i}." for i in range(5)]
        texts[2] = "Chapter 2 tells of the lighthouse keeper and his brass lamp."
        first = ready(c, texts, name="first.txt")
        waiting = c.upload(content=b"queued before the backup", filename="waiting.txt")
        running = c.upload(content=b"running during the backup", filename="running.txt")
        claimed = c.claim(worker="old-worker")
        assert claimed.document_id in (waiting.id, running.id)
        c.stage(claimed, D.DOCUMENT_STATUS_PARSING)
        before = primary.answers()
        assert before[0] and before[1][0][0] == first

        info = backup.take(primary.url, workdir / "backup")  # while ingest-api and search serve
        assert info.database == "sluice" and info.schema_revision

        # After the backup: the waiting job is claimed too (the queue is then empty for `ready`),
        # then one document committed before the chosen moment, and one after it.
        assert c.claim(worker="old-worker").document_id in (waiting.id, running.id)
        kept = ready(c, ["A page committed after the backup, before the moment."], name="kept.txt")
        with psycopg.connect(primary.url, autocommit=True) as conn:
            time.sleep(1.2)
            moment = conn.execute("SELECT now()").fetchone()[0]
            time.sleep(1.2)
        lost = ready(c, ["A page committed after the moment."], name="lost.txt")
        with psycopg.connect(primary.url, autocommit=True) as conn:
            # The segment holding `lost` is finished and goes to the archive.
            segment = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()[0]
        deadline = time.monotonic() + 60
        while not (workdir / "archive" / segment).exists():
            assert time.monotonic() < deadline, "the WAL segment was never archived"
            time.sleep(0.2)
        c.close()
    finally:
        primary.stop()

    # (a) To the backup's end.
    system_user = primary.system_user
    backup.restore(workdir / "backup", workdir / "restored", system_user=system_user)
    restored = Server(workdir / "restored")
    try:
        backup.wait_until_writable(restored.url)
        with psycopg.connect(restored.url, autocommit=True) as conn:
            assert fence.fence_leases(conn) == 1  # the one RUNNING job of the backup
            assert check.run_checks(conn) == [], "the restored database holds every invariant"
            names = {r[0] for r in conn.execute("SELECT filename FROM documents")}
        assert names == {"first.txt", "waiting.txt", "running.txt"}
        c = restored.serve()
        assert restored.answers() == before, "search answers as before the backup"
        # The old worker's lease is gone: its next write is refused, nothing it sends lands.
        expect_error(lambda: c.stage(claimed, D.DOCUMENT_STATUS_CHUNKING), grpc.StatusCode.FAILED_PRECONDITION, "LEASE_NOT_HELD")
        # The queue resumes: both documents are claimed again and reach READY.
        done = set()
        for _ in range(2):
            job = c.claim(worker="new-worker", wait=5)
            assert job is not None and job.lease.lease_token != claimed.lease.lease_token
            c.run_to_indexing(job)
            assert complete(c, job, ["Processed again after the restore."]).status == D.DOCUMENT_STATUS_READY
            done.add(job.document_id)
        assert done == {waiting.id, running.id}
        c.close()
    finally:
        restored.stop()

    # (b) To the chosen moment, with the WAL archive.
    backup.restore(
        workdir / "backup",
        workdir / "moment",
        system_user=system_user,
        wal_archive=workdir / "archive",
        target_time=moment,
    )
    at_moment = Server(workdir / "moment")
    try:
        backup.wait_until_writable(at_moment.url)
        with psycopg.connect(at_moment.url, autocommit=True) as conn:
            fence.fence_leases(conn)
            ids = {str(r[0]) for r in conn.execute("SELECT id FROM documents")}
            assert check.run_checks(conn) == []
        assert kept in ids and first in ids, "what was committed before the moment is there"
        assert lost not in ids, "what was committed after the moment is not"
    finally:
        at_moment.stop()


def test_a_damaged_backup_is_refused_naming_the_file(workdir):
    primary = Server(workdir / "primary")
    try:
        primary.create()
        backup.take(primary.url, workdir / "backup")
    finally:
        primary.stop()
    base = workdir / "backup" / "base.tar.gz"
    raw = bytearray(gzip.decompress(base.read_bytes()))
    raw[len(raw) // 2] ^= 0xFF  # one flipped byte inside some file of the data directory
    base.write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(backup.BackupError, match=r'checksum mismatch for file "[^"]+" in archive "base.tar.gz"'):
        backup.restore(workdir / "backup", workdir / "restored")
    assert not (workdir / "restored").exists(), "nothing is written from a damaged backup"
    with pytest.raises(backup.BackupError, match="not empty"):
        backup.take(primary.url, workdir / "backup")
    with pytest.raises(backup.BackupError, match="needs the WAL archive"):
        backup.restore(workdir / "backup", workdir / "x", target_time=dt.datetime.now(dt.UTC))
