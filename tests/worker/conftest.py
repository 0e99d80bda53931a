"""Fixtures of the worker tests: the document fixtures, warm parse sandboxes, a local
OpenAI-compatible embeddings server, the DocumentService client (`docs`, over whichever
`ingest_api` the test module uses) and a search server with its stub."""

from __future__ import annotations

from pathlib import Path

import auth_keys
import pytest
from sluice.v1 import search_service_pb2_grpc

from .e2e import Docs
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


@pytest.fixture
def ingest_api_with_its_own_lease(ingest_api_factory):
    """ingest-api with IngestSettings' own 60 s lease, not the suite's 5 s (INGEST_TEST_DEFAULTS in
    tests/conftest.py): chunking a document of megabytes holds this process's GIL, which the worker's
    lease renewals share with ingest-api and the test, for seconds on a loaded machine, and a lease
    lapsed that way (seen at load 8) is not what these tests are about. A module takes it as its
    `ingest_api`."""
    return ingest_api_factory(lease_seconds=60.0)


@pytest.fixture
async def docs(ingest_api):
    client = Docs(ingest_api.address)
    yield client
    await client.close()


@pytest.fixture
async def search(database_url):
    from search_server import RunningSearch

    server = RunningSearch(database_url)
    channel = auth_keys.aio_channel(server.address)
    yield search_service_pb2_grpc.SearchServiceStub(channel)
    await channel.close()
    server.stop()
