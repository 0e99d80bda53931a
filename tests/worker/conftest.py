"""Fixtures of the worker tests: the document fixtures, warm parse sandboxes, a local
OpenAI-compatible embeddings server."""

from __future__ import annotations

from pathlib import Path

import pytest

from .openai_server import LocalOpenAIServer

DOCUMENTS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"


@pytest.fixture(scope="session")
def documents_dir() -> Path:
    return DOCUMENTS


@pytest.fixture(scope="session")
def sandbox_pool():
    """Two warm sandboxes shared by the whole session (warming one takes seconds)."""
    from sluice_worker.parsing.sandbox import SandboxPool

    pool = SandboxPool(2, memory_limit_mb=2048, max_documents=1000)
    yield pool
    for box in pool._idle:
        box.close()


@pytest.fixture
def openai_server():
    server = LocalOpenAIServer().start()
    yield server
    server.stop()
