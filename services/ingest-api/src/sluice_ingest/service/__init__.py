"""The service layer of ingest-api: the use cases, one unit of work each, in groups that change
together. Each group is given the stores it uses (ports.py) by the composition root (main.py):

- collections.py: collections and their index generations (reindex, cancel, the sweep);
- documents.py: uploads and the document calls;
- chunks.py: a document's chunks (list, disable, enable, edit) and its bytes (download);
- watches.py: WatchDocument and WatchCollection (the hub's signals, the events log);
- jobs.py: JobService, the workers' calls under their lease;
- admin.py: tenants and API keys.

Arguments every group checks alike (ids, page tokens) are in arguments.py.
"""

from __future__ import annotations

from .admin import AdminUseCases
from .chunks import ChunkUseCases
from .collections import CollectionSpec, CollectionUseCases, EvalQueryIn
from .documents import DocumentUseCases, UploadMeta
from .jobs import IncomingChunk, JobUseCases
from .watches import KeepAlive, WatchUseCases

__all__ = [
    "AdminUseCases",
    "ChunkUseCases",
    "CollectionSpec",
    "CollectionUseCases",
    "DocumentUseCases",
    "EvalQueryIn",
    "IncomingChunk",
    "JobUseCases",
    "KeepAlive",
    "UploadMeta",
    "WatchUseCases",
]
