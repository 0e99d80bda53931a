"""gRPC channels and stubs for the two public services, with addresses from flags or env."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import grpc

from sluice.v1 import document_service_pb2_grpc, search_service_pb2_grpc

from .errors import from_rpc_error

DEFAULT_INGEST_ADDRESS = "localhost:50051"
DEFAULT_SEARCH_ADDRESS = "localhost:50052"
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# Unary calls fail instead of hanging when a server accepts the connection but never answers.
DEFAULT_TIMEOUT_SECONDS = 30.0

T = TypeVar("T")


def ingest_address(flag: str | None) -> str:
    return flag or os.environ.get("SLUICE_INGEST_ADDRESS") or DEFAULT_INGEST_ADDRESS


def search_address(flag: str | None) -> str:
    return flag or os.environ.get("SLUICE_SEARCH_ADDRESS") or DEFAULT_SEARCH_ADDRESS


def _channel(address: str) -> grpc.Channel:
    return grpc.insecure_channel(
        address,
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            # Fail fast when nothing listens instead of reconnecting with backoff for seconds.
            ("grpc.initial_reconnect_backoff_ms", 200),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ],
    )


@dataclass
class Clients:
    """Lazily opened stubs; `call` turns RpcErrors into CliErrors naming the service."""

    ingest_address: str
    search_address: str
    timeout: float = DEFAULT_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        self._channels: dict[str, grpc.Channel] = {}

    def _get_channel(self, address: str) -> grpc.Channel:
        if address not in self._channels:
            self._channels[address] = _channel(address)
        return self._channels[address]

    @property
    def documents(self) -> document_service_pb2_grpc.DocumentServiceStub:
        return document_service_pb2_grpc.DocumentServiceStub(self._get_channel(self.ingest_address))

    @property
    def search(self) -> search_service_pb2_grpc.SearchServiceStub:
        return search_service_pb2_grpc.SearchServiceStub(self._get_channel(self.search_address))

    def call(self, method: Callable[..., T], request, *, service: str = "ingest-api", timeout: float | None = None) -> T:
        """A unary call with a deadline; failures become CliError."""
        address = self.search_address if service == "search" else self.ingest_address
        try:
            return method(request, timeout=timeout or self.timeout)
        except grpc.RpcError as err:
            raise from_rpc_error(err, service=service, address=address) from None

    def rpc_error(self, err: grpc.RpcError, service: str = "ingest-api"):
        address = self.search_address if service == "search" else self.ingest_address
        return from_rpc_error(err, service=service, address=address)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()


@contextmanager
def open_clients(ingest: str | None, search: str | None) -> Iterator[Clients]:
    clients = Clients(ingest_address(ingest), search_address(search))
    try:
        yield clients
    finally:
        clients.close()
