"""`sluice admin backup | restore | check` on a `make run`-like home: an embedded PostgreSQL in
HOME/pg with the database `sluice` and HOME/database_url (docs/operations.md, "Backup and
restore"). No service and no API key are needed."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import auth_keys
import psycopg
import pytest
from sluice_cli.main import run
from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database
from sluice_ingest.migrations import upgrade


@pytest.fixture
def home():
    base = Path(tempfile.mkdtemp(prefix="sluice-admin-"))
    base.chmod(0o755)  # the embedded server runs as its own user when we are root
    yield base
    shutil.rmtree(base, ignore_errors=True)


def start(home: Path) -> tuple[EmbeddedPostgres, str]:
    server = EmbeddedPostgres(home / "pg", cleanup="stop")
    admin = server.start()
    ensure_database(admin, "sluice")
    url = database_uri(admin, "sluice")
    (home / "database_url").write_text(url + "\n")
    return server, url


def test_backup_restore_and_check_of_make_runs_database(home, capsys):
    server, url = start(home)
    try:
        upgrade(url)
        auth_keys.install(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO tenants (name) VALUES ('kept-by-the-backup')")
        assert run(["admin", "check", "--home", str(home)]) == 0
        assert "invariants hold" in capsys.readouterr().out
        assert run(["admin", "backup", "--home", str(home), "-o", str(home / "backup")]) == 0
        assert "verified" in capsys.readouterr().out
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("INSERT INTO tenants (name) VALUES ('after-the-backup')")
        # Not while PostgreSQL runs on the data directory.
        assert run(["admin", "restore", str(home / "backup"), "--home", str(home)]) == 2
        assert "stop `make run` first" in capsys.readouterr().err
    finally:
        server.stop()

    assert run(["admin", "restore", str(home / "backup"), "--home", str(home)]) == 0
    printed = capsys.readouterr().out
    assert "fenced 0 leases" in printed and "invariants hold" in printed
    kept = [p for p in home.iterdir() if p.name.startswith("pg.before-restore-")]
    assert len(kept) == 1, "the replaced data directory is kept, never deleted"

    server, url = start(home)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            names = {r[0] for r in conn.execute("SELECT name FROM tenants")}
        assert "kept-by-the-backup" in names and "after-the-backup" not in names
    finally:
        server.stop()

    # A damaged backup: refused, and the data directory in place stays as it was.
    (home / "backup" / "backup_manifest").write_text("{}")
    assert run(["admin", "restore", str(home / "backup"), "--home", str(home)]) == 1
    assert "pg_verifybackup failed" in capsys.readouterr().err
    assert (home / "pg" / "PG_VERSION").exists()


def test_check_without_a_database_says_how_to_name_one(home, capsys, monkeypatch):
    monkeypatch.delenv("SLUICE_DATABASE_URL", raising=False)
    assert run(["admin", "check", "--home", str(home)]) == 2
    assert "pass --database-url" in capsys.readouterr().err
