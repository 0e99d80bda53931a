"""Fixtures of the sources tests: a folder ingest-api accepts as a local root, and an ingest-api
that allows it (and private hosts, for the local HTTP, git and S3 servers the tests start)."""

from __future__ import annotations

import pytest


@pytest.fixture
def root(tmp_path):
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


@pytest.fixture
def api(ingest_api_factory, root):
    return ingest_api_factory(source_local_roots=str(root), source_allow_private_networks=True)
