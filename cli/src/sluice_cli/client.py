"""gRPC channels and stubs for the public services, with addresses, keys and TLS from flags or env.

Credentials, first match wins: `--api-key` (or SLUICE_API_KEY) for every call; else the
credentials file that `make run` writes (SLUICE_CREDENTIALS, else ./.sluice/credentials,
else $SLUICE_DEV_HOME/credentials), whose admin key serves `sluice tenants`/`sluice keys` and
whose client key serves everything else.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import grpc

from sluice.v1 import admin_service_pb2_grpc, document_service_pb2_grpc, search_service_pb2_grpc, webhook_service_pb2_grpc

from sluice_common.channels import key_for_role, keyed_channel
from sluice_common.tls import ClientTLS

from .errors import EXIT_USAGE, CliError, from_rpc_error

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


def credentials_file() -> Path | None:
    candidates = [os.environ.get("SLUICE_CREDENTIALS", ""), ".sluice/credentials"]
    if os.environ.get("SLUICE_DEV_HOME"):
        candidates.append(os.path.join(os.environ["SLUICE_DEV_HOME"], "credentials"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def load_keys(flag: str | None) -> dict[str, str] | str:
    """The key for every call (a string), or the credentials file's keys by role."""
    explicit = flag or os.environ.get("SLUICE_API_KEY", "")
    if explicit:
        return explicit.strip()
    path = credentials_file()
    if path is None:
        return {}
    try:
        keys = json.loads(path.read_text()).get("keys", {})
    except (OSError, ValueError, AttributeError):
        raise CliError(f"the credentials file {path} is not valid JSON; delete it and restart `make run`",
                       EXIT_USAGE, "CREDENTIALS_INVALID") from None
    return {str(role): str(key) for role, key in keys.items()} if isinstance(keys, dict) else {}


def _channel(address: str, keys: dict[str, str] | str, tls: ClientTLS, tenant: str = "") -> grpc.Channel:
    source = keys if isinstance(keys, str) else key_for_role(keys)
    extra = [("x-sluice-tenant", tenant)] if tenant else []
    return keyed_channel(
        address,
        source,
        tls=tls,
        extra_metadata=extra,
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
    keys: dict[str, str] | str = ""
    tls: ClientTLS = ClientTLS()
    tenant: str = ""

    def __post_init__(self) -> None:
        self._channels: dict[str, grpc.Channel] = {}

    def _get_channel(self, address: str) -> grpc.Channel:
        if address not in self._channels:
            self._channels[address] = _channel(address, self.keys, self.tls, self.tenant)
        return self._channels[address]

    @property
    def admin(self) -> admin_service_pb2_grpc.AdminServiceStub:
        return admin_service_pb2_grpc.AdminServiceStub(self._get_channel(self.ingest_address))

    @property
    def documents(self) -> document_service_pb2_grpc.DocumentServiceStub:
        return document_service_pb2_grpc.DocumentServiceStub(self._get_channel(self.ingest_address))

    @property
    def webhooks(self) -> webhook_service_pb2_grpc.WebhookServiceStub:
        return webhook_service_pb2_grpc.WebhookServiceStub(self._get_channel(self.ingest_address))

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
def open_clients(
    ingest: str | None, search: str | None, *, api_key: str | None = None, ca_file: str | None = None,
    tenant: str | None = None,
) -> Iterator[Clients]:
    tls = ClientTLS(ca_file or os.environ.get("SLUICE_TLS_CA_FILE", ""),
                    os.environ.get("SLUICE_TLS_CLIENT_CERT_FILE", ""), os.environ.get("SLUICE_TLS_CLIENT_KEY_FILE", ""))
    clients = Clients(ingest_address(ingest), search_address(search), keys=load_keys(api_key), tls=tls,
                      tenant=tenant or os.environ.get("SLUICE_TENANT", ""))
    try:
        yield clients
    finally:
        clients.close()
