import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sluice.v1 import collection_pb2 as _collection_pb2
from sluice.v1 import document_pb2 as _document_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_KIND_UNSPECIFIED: _ClassVar[JobKind]
    JOB_KIND_INGEST: _ClassVar[JobKind]
    JOB_KIND_EMBED: _ClassVar[JobKind]
JOB_KIND_UNSPECIFIED: JobKind
JOB_KIND_INGEST: JobKind
JOB_KIND_EMBED: JobKind

class LeaseRef(_message.Message):
    __slots__ = ("job_id", "lease_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ...) -> None: ...

class ClaimJobRequest(_message.Message):
    __slots__ = ("worker_id", "wait_seconds")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    wait_seconds: float
    def __init__(self, worker_id: _Optional[str] = ..., wait_seconds: _Optional[float] = ...) -> None: ...

class ClaimJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("lease", "document_id", "collection", "filename", "mime_type", "content_sha256", "size_bytes", "attempt", "max_attempts", "lease_seconds", "embedder", "chunking", "metadata", "trace_context", "kind", "generation", "content", "snapshot_versions")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LEASE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LEASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    CHUNKING_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    document_id: str
    collection: str
    filename: str
    mime_type: str
    content_sha256: str
    size_bytes: int
    attempt: int
    max_attempts: int
    lease_seconds: float
    embedder: _collection_pb2.EmbedderConfig
    chunking: _collection_pb2.ChunkingConfig
    metadata: _containers.ScalarMap[str, str]
    trace_context: _containers.ScalarMap[str, str]
    kind: JobKind
    generation: int
    content: bytes
    snapshot_versions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., document_id: _Optional[str] = ..., collection: _Optional[str] = ..., filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., content_sha256: _Optional[str] = ..., size_bytes: _Optional[int] = ..., attempt: _Optional[int] = ..., max_attempts: _Optional[int] = ..., lease_seconds: _Optional[float] = ..., embedder: _Optional[_Union[_collection_pb2.EmbedderConfig, _Mapping]] = ..., chunking: _Optional[_Union[_collection_pb2.ChunkingConfig, _Mapping]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., kind: _Optional[_Union[JobKind, str]] = ..., generation: _Optional[int] = ..., content: _Optional[bytes] = ..., snapshot_versions: _Optional[_Iterable[str]] = ...) -> None: ...

class RenewLeaseRequest(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ...) -> None: ...

class RenewLeaseResponse(_message.Message):
    __slots__ = ("cancelled", "lease_expire_time")
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    lease_expire_time: _timestamp_pb2.Timestamp
    def __init__(self, cancelled: _Optional[bool] = ..., lease_expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReportStageRequest(_message.Message):
    __slots__ = ("lease", "stage", "done", "total", "unit")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    stage: _document_pb2.DocumentStatus
    done: int
    total: int
    unit: str
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., stage: _Optional[_Union[_document_pb2.DocumentStatus, str]] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., unit: _Optional[str] = ...) -> None: ...

class ReportStageResponse(_message.Message):
    __slots__ = ("lease_expire_time",)
    LEASE_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    lease_expire_time: _timestamp_pb2.Timestamp
    def __init__(self, lease_expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReadDocumentContentRequest(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ...) -> None: ...

class ReadDocumentContentResponse(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("index", "text", "page_number", "element_type", "section_title", "embedding", "text_as_html", "text_source", "ocr_confidence", "boxes")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PAGE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    SECTION_TITLE_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    TEXT_AS_HTML_FIELD_NUMBER: _ClassVar[int]
    TEXT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    OCR_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    BOXES_FIELD_NUMBER: _ClassVar[int]
    index: int
    text: str
    page_number: int
    element_type: str
    section_title: str
    embedding: _containers.RepeatedScalarFieldContainer[float]
    text_as_html: str
    text_source: str
    ocr_confidence: float
    boxes: _containers.RepeatedCompositeFieldContainer[_document_pb2.BoundingBox]
    def __init__(self, index: _Optional[int] = ..., text: _Optional[str] = ..., page_number: _Optional[int] = ..., element_type: _Optional[str] = ..., section_title: _Optional[str] = ..., embedding: _Optional[_Iterable[float]] = ..., text_as_html: _Optional[str] = ..., text_source: _Optional[str] = ..., ocr_confidence: _Optional[float] = ..., boxes: _Optional[_Iterable[_Union[_document_pb2.BoundingBox, _Mapping]]] = ...) -> None: ...

class SnapshotHeader(_message.Message):
    __slots__ = ("lease", "pipeline_version", "chunk_count")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_VERSION_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    pipeline_version: str
    chunk_count: int
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., pipeline_version: _Optional[str] = ..., chunk_count: _Optional[int] = ...) -> None: ...

class SaveSnapshotRequest(_message.Message):
    __slots__ = ("header", "chunks")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    header: SnapshotHeader
    chunks: ChunkBatch
    def __init__(self, header: _Optional[_Union[SnapshotHeader, _Mapping]] = ..., chunks: _Optional[_Union[ChunkBatch, _Mapping]] = ...) -> None: ...

class ChunkBatch(_message.Message):
    __slots__ = ("chunks",)
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[Chunk]
    def __init__(self, chunks: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ...) -> None: ...

class SaveSnapshotResponse(_message.Message):
    __slots__ = ("chunk_count",)
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    chunk_count: int
    def __init__(self, chunk_count: _Optional[int] = ...) -> None: ...

class ReadSnapshotRequest(_message.Message):
    __slots__ = ("lease", "pipeline_version")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_VERSION_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    pipeline_version: str
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., pipeline_version: _Optional[str] = ...) -> None: ...

class ReadSnapshotResponse(_message.Message):
    __slots__ = ("chunks",)
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[Chunk]
    def __init__(self, chunks: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ...) -> None: ...

class CompleteJobHeader(_message.Message):
    __slots__ = ("lease", "chunk_count")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    chunk_count: int
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., chunk_count: _Optional[int] = ...) -> None: ...

class CompleteJobRequest(_message.Message):
    __slots__ = ("header", "chunks")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    header: CompleteJobHeader
    chunks: ChunkBatch
    def __init__(self, header: _Optional[_Union[CompleteJobHeader, _Mapping]] = ..., chunks: _Optional[_Union[ChunkBatch, _Mapping]] = ...) -> None: ...

class CompleteJobResponse(_message.Message):
    __slots__ = ("document",)
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    document: _document_pb2.Document
    def __init__(self, document: _Optional[_Union[_document_pb2.Document, _Mapping]] = ...) -> None: ...

class FailJobRequest(_message.Message):
    __slots__ = ("lease", "retryable", "error_code", "error_message")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    retryable: bool
    error_code: str
    error_message: str
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., retryable: _Optional[bool] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ...) -> None: ...

class FailJobResponse(_message.Message):
    __slots__ = ("document", "will_retry")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    WILL_RETRY_FIELD_NUMBER: _ClassVar[int]
    document: _document_pb2.Document
    will_retry: bool
    def __init__(self, document: _Optional[_Union[_document_pb2.Document, _Mapping]] = ..., will_retry: _Optional[bool] = ...) -> None: ...

class ReleaseJobRequest(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ...) -> None: ...

class ReleaseJobResponse(_message.Message):
    __slots__ = ("document",)
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    document: _document_pb2.Document
    def __init__(self, document: _Optional[_Union[_document_pb2.Document, _Mapping]] = ...) -> None: ...
