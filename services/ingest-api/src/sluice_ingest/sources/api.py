"""The SourceService servicer: convert, call one use case, convert back."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import json_format
from sluice.v1 import source_service_pb2 as src
from sluice.v1 import source_service_pb2_grpc
from sluice_common.auth import current_principal
from sluice_common.auth.scope import require_visible, scope
from sluice_common.errors import grpc_errors
from sluice_common.names import source_name

from ..api.converters import run_to_proto, timestamp
from .domain import SourceKind
from .service import SourceService
from .store import SourceRow

# The oneof field of each kind, and its message.
SPEC_FIELDS = {
    SourceKind.LOCAL_FOLDER: ("local_folder", src.LocalFolderSource),
    SourceKind.S3: ("s3", src.S3Source),
    SourceKind.HTTP: ("http", src.HttpSource),
    SourceKind.GIT: ("git", src.GitSource),
}
KIND_OF_FIELD = {field: kind for kind, (field, _) in SPEC_FIELDS.items()}


def tenant() -> int:
    return current_principal().tenant_id


def spec_from_proto(source: src.Source) -> tuple[SourceKind | None, dict[str, Any]]:
    field = source.WhichOneof("spec")
    if field is None:
        return None, {}
    message = getattr(source, field)
    return KIND_OF_FIELD[field], json_format.MessageToDict(message, preserving_proto_field_name=True)


def source_to_proto(row: SourceRow) -> src.Source:
    kind = SourceKind(row.kind)
    field, message_type = SPEC_FIELDS[kind]
    source = src.Source(
        name=source_name(row.collection, str(row.id)),
        id=str(row.id),
        collection=row.collection,
        display_name=row.display_name,
        kind=src.SourceKind.Value("SOURCE_KIND_" + row.kind),
        schedule_interval_seconds=row.schedule_interval_seconds,
        max_delete_share=row.max_delete_share,
        create_time=timestamp(row.created_at),
    )
    # The stored spec holds names of credentials, never values (spec.py).
    getattr(source, field).CopyFrom(json_format.ParseDict(row.spec, message_type(), ignore_unknown_fields=True))
    if row.last_run is not None:
        source.last_run.CopyFrom(run_to_proto(row.last_run, row.collection))
    if row.next_sync_at is not None:
        source.next_sync_time.CopyFrom(timestamp(row.next_sync_at))
    return source


class SourceServicer(source_service_pb2_grpc.SourceServiceServicer):
    def __init__(self, service: SourceService) -> None:
        self.service = service

    @grpc_errors
    async def CreateSource(self, request: src.CreateSourceRequest, context: grpc.aio.ServicerContext) -> src.Source:
        s = request.source
        kind, spec = spec_from_proto(s)
        require_visible(s.collection)
        row = await self.service.create(
            tenant(), s.collection, s.display_name, kind, spec, s.schedule_interval_seconds, s.max_delete_share
        )
        return source_to_proto(row)

    @grpc_errors
    async def GetSource(self, request: src.GetSourceRequest, context: grpc.aio.ServicerContext) -> src.Source:
        await self.service.require_visible(tenant(), request.name, current_principal().collections)
        return source_to_proto(await self.service.get(tenant(), request.name))

    @grpc_errors
    async def ListSources(self, request: src.ListSourcesRequest, context: grpc.aio.ServicerContext) -> src.ListSourcesResponse:
        require_visible(request.collection)
        rows, token = await self.service.list_sources(
            tenant(), request.collection, request.page_size, request.page_token, scope()
        )
        return src.ListSourcesResponse(sources=[source_to_proto(r) for r in rows], next_page_token=token)

    @grpc_errors
    async def DeleteSource(self, request: src.DeleteSourceRequest, context: grpc.aio.ServicerContext) -> src.DeleteSourceResponse:
        await self.service.require_visible(tenant(), request.name, current_principal().collections)
        await self.service.delete(tenant(), request.name)
        return src.DeleteSourceResponse()

    @grpc_errors
    async def SyncSource(self, request: src.SyncSourceRequest, context: grpc.aio.ServicerContext) -> src.SourceRun:
        await self.service.require_visible(tenant(), request.name, current_principal().collections)
        source = await self.service.get(tenant(), request.name)
        run = await self.service.sync(tenant(), request.name, request.allow_mass_delete)
        return run_to_proto(run, source.collection)

    @grpc_errors
    async def ListSourceRuns(
        self, request: src.ListSourceRunsRequest, context: grpc.aio.ServicerContext
    ) -> src.ListSourceRunsResponse:
        await self.service.require_visible(tenant(), request.name, current_principal().collections)
        source = await self.service.get(tenant(), request.name)
        rows, token = await self.service.list_runs(tenant(), request.name, request.page_size, request.page_token)
        return src.ListSourceRunsResponse(runs=[run_to_proto(r, source.collection) for r in rows], next_page_token=token)
