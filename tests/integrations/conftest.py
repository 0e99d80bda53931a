"""Fixtures of the LangChain and LlamaIndex integration tests: a running Sluice for each test.

The real ingest-api and search on a fresh database, and the CLI tests' ScriptedWorker doing a
worker's part through the real JobService (claim, read the content, report the stages, complete
with the file's paragraphs as chunks embedded by the collection's embedder; tests/cli/conftest.py).
`library` is a collection (hashing embedder: fast, and meaningful for these texts) holding
three text documents (two of examples/docs, one of tests/fixtures) with typed metadata, all READY.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import auth_keys
import pytest
from cli.conftest import ScriptedWorker
from search_server import RunningSearch

ROOT = Path(__file__).resolve().parents[2]
# path → (metadata, typed metadata) of the library's documents.
LIBRARY = {
    ROOT / "examples/docs/scaling-workers.md": (
        {"team": "ops"},
        {"year": 2025, "reviewed": True, "tags": ["workers", "scaling"]},
    ),
    ROOT / "examples/docs/search-modes.txt": ({"team": "search"}, {"year": 2024, "reviewed": False, "tags": ["search"]}),
    ROOT / "tests/fixtures/documents/operations.md": ({"team": "docs"}, {"year": 2023, "reviewed": True, "tags": ["overview"]}),
}
FILENAMES = {path.name for path in LIBRARY}


@dataclass
class Stack:
    ingest: str
    search: str
    worker: ScriptedWorker
    credentials: Path

    def env(self) -> dict[str, str]:
        """The SDK's environment for this stack, as `make run`'s users get it by default."""
        return {
            "SLUICE_INGEST_ADDRESS": self.ingest,
            "SLUICE_SEARCH_ADDRESS": self.search,
            "SLUICE_CREDENTIALS": str(self.credentials),
        }


@pytest.fixture
def stack(ingest_api, database_url, tmp_path, monkeypatch):
    search = RunningSearch(database_url)
    worker = ScriptedWorker(ingest_api.address)
    credentials = tmp_path / "credentials"
    credentials.write_text(json.dumps({"tenant": "default", "keys": auth_keys.KEYS}))
    running = Stack(ingest_api.address, search.address, worker, credentials)
    # The integrations make their SDK clients from the environment unless told otherwise.
    for name, value in running.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SLUICE_API_KEY", raising=False)
    yield running
    worker.stop()
    search.stop()
    assert not worker.errors, worker.errors


@pytest.fixture
def client(stack):
    from sluice_client import Client

    with Client(stack.ingest, search_address=stack.search, api_key=auth_keys.KEYS["client"]) as client:
        yield client


@pytest.fixture
def library(client):
    """The collection "library": LIBRARY's documents, READY; returns {file name: Document}."""
    client.collections.create("library", embedder="hashing")
    uploaded = [
        client.documents.upload("library", path, metadata=strings, typed_metadata=typed)
        for path, (strings, typed) in LIBRARY.items()
    ]
    ready = client.documents.wait_all(uploaded, timeout=120)
    assert all(d.ready for d in ready), [(d.filename, d.status, d.error_message) for d in ready]
    return {d.filename: d for d in ready}


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> dict[str, str]:
    """sluice-client, langchain-sluice and llama-index-sluice built as wheels and installed into a
    folder of their own; the environment that runs Python on them alone, as a user who did
    `pip install ./clients/langchain` has them: `python -S` processes no .pth file, so none of the
    repository's editable installs is on the path, and the third-party libraries come from
    site-packages directly."""
    folder = tmp_path_factory.mktemp("installed")
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    for package in ("python", "langchain", "llamaindex"):
        # Built from a copy: setuptools writes build/ beside the sources, and another test process
        # (or tests/clients/test_package.py) may be building the same package at the same time.
        source = shutil.copytree(
            ROOT / "clients" / package,
            folder / "sources" / package,
            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "node_modules"),
        )
        subprocess.run(
            [*pip, "wheel", "--no-deps", "--no-build-isolation", str(source), "-w", str(folder / "wheels")],
            check=True,
            timeout=300,
            capture_output=True,
        )
    wheels = sorted(str(w) for w in (folder / "wheels").glob("*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", str(folder / "site"), *wheels], check=True, timeout=300)
    return {"PYTHONPATH": f"{folder / 'site'}:{site.getsitepackages()[0]}", "SITE": str(folder / "site")}


def run_installed(installed: dict[str, str], stack: Stack, script: Path) -> subprocess.CompletedProcess[str]:
    """Run `script` with `python -S` on the installed wheels alone, against `stack`."""
    env = {**os.environ, **stack.env(), "PYTHONPATH": installed["PYTHONPATH"]}
    env.pop("SLUICE_API_KEY", None)
    return subprocess.run([sys.executable, "-S", str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def readme_example(readme: Path, marker: str) -> str:
    """The python block that follows `marker` in a README."""
    import re

    text = readme.read_text()
    assert marker in text, f"{readme} lost its tested example"
    found = re.search(r"```python\n(.*?)```", text.split(marker, 1)[1], flags=re.S)
    assert found, f"no python block after the marker in {readme}"
    return found.group(1)
