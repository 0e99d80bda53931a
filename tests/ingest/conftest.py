"""Fixtures of the ingest-api tests."""

from __future__ import annotations

import pytest

from .helpers import Clients


@pytest.fixture
def c(ingest_api):
    """Clients of an in-process ingest-api, with a collection `docs` (8 dimensions, hashing)."""
    clients = Clients(ingest_api.address)
    clients.create_collection()
    yield clients
    clients.close()
