"""The Python client of Sluice: upload documents, follow their processing, search them.

    from sluice_client import Client

    client = Client("localhost:50051", search_address="localhost:50052", api_key=KEY)
    client.collections.create("docs")
    doc = client.documents.upload("docs", "report.pdf")
    doc = client.documents.wait(doc.id)
    for hit in client.search("docs", "how do leases expire", top_k=5):
        print(hit.filename, hit.text)

`AsyncClient` is the same in asyncio. Without arguments both read SLUICE_INGEST_ADDRESS,
SLUICE_SEARCH_ADDRESS, SLUICE_API_KEY (or the credentials file of `make run`) and the
SLUICE_TLS_* files (config.py). docs/clients.md is the guide.
"""

from __future__ import annotations

from .aio import AsyncClient
from .bundles import ExportedBundle
from .client import Client, DocumentTracker, UploadResult
from .config import TLS
from .errors import (
    Aborted,
    AlreadyExists,
    ConfigError,
    ConnectionFailed,
    DeadlineExceeded,
    DownloadError,
    FailedPrecondition,
    InvalidArgument,
    MassDeleteRefused,
    NotFound,
    PermissionDenied,
    RateLimited,
    ResourceExhausted,
    SluiceError,
    TLSError,
    Unauthenticated,
    Unavailable,
    UploadSourceError,
    WaitTimeout,
)
from .retry import RetryPolicy
from .sync import SyncFailure, SyncReport
from .types import (
    ApiKey,
    Chunk,
    ChunkPage,
    Collection,
    CollectionEvent,
    Document,
    DocumentStatus,
    DownloadedDocument,
    Embedder,
    Hit,
    HitExplanation,
    Progress,
    SearchMode,
    SearchResults,
    Tenant,
    Webhook,
)

__version__ = "0.1.0"

__all__ = [
    "TLS",
    "Aborted",
    "AlreadyExists",
    "ApiKey",
    "AsyncClient",
    "Chunk",
    "ChunkPage",
    "Client",
    "Collection",
    "CollectionEvent",
    "ConfigError",
    "ConnectionFailed",
    "DeadlineExceeded",
    "Document",
    "DocumentStatus",
    "DocumentTracker",
    "DownloadError",
    "DownloadedDocument",
    "Embedder",
    "ExportedBundle",
    "FailedPrecondition",
    "Hit",
    "HitExplanation",
    "InvalidArgument",
    "MassDeleteRefused",
    "NotFound",
    "PermissionDenied",
    "Progress",
    "RateLimited",
    "ResourceExhausted",
    "RetryPolicy",
    "SearchMode",
    "SearchResults",
    "SluiceError",
    "SyncFailure",
    "SyncReport",
    "TLSError",
    "Tenant",
    "Unauthenticated",
    "Unavailable",
    "UploadResult",
    "UploadSourceError",
    "WaitTimeout",
    "Webhook",
]
