"""The gRPC servicers of ingest-api, one module per servicer (documents.py with the collection
calls of collections.py, jobs.py, admin.py), and the proto conversions of all of them in
converters.py. A servicer validates the message's shape, converts, calls one use case of the
service layer and converts back: no SQL and no store in a servicer."""

from __future__ import annotations

from .admin import AdminServicer
from .documents import DocumentServicer
from .jobs import JobServicer

__all__ = ["AdminServicer", "DocumentServicer", "JobServicer"]
