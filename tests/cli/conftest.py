"""Fixtures of the CLI tests: a fake server for the fast tests, helpers to run `sluice`."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .fake_services import start_fake

VENV_BIN = Path(sys.executable).parent


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def fake():
    server, address, store = start_fake()
    store.address = address
    yield store
    server.stop(0)


@pytest.fixture
def sluice(capsys, monkeypatch):
    """Run `sluice ARGS…` in this process (fast); returns exit code, stdout, stderr."""
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str) -> Result:
        from sluice_cli.main import run as cli_run

        capsys.readouterr()
        code = cli_run([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def run_sluice_process(*args: str, env: dict | None = None, timeout: float = 120, cwd=None) -> Result:
    """Run the installed `sluice` console script as its own process."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    proc = subprocess.run([str(VENV_BIN / "sluice"), *map(str, args)], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=cwd)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def docs_folder(tmp_path):
    """A small folder tree of text documents with hidden files that must be skipped."""
    root = tmp_path / "docs"
    (root / "nested" / "deeper").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "alpha.md").write_text("# Alpha\n\nSluice turns documents into searchable chunks.\n")
    (root / "nested" / "beta.txt").write_text("Workers claim leased jobs and embed chunks with pgvector.\n")
    (root / "nested" / "deeper" / "gamma.html").write_text("<h1>Gamma</h1><p>Hybrid search fuses keyword and vector ranks.</p>")
    (root / ".hidden.md").write_text("must not be uploaded")
    (root / ".git" / "config").write_text("must not be uploaded")
    return root
