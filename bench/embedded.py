"""The benchmarks' PostgreSQL: an embedded server in a temporary folder, gone afterwards."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sluice_common.embedded_pg import EmbeddedPostgres, database_uri, ensure_database
from sluice_ingest.migrations import upgrade


@contextlib.contextmanager
def embedded_postgres(prefix: str = "sluice-bench-") -> Iterator[str]:
    """Start an embedded PostgreSQL; yields its admin URI; stops it and deletes its data."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o755)
    server = EmbeddedPostgres(base / "data", cleanup="delete")
    admin = server.start()
    try:
        yield admin
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def migrated_database(admin: str, name: str) -> str:
    """A database `name` with every migration applied; returns its URI."""
    ensure_database(admin, name)
    url = database_uri(admin, name)
    upgrade(url)
    return url
