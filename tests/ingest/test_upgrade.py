"""An upgrade from a real older state (docs/operations.md, "Upgrading"; issue 36): the previous
schema's commit, checked out in a worktree with a venv of its own (tests/older_commits.py),
loads real files through its own ingest-api and worker; the current migrations then run while
its ingest-api and worker go on serving uploads, and the current release takes over. The same
run checks the contract across versions: the previous commit's worker against the current
ingest-api, and the current worker against the previous ingest-api (docs/contributing.md).

One older state here (CI's budget); `python -m bench.upgrade_bench` runs the last five."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from older_commits import OldRelease, previous_schema_commit, upgrade_from
from sluice_ingest.migrations import LOCK_TIMEOUT_MS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def old_release():
    with OldRelease(previous_schema_commit()) as release:
        yield release


@pytest.fixture
def workdir():
    # Not under pytest's tmp dir (0700): the embedded server runs as its own user when we are root.
    base = Path(tempfile.mkdtemp(prefix="sluice-upgrade-"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_an_upgrade_from_the_previous_schema_loses_nothing(old_release, workdir):
    # Another session holds the row every migration updates for longer than lock_timeout: the
    # current migration gives up, rolls back and tries again instead of queueing every writer.
    result = upgrade_from(old_release, workdir, hold_lock_seconds=LOCK_TIMEOUT_MS / 1000 + 1.0, small=True)

    assert "trying again" in result.migrate_log, "the migration waited on a lock without lock_timeout"
    assert result.migration_lock_wait > 0, "the migration was seen waiting"
    lost = {table: figures for table, figures in result.tables.items() if figures[2]}
    assert not lost, f"rows lost or changed by the upgrade (before, after, lost): {lost}"
    for table in ("documents", "chunks", "document_versions", "collection_generations", "sources"):
        assert result.tables[table][0] > 0, f"the old release wrote no {table}: nothing was tested"
    assert result.top10_after == result.top10_before, "search answers differently after the upgrade"
    assert all(result.top10_before), "every fixed query found something"
    assert result.in_flight >= 1, "a job was RUNNING when the old ingest-api stopped (and is READY now)"
    # The contract across versions (a rolling upgrade's two orders): the current worker through
    # the old ingest-api, and the old worker through the current one, each made documents READY.
    assert result.current_worker_on_old_api == 2
    assert result.old_worker_on_current_api >= 1
    assert result.check_code == 0, result.check_output
    assert "BROKEN" not in result.check_output, result.check_output  # a NOTE (the replaced version's snapshot) is fine
