"""The gRPC channels to ingest-api and search, and the callables of every method on them.

Each call carries the caller's own `authorization` and `x-sluice-tenant` headers as gRPC metadata,
unchanged: the backends check the key, its role, its tenant (an admin key may name another) and
its rate limit exactly as for a gRPC client (docs/http.md, "Keys"). The gateway holds no key of
its own.
"""

from __future__ import annotations

from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sluice_common.channels import BALANCED_SCHEMES, ROUND_ROBIN
from sluice_common.tls import secure_or_insecure_channel

from .methods import Backend, Method
from .settings import GatewaySettings

# Uploads come in pieces of up to 1 MiB; messages stay well under gRPC's 4 MiB default.
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]


class Backends:
    def __init__(self, settings: GatewaySettings) -> None:
        tls = settings.backend_tls()

        def channel(address: str) -> grpc.aio.Channel:
            # A target naming its resolver (dns:///search:50052 behind a headless Service) is
            # balanced per call over every address, as the SDK and the workers do.
            options = CHANNEL_OPTIONS + ([ROUND_ROBIN] if address.startswith(BALANCED_SCHEMES) else [])
            channel: grpc.aio.Channel = secure_or_insecure_channel(address, tls, options, aio=True)
            return channel

        self.channels: dict[Backend, grpc.aio.Channel] = {
            Backend.INGEST: channel(settings.ingest_address),
            Backend.SEARCH: channel(settings.search_address),
        }
        self._callables: dict[str, Any] = {}

    def callable(self, method: Method) -> Any:
        """The multicallable of `method` (unary_unary, unary_stream or stream_unary)."""
        found = self._callables.get(method.path)
        if found is None:
            channel = self.channels[method.backend]
            factory = {
                "unary": channel.unary_unary,
                "server_stream": channel.unary_stream,
                "client_stream": channel.stream_unary,
            }[method.kind]
            found = factory(
                method.path,
                request_serializer=method.request_class.SerializeToString,
                response_deserializer=method.response_class.FromString,
            )
            self._callables[method.path] = found
        return found

    async def health(self) -> dict[str, str]:
        """Each backend's grpc.health.v1 answer (health checks need no key)."""
        answers = {}
        for backend, channel in self.channels.items():
            try:
                reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
                answers[backend.value] = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
            except grpc.RpcError as error:
                answers[backend.value] = f"{error.code().name}: {error.details()}"
        return answers

    async def close(self) -> None:
        for channel in self.channels.values():
            await channel.close()


# What a call says of who makes it and for whom: the key, and the tenant an admin key acts for
# (docs/http.md, "Keys"; the backends refuse the header from any other key, TENANT_NOT_ALLOWED).
# The tenant header is sluice_common.auth.guard.TENANT_HEADER, named here rather than imported:
# that package loads the key directory and psycopg, which the gateway has no use for.
TENANT_HEADER = "x-sluice-tenant"
FORWARDED_HEADERS = ("authorization", TENANT_HEADER)


def forwarded_metadata(headers: Any) -> list[tuple[str, str]]:
    """The caller's credentials and tenant header, as they came (absent stays absent: without a
    key the backend answers UNAUTHENTICATED, 401). Call `credentials_refusal` first: gRPC
    metadata carries printable ASCII only."""
    return [(name, value) for name in FORWARDED_HEADERS if (value := headers.get(name))]


def _printable_ascii(value: str) -> bool:
    return all(" " <= ch <= "~" for ch in value)


def credentials_refusal(headers: Any) -> tuple[str, str] | None:
    """Why the call's credentials cannot be what a backend accepts, as (reason, message), or None.

    Checked before the body is read (docs/http.md, "Keys"): a call without a key is 401 whatever
    its body holds, as a gRPC client's would be. A key or tenant name outside printable ASCII
    (a tab, an accented letter) is no key the server issued and could not travel as gRPC metadata:
    401 API_KEY_INVALID, not an internal error."""
    authorization = headers.get("authorization")
    if not authorization:
        return "API_KEY_MISSING", "this call needs an API key: send the header `Authorization: Bearer <key>`"
    if not _printable_ascii(authorization):
        return (
            "API_KEY_INVALID",
            "the Authorization header holds a character outside printable ASCII; keys look like slk_<id>_<secret>",
        )
    tenant = headers.get(TENANT_HEADER)
    if tenant is not None and not _printable_ascii(tenant):
        return "API_KEY_INVALID", "the X-Sluice-Tenant header holds a character outside printable ASCII; it names a tenant"
    return None
