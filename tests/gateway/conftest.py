"""Fixtures of the gateway tests: the real ingest-api and search on a fresh database, the CLI
tests' ScriptedWorker doing a worker's part through the real JobService, and sluice-gateway's
app served by uvicorn on a real socket in a thread of its own."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import auth_keys
import httpx
import pytest
from cli.conftest import ScriptedWorker
from helpers import free_port, wait_for
from search_server import RunningSearch


class RunningGateway:
    def __init__(self, ingest: str, search: str, **overrides) -> None:
        import uvicorn
        from sluice_gateway.main import uvicorn_config
        from sluice_gateway.settings import GatewaySettings

        port = free_port()
        settings = GatewaySettings(
            gateway_bind=f"127.0.0.1:{port}",
            ingest_address=ingest,
            search_address=search,
            log_json=False,
            log_level="WARNING",
            **overrides,
        )
        self.server = uvicorn.Server(uvicorn_config(settings))
        self.thread = threading.Thread(target=self.server.run, name="sluice-gateway", daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started or not self.thread.is_alive(), 60, what="the gateway to listen")
        assert self.server.started, "the gateway did not start"
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


@dataclass
class Stack:
    gateway: RunningGateway
    worker: ScriptedWorker
    ingest: str
    search: str

    @property
    def url(self) -> str:
        return self.gateway.url


@pytest.fixture
def stack(ingest_api, database_url):
    search = RunningSearch(database_url)
    worker = ScriptedWorker(ingest_api.address)
    gateway = RunningGateway(ingest_api.address, search.address)
    yield Stack(gateway, worker, ingest_api.address, search.address)
    gateway.stop()
    worker.stop()
    search.stop()
    assert not worker.errors, worker.errors


def key_headers(role: str = "client") -> dict[str, str]:
    return {"Authorization": f"Bearer {auth_keys.KEYS[role]}"}


@pytest.fixture
def http(stack):
    """An httpx client on the gateway with the default tenant's client key (a curl, in Python)."""
    with httpx.Client(base_url=stack.url, headers=key_headers(), timeout=60) as client:
        yield client
