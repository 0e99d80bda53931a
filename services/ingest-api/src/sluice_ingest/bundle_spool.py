"""The folders an export or an import works in (docs/bundles.md, "Import").

Each one lives in the bundle spool directory and is removed on every way out of its call
(success, refusal, error, cancellation). A process killed with SIGKILL cannot remove it, so each
folder is held with an exclusive `flock` for its life: at start, ingest-api removes the folders
that nobody holds any more and that are older than a few minutes (`sweep_stale`), which also
leaves alone the folders of another ingest-api sharing the directory.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

log = logging.getLogger("sluice.ingest.bundles")

PREFIXES = ("sluice-export-", "sluice-import-")


def spool_root(bundle_spool_dir: str, upload_spool_dir: str) -> Path:
    """The bundle spool directory: the setting, or `sluice-bundles` under the upload spool
    directory (or the system's temporary directory)."""
    if bundle_spool_dir:
        return Path(bundle_spool_dir)
    return Path(upload_spool_dir or tempfile.gettempdir()) / "sluice-bundles"


class WorkFolder:
    """A temporary folder held (flock) until `cleanup()`, which removes it; idempotent."""

    def __init__(self, root: Path, prefix: str) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
        self._fd: int | None = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def cleanup(self) -> None:
        if self._fd is None:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._fd)  # releases the flock
        self._fd = None

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def _held(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return True  # gone or unreadable: not ours to remove
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also releases the lock taken just now
    return False


def sweep_stale(root: Path, older_than_seconds: float, now: float | None = None) -> list[Path]:
    """Remove the work folders left by killed processes: older than `older_than_seconds` and held
    by no process. Returns what was removed."""
    if not root.is_dir():
        return []
    now = time.time() if now is None else now
    removed = []
    for entry in root.iterdir():
        if not entry.name.startswith(PREFIXES) or not entry.is_dir() or entry.is_symlink():
            continue
        try:
            age = now - entry.stat().st_mtime
        except OSError:
            continue
        if age < older_than_seconds or _held(entry):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    if removed:
        log.info("stale bundle spool folders removed", extra={"count": len(removed), "directory": str(root)})
    return removed


__all__ = ["PREFIXES", "WorkFolder", "spool_root", "sweep_stale"]
