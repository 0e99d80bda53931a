"""AdminService: tenants and keys (admin keys only: the access table in sluice_common.auth), and
GetCaller (any key, of itself).
Converts, calls one use case (service/admin.py), converts back."""

from __future__ import annotations

import grpc
from sluice.v1 import admin_service_pb2 as admin_pb2
from sluice.v1 import admin_service_pb2_grpc
from sluice_common.auth import current_principal, prefix_of
from sluice_common.errors import grpc_errors

from ..service import AdminUseCases
from ..service.admin import queue_share_of, quota_of
from .converters import ROLE_FROM_PROTO, ROLE_TO_PROTO, api_key_to_proto, tenant_to_proto


class AdminServicer(admin_service_pb2_grpc.AdminServiceServicer):
    def __init__(self, admin: AdminUseCases) -> None:
        self.admin = admin

    @grpc_errors
    async def CreateTenant(self, request: admin_pb2.CreateTenantRequest, context: grpc.aio.ServicerContext) -> admin_pb2.Tenant:
        q = request.tenant.quota
        row = await self.admin.create_tenant(request.tenant.name, q.max_documents, q.max_stored_bytes, q.max_collections)
        return tenant_to_proto(row)

    @grpc_errors
    async def UpdateTenant(self, request: admin_pb2.UpdateTenantRequest, context: grpc.aio.ServicerContext) -> admin_pb2.Tenant:
        quota = queue = None
        if request.HasField("quota"):
            q = request.quota
            quota = quota_of(q.max_documents, q.max_stored_bytes, q.max_collections)
        if request.HasField("queue"):
            queue = queue_share_of(request.queue.weight, request.queue.max_running_jobs)
        return tenant_to_proto(await self.admin.update_tenant(request.name, quota, queue))

    @grpc_errors
    async def ListTenants(
        self, request: admin_pb2.ListTenantsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListTenantsResponse:
        return admin_pb2.ListTenantsResponse(tenants=[tenant_to_proto(t) for t in await self.admin.list_tenants()])

    @grpc_errors
    async def CreateApiKey(
        self, request: admin_pb2.CreateApiKeyRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.CreateApiKeyResponse:
        row, secret = await self.admin.create_key(
            request.tenant, ROLE_FROM_PROTO.get(request.role), request.name, tuple(request.collections)
        )
        return admin_pb2.CreateApiKeyResponse(api_key=api_key_to_proto(row), secret=secret)

    @grpc_errors
    async def ListApiKeys(
        self, request: admin_pb2.ListApiKeysRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListApiKeysResponse:
        rows = await self.admin.list_keys(request.tenant)
        return admin_pb2.ListApiKeysResponse(api_keys=[api_key_to_proto(r) for r in rows])

    @grpc_errors
    async def RevokeApiKey(self, request: admin_pb2.RevokeApiKeyRequest, context: grpc.aio.ServicerContext) -> admin_pb2.ApiKey:
        return api_key_to_proto(await self.admin.revoke_key(request.id))

    @grpc_errors
    async def GetCaller(self, request: admin_pb2.GetCallerRequest, context: grpc.aio.ServicerContext) -> admin_pb2.Caller:
        caller = current_principal()  # what the interceptor authenticated; nothing to read
        return admin_pb2.Caller(
            key_prefix=prefix_of(caller.key_id),
            role=ROLE_TO_PROTO[caller.role],
            tenant=caller.tenant,
            collections=sorted(caller.collections or ()),
        )


__all__ = ["AdminServicer"]
