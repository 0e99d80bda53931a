"""Fixtures of the SDK tests: the real ingest-api and search on a fresh database, with the CLI
tests' ScriptedWorker doing a worker's part through the real JobService (tests/cli/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass

import auth_keys
import pytest
from cli.conftest import ScriptedWorker
from search_server import RunningSearch


@dataclass
class Services:
    ingest: str
    search: str
    worker: ScriptedWorker
    database_url: str


@pytest.fixture
def services(ingest_api, database_url):
    search = RunningSearch(database_url)
    worker = ScriptedWorker(ingest_api.address)
    yield Services(ingest_api.address, search.address, worker, database_url)
    worker.stop()
    search.stop()
    assert not worker.errors, worker.errors


@pytest.fixture
def client(services):
    from sluice_client import Client

    with Client(services.ingest, search_address=services.search, api_key=auth_keys.KEYS["client"]) as client:
        yield client
