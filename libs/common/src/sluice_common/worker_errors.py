"""The registry of error codes a worker may report through FailJob.

ingest-api refuses any other code (INVALID_ARGUMENT, reason UNKNOWN_ERROR_CODE): a worker key
cannot make up a reason that its owner would read as the cause of a failure. The message a
worker sends is bounded and cleaned too (sluice_ingest.domain.safe_error_message).
"""

from __future__ import annotations

import enum


class WorkerErrorCode(enum.StrEnum):
    # The document's own fault (permanent).
    PDF_ENCRYPTED = "PDF_ENCRYPTED"
    DOCUMENT_CORRUPT = "DOCUMENT_CORRUPT"
    DOCUMENT_EMPTY = "DOCUMENT_EMPTY"
    UNSUPPORTED_TYPE = "UNSUPPORTED_TYPE"
    DOCUMENT_TOO_LARGE = "DOCUMENT_TOO_LARGE"
    TOO_MANY_PAGES = "TOO_MANY_PAGES"
    # An image (or an image page) with more pixels than allowed: a decompression bomb, or a scan far too big.
    IMAGE_TOO_LARGE = "IMAGE_TOO_LARGE"
    TOO_MANY_CHUNKS = "TOO_MANY_CHUNKS"
    PARSER_LOST_TEXT = "PARSER_LOST_TEXT"
    PARSER_LIMIT = "PARSER_LIMIT"
    INVALID_CHUNK_TEXT = "INVALID_CHUNK_TEXT"
    # The parsing sandbox.
    PARSE_TIMEOUT = "PARSE_TIMEOUT"
    PARSE_MEMORY_LIMIT = "PARSE_MEMORY_LIMIT"
    PARSER_CRASHED = "PARSER_CRASHED"
    PARSER_UNAVAILABLE = "PARSER_UNAVAILABLE"
    # Embedders.
    EMBEDDER_DIMENSION_MISMATCH = "EMBEDDER_DIMENSION_MISMATCH"
    EMBEDDER_MODEL_NOT_FOUND = "EMBEDDER_MODEL_NOT_FOUND"
    EMBEDDER_UNSUPPORTED = "EMBEDDER_UNSUPPORTED"
    EMBEDDING_AUTH_FAILED = "EMBEDDING_AUTH_FAILED"
    EMBEDDING_BAD_RESPONSE = "EMBEDDING_BAD_RESPONSE"
    EMBEDDING_INPUT_REJECTED = "EMBEDDING_INPUT_REJECTED"
    EMBEDDING_PROVIDER_ERROR = "EMBEDDING_PROVIDER_ERROR"
    EMBEDDING_RATE_LIMITED = "EMBEDDING_RATE_LIMITED"
    EMBEDDING_REQUEST_TOO_LARGE = "EMBEDDING_REQUEST_TOO_LARGE"
    EMBEDDING_TIMEOUT = "EMBEDDING_TIMEOUT"
    EMBEDDING_UNAVAILABLE = "EMBEDDING_UNAVAILABLE"
    # ingest-api refused the job's own data (see the worker's jobs client).
    INGEST_REJECTED = "INGEST_REJECTED"
    INGEST_ERROR = "INGEST_ERROR"
    # Anything else inside the worker.
    WORKER_INTERNAL_ERROR = "WORKER_INTERNAL_ERROR"


REGISTERED: frozenset[str] = frozenset(code.value for code in WorkerErrorCode)


def is_registered(code: str) -> bool:
    return code in REGISTERED


__all__ = ["REGISTERED", "WorkerErrorCode", "is_registered"]
