"""The RPCs the gateway serves, read from the generated descriptors: one table, so that every
public RPC is reachable (and listed in /openapi.json) without a line per method.

JobService is not here: it is the workers' internal API (docs/architecture.md, "Services"),
and a worker speaks gRPC.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cached_property

from google.protobuf import descriptor, descriptor_pb2, message, message_factory
from sluice.v1 import admin_service_pb2, document_service_pb2, search_service_pb2, source_service_pb2, webhook_service_pb2


class Backend(Enum):
    INGEST = "ingest"
    SEARCH = "search"


# Which process serves each public service.
SERVICES: tuple[tuple[descriptor.ServiceDescriptor, Backend], ...] = (
    (document_service_pb2.DESCRIPTOR.services_by_name["DocumentService"], Backend.INGEST),
    (search_service_pb2.DESCRIPTOR.services_by_name["SearchService"], Backend.SEARCH),
    (webhook_service_pb2.DESCRIPTOR.services_by_name["WebhookService"], Backend.INGEST),
    (admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"], Backend.INGEST),
    (source_service_pb2.DESCRIPTOR.services_by_name["SourceService"], Backend.INGEST),
)


@dataclass(frozen=True)
class Method:
    """One public RPC. Its derived attributes are computed once (cached_property writes the
    instance's __dict__, which a frozen dataclass allows): every call reads several of them."""

    descriptor: descriptor.MethodDescriptor
    backend: Backend

    @cached_property
    def path(self) -> str:
        """The gRPC path, which is also the Connect path: /sluice.v1.SearchService/Search."""
        return f"/{self.descriptor.containing_service.full_name}/{self.descriptor.name}"

    @cached_property
    def label(self) -> str:
        """`Service.Method`, as metrics name it: SearchService.Search."""
        return f"{self.descriptor.containing_service.name}.{self.descriptor.name}"

    @cached_property
    def kind(self) -> str:
        client, server = self.descriptor.client_streaming, self.descriptor.server_streaming
        return {(False, False): "unary", (False, True): "server_stream", (True, False): "client_stream"}.get(
            (client, server), "bidi"
        )

    @cached_property
    def side_effect_free(self) -> bool:
        """Marked `idempotency_level = NO_SIDE_EFFECTS` in its .proto: the Connect protocol then
        allows it as a GET, which browsers, proxies and CDNs may cache (docs/http.md, "GET requests")."""
        options = self.descriptor.GetOptions()
        return bool(options.idempotency_level == descriptor_pb2.MethodOptions.NO_SIDE_EFFECTS)

    @cached_property
    def takes_get(self) -> bool:
        """Served as a Connect GET: marked NO_SIDE_EFFECTS and unary (the Connect protocol has no
        GET for streams; WatchDocument and WatchCollection read but stream)."""
        return self.side_effect_free and self.kind == "unary"

    @cached_property
    def request_class(self) -> type[message.Message]:
        found: type[message.Message] = message_factory.GetMessageClass(self.descriptor.input_type)
        return found

    @cached_property
    def response_class(self) -> type[message.Message]:
        found: type[message.Message] = message_factory.GetMessageClass(self.descriptor.output_type)
        return found


def all_methods() -> list[Method]:
    return [Method(m, backend) for service, backend in SERVICES for m in service.methods]


METHODS: dict[str, Method] = {m.path: m for m in all_methods()}
UPLOAD = METHODS["/sluice.v1.DocumentService/UploadDocument"]
