"""The access table: every RPC of every service and the roles that may call it, and the
services that need no key."""

from __future__ import annotations

import enum

OPEN_SERVICES = frozenset(
    {"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"}
)
REFLECTION_SERVICES = frozenset({"grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"})


class Role(enum.StrEnum):
    ADMIN = "admin"
    CLIENT = "client"
    READER = "reader"
    WORKER = "worker"


A, C, R, W = Role.ADMIN, Role.CLIENT, Role.READER, Role.WORKER
_WRITE = frozenset({A, C})
_READ = frozenset({A, C, R})

# A method that is missing here is refused (tests/auth checks that every RPC of the protos is listed).
METHOD_ROLES: dict[str, frozenset[Role]] = {
    "/sluice.v1.DocumentService/CreateCollection": _WRITE,
    "/sluice.v1.DocumentService/GetCollection": _READ,
    "/sluice.v1.DocumentService/ListCollections": _READ,
    "/sluice.v1.DocumentService/DeleteCollection": _WRITE,
    "/sluice.v1.DocumentService/ReindexCollection": _WRITE,
    "/sluice.v1.DocumentService/CancelReindex": _WRITE,
    "/sluice.v1.DocumentService/UploadDocument": _WRITE,
    "/sluice.v1.DocumentService/GetDocument": _READ,
    "/sluice.v1.DocumentService/ListDocuments": _READ,
    "/sluice.v1.DocumentService/DeleteDocument": _WRITE,
    "/sluice.v1.DocumentService/RetryDocument": _WRITE,
    "/sluice.v1.DocumentService/ReprocessDocument": _WRITE,
    "/sluice.v1.DocumentService/WatchDocument": _READ,
    "/sluice.v1.DocumentService/WatchCollection": _READ,
    "/sluice.v1.DocumentService/ListChunks": _READ,
    "/sluice.v1.DocumentService/UpdateChunk": _WRITE,
    "/sluice.v1.DocumentService/DownloadDocument": _READ,
    # A bundle holds every document's original bytes: whoever may download them may export it.
    "/sluice.v1.DocumentService/ExportCollection": _READ,
    "/sluice.v1.DocumentService/ImportCollection": _WRITE,
    "/sluice.v1.SearchService/Search": _READ,
    # Only a worker holding a lease can put chunks into the index.
    "/sluice.v1.JobService/ClaimJob": frozenset({W}),
    "/sluice.v1.JobService/RenewLease": frozenset({W}),
    "/sluice.v1.JobService/ReportStage": frozenset({W}),
    "/sluice.v1.JobService/ReadDocumentContent": frozenset({W}),
    "/sluice.v1.JobService/SaveSnapshot": frozenset({W}),
    "/sluice.v1.JobService/ReadSnapshot": frozenset({W}),
    "/sluice.v1.JobService/CompleteJob": frozenset({W}),
    "/sluice.v1.JobService/FailJob": frozenset({W}),
    "/sluice.v1.JobService/ReleaseJob": frozenset({W}),
    "/sluice.v1.WebhookService/CreateWebhook": _WRITE,
    "/sluice.v1.WebhookService/ListWebhooks": _READ,
    "/sluice.v1.WebhookService/GetWebhook": _READ,
    "/sluice.v1.WebhookService/DeleteWebhook": _WRITE,
    "/sluice.v1.WebhookService/ListWebhookDeliveries": _READ,
    "/sluice.v1.WebhookService/RotateWebhookSecret": _WRITE,
    "/sluice.v1.SourceService/CreateSource": _WRITE,
    "/sluice.v1.SourceService/GetSource": _READ,
    "/sluice.v1.SourceService/ListSources": _READ,
    "/sluice.v1.SourceService/DeleteSource": _WRITE,
    "/sluice.v1.SourceService/SyncSource": _WRITE,
    "/sluice.v1.SourceService/ListSourceRuns": _READ,
    "/sluice.v1.AdminService/CreateTenant": frozenset({A}),
    "/sluice.v1.AdminService/UpdateTenant": frozenset({A}),
    "/sluice.v1.AdminService/ListTenants": frozenset({A}),
    "/sluice.v1.AdminService/CreateApiKey": frozenset({A}),
    "/sluice.v1.AdminService/ListApiKeys": frozenset({A}),
    "/sluice.v1.AdminService/RevokeApiKey": frozenset({A}),
    "/sluice.v1.AdminService/GetCaller": frozenset({A, C, R, W}),  # every key, of itself
}


__all__ = ["METHOD_ROLES", "OPEN_SERVICES", "REFLECTION_SERVICES", "Role"]
