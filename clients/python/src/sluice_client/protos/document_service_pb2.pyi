import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sluice_client.protos import collection_pb2 as _collection_pb2
from sluice_client.protos import document_pb2 as _document_pb2
from sluice_client.protos import source_service_pb2 as _source_service_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SourceRunEvents(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SOURCE_RUN_EVENTS_UNSPECIFIED: _ClassVar[SourceRunEvents]
    SOURCE_RUN_EVENTS_INCLUDED: _ClassVar[SourceRunEvents]
    SOURCE_RUN_EVENTS_ONLY: _ClassVar[SourceRunEvents]

class CollectionEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COLLECTION_EVENT_TYPE_UNSPECIFIED: _ClassVar[CollectionEventType]
    COLLECTION_EVENT_TYPE_CHANGED: _ClassVar[CollectionEventType]
    COLLECTION_EVENT_TYPE_DELETED: _ClassVar[CollectionEventType]
    COLLECTION_EVENT_TYPE_HEARTBEAT: _ClassVar[CollectionEventType]
    COLLECTION_EVENT_TYPE_SOURCE_RUN_STARTED: _ClassVar[CollectionEventType]
    COLLECTION_EVENT_TYPE_SOURCE_RUN_PROGRESS: _ClassVar[CollectionEventType]
    COLLECTION_EVENT_TYPE_SOURCE_RUN_FINISHED: _ClassVar[CollectionEventType]
SOURCE_RUN_EVENTS_UNSPECIFIED: SourceRunEvents
SOURCE_RUN_EVENTS_INCLUDED: SourceRunEvents
SOURCE_RUN_EVENTS_ONLY: SourceRunEvents
COLLECTION_EVENT_TYPE_UNSPECIFIED: CollectionEventType
COLLECTION_EVENT_TYPE_CHANGED: CollectionEventType
COLLECTION_EVENT_TYPE_DELETED: CollectionEventType
COLLECTION_EVENT_TYPE_HEARTBEAT: CollectionEventType
COLLECTION_EVENT_TYPE_SOURCE_RUN_STARTED: CollectionEventType
COLLECTION_EVENT_TYPE_SOURCE_RUN_PROGRESS: CollectionEventType
COLLECTION_EVENT_TYPE_SOURCE_RUN_FINISHED: CollectionEventType

class CreateCollectionRequest(_message.Message):
    __slots__ = ("collection",)
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    collection: _collection_pb2.Collection
    def __init__(self, collection: _Optional[_Union[_collection_pb2.Collection, _Mapping]] = ...) -> None: ...

class GetCollectionRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListCollectionsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListCollectionsResponse(_message.Message):
    __slots__ = ("collections", "next_page_token")
    COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    collections: _containers.RepeatedCompositeFieldContainer[_collection_pb2.Collection]
    next_page_token: str
    def __init__(self, collections: _Optional[_Iterable[_Union[_collection_pb2.Collection, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteCollectionRequest(_message.Message):
    __slots__ = ("name", "force")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    force: bool
    def __init__(self, name: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class ReindexCollectionRequest(_message.Message):
    __slots__ = ("name", "embedder", "eval_queries", "min_ratio", "vector_precision")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    EVAL_QUERIES_FIELD_NUMBER: _ClassVar[int]
    MIN_RATIO_FIELD_NUMBER: _ClassVar[int]
    VECTOR_PRECISION_FIELD_NUMBER: _ClassVar[int]
    name: str
    embedder: _collection_pb2.EmbedderConfig
    eval_queries: _containers.RepeatedCompositeFieldContainer[EvalQuery]
    min_ratio: float
    vector_precision: _collection_pb2.VectorPrecision
    def __init__(self, name: _Optional[str] = ..., embedder: _Optional[_Union[_collection_pb2.EmbedderConfig, _Mapping]] = ..., eval_queries: _Optional[_Iterable[_Union[EvalQuery, _Mapping]]] = ..., min_ratio: _Optional[float] = ..., vector_precision: _Optional[_Union[_collection_pb2.VectorPrecision, str]] = ...) -> None: ...

class EvalQuery(_message.Message):
    __slots__ = ("query", "relevant", "id")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    RELEVANT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    query: str
    relevant: _containers.RepeatedScalarFieldContainer[str]
    id: str
    def __init__(self, query: _Optional[str] = ..., relevant: _Optional[_Iterable[str]] = ..., id: _Optional[str] = ...) -> None: ...

class CancelReindexRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteCollectionResponse(_message.Message):
    __slots__ = ("deleted_documents",)
    DELETED_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    deleted_documents: int
    def __init__(self, deleted_documents: _Optional[int] = ...) -> None: ...

class UploadDocumentMetadata(_message.Message):
    __slots__ = ("collection", "filename", "mime_type", "metadata", "request_id", "expected_size_bytes", "expected_sha256", "typed_metadata", "source_uri")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class TypedMetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _document_pb2.MetadataValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_document_pb2.MetadataValue, _Mapping]] = ...) -> None: ...
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SHA256_FIELD_NUMBER: _ClassVar[int]
    TYPED_METADATA_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    collection: str
    filename: str
    mime_type: str
    metadata: _containers.ScalarMap[str, str]
    request_id: str
    expected_size_bytes: int
    expected_sha256: str
    typed_metadata: _containers.MessageMap[str, _document_pb2.MetadataValue]
    source_uri: str
    def __init__(self, collection: _Optional[str] = ..., filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., request_id: _Optional[str] = ..., expected_size_bytes: _Optional[int] = ..., expected_sha256: _Optional[str] = ..., typed_metadata: _Optional[_Mapping[str, _document_pb2.MetadataValue]] = ..., source_uri: _Optional[str] = ...) -> None: ...

class UploadDocumentTrailer(_message.Message):
    __slots__ = ("size_bytes", "sha256")
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    size_bytes: int
    sha256: str
    def __init__(self, size_bytes: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class UploadDocumentRequest(_message.Message):
    __slots__ = ("metadata", "data", "trailer")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TRAILER_FIELD_NUMBER: _ClassVar[int]
    metadata: UploadDocumentMetadata
    data: bytes
    trailer: UploadDocumentTrailer
    def __init__(self, metadata: _Optional[_Union[UploadDocumentMetadata, _Mapping]] = ..., data: _Optional[bytes] = ..., trailer: _Optional[_Union[UploadDocumentTrailer, _Mapping]] = ...) -> None: ...

class GetDocumentRequest(_message.Message):
    __slots__ = ("id", "collection", "source_uri")
    ID_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    id: str
    collection: str
    source_uri: str
    def __init__(self, id: _Optional[str] = ..., collection: _Optional[str] = ..., source_uri: _Optional[str] = ...) -> None: ...

class ListDocumentsRequest(_message.Message):
    __slots__ = ("collection", "status", "page_size", "page_token", "source_uri")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    collection: str
    status: _document_pb2.DocumentStatus
    page_size: int
    page_token: str
    source_uri: str
    def __init__(self, collection: _Optional[str] = ..., status: _Optional[_Union[_document_pb2.DocumentStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., source_uri: _Optional[str] = ...) -> None: ...

class ListDocumentsResponse(_message.Message):
    __slots__ = ("documents", "next_page_token")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[_document_pb2.Document]
    next_page_token: str
    def __init__(self, documents: _Optional[_Iterable[_Union[_document_pb2.Document, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteDocumentRequest(_message.Message):
    __slots__ = ("id", "collection", "source_uri")
    ID_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    id: str
    collection: str
    source_uri: str
    def __init__(self, id: _Optional[str] = ..., collection: _Optional[str] = ..., source_uri: _Optional[str] = ...) -> None: ...

class DeleteDocumentResponse(_message.Message):
    __slots__ = ("cancelled_running_job", "deleted_documents")
    CANCELLED_RUNNING_JOB_FIELD_NUMBER: _ClassVar[int]
    DELETED_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    cancelled_running_job: bool
    deleted_documents: int
    def __init__(self, cancelled_running_job: _Optional[bool] = ..., deleted_documents: _Optional[int] = ...) -> None: ...

class RetryDocumentRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ReprocessDocumentRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class WatchDocumentRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class WatchCollectionRequest(_message.Message):
    __slots__ = ("collection", "after_cursor", "start_from_oldest", "statuses", "terminal_only", "source_runs")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    AFTER_CURSOR_FIELD_NUMBER: _ClassVar[int]
    START_FROM_OLDEST_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    TERMINAL_ONLY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_RUNS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    after_cursor: str
    start_from_oldest: bool
    statuses: _containers.RepeatedScalarFieldContainer[_document_pb2.DocumentStatus]
    terminal_only: bool
    source_runs: SourceRunEvents
    def __init__(self, collection: _Optional[str] = ..., after_cursor: _Optional[str] = ..., start_from_oldest: _Optional[bool] = ..., statuses: _Optional[_Iterable[_Union[_document_pb2.DocumentStatus, str]]] = ..., terminal_only: _Optional[bool] = ..., source_runs: _Optional[_Union[SourceRunEvents, str]] = ...) -> None: ...

class SourceRunEvent(_message.Message):
    __slots__ = ("source", "source_display_name", "run")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    source: str
    source_display_name: str
    run: _source_service_pb2.SourceRun
    def __init__(self, source: _Optional[str] = ..., source_display_name: _Optional[str] = ..., run: _Optional[_Union[_source_service_pb2.SourceRun, _Mapping]] = ...) -> None: ...

class CollectionEvent(_message.Message):
    __slots__ = ("cursor", "event_id", "type", "document", "create_time", "source_run")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_RUN_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    event_id: int
    type: CollectionEventType
    document: _document_pb2.Document
    create_time: _timestamp_pb2.Timestamp
    source_run: SourceRunEvent
    def __init__(self, cursor: _Optional[str] = ..., event_id: _Optional[int] = ..., type: _Optional[_Union[CollectionEventType, str]] = ..., document: _Optional[_Union[_document_pb2.Document, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., source_run: _Optional[_Union[SourceRunEvent, _Mapping]] = ...) -> None: ...
