import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DocumentStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DOCUMENT_STATUS_UNSPECIFIED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_PENDING: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_PARSING: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_CHUNKING: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_EMBEDDING: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_INDEXING: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_READY: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_FAILED: _ClassVar[DocumentStatus]

class IngestionJobStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INGESTION_JOB_STATUS_UNSPECIFIED: _ClassVar[IngestionJobStatus]
    INGESTION_JOB_STATUS_PENDING: _ClassVar[IngestionJobStatus]
    INGESTION_JOB_STATUS_RUNNING: _ClassVar[IngestionJobStatus]
    INGESTION_JOB_STATUS_SUCCEEDED: _ClassVar[IngestionJobStatus]
    INGESTION_JOB_STATUS_FAILED: _ClassVar[IngestionJobStatus]

class AttemptOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ATTEMPT_OUTCOME_UNSPECIFIED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_RUNNING: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_SUCCEEDED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_RETRYABLE_FAILURE: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_PERMANENT_FAILURE: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_LEASE_EXPIRED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_RELEASED: _ClassVar[AttemptOutcome]
    ATTEMPT_OUTCOME_CANCELLED: _ClassVar[AttemptOutcome]

class VersionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERSION_STATE_UNSPECIFIED: _ClassVar[VersionState]
    VERSION_STATE_CURRENT: _ClassVar[VersionState]
    VERSION_STATE_PENDING: _ClassVar[VersionState]
    VERSION_STATE_FAILED: _ClassVar[VersionState]
    VERSION_STATE_REPLACED: _ClassVar[VersionState]
    VERSION_STATE_SUPERSEDED: _ClassVar[VersionState]
    VERSION_STATE_DELETED: _ClassVar[VersionState]
DOCUMENT_STATUS_UNSPECIFIED: DocumentStatus
DOCUMENT_STATUS_PENDING: DocumentStatus
DOCUMENT_STATUS_PARSING: DocumentStatus
DOCUMENT_STATUS_CHUNKING: DocumentStatus
DOCUMENT_STATUS_EMBEDDING: DocumentStatus
DOCUMENT_STATUS_INDEXING: DocumentStatus
DOCUMENT_STATUS_READY: DocumentStatus
DOCUMENT_STATUS_FAILED: DocumentStatus
INGESTION_JOB_STATUS_UNSPECIFIED: IngestionJobStatus
INGESTION_JOB_STATUS_PENDING: IngestionJobStatus
INGESTION_JOB_STATUS_RUNNING: IngestionJobStatus
INGESTION_JOB_STATUS_SUCCEEDED: IngestionJobStatus
INGESTION_JOB_STATUS_FAILED: IngestionJobStatus
ATTEMPT_OUTCOME_UNSPECIFIED: AttemptOutcome
ATTEMPT_OUTCOME_RUNNING: AttemptOutcome
ATTEMPT_OUTCOME_SUCCEEDED: AttemptOutcome
ATTEMPT_OUTCOME_RETRYABLE_FAILURE: AttemptOutcome
ATTEMPT_OUTCOME_PERMANENT_FAILURE: AttemptOutcome
ATTEMPT_OUTCOME_LEASE_EXPIRED: AttemptOutcome
ATTEMPT_OUTCOME_RELEASED: AttemptOutcome
ATTEMPT_OUTCOME_CANCELLED: AttemptOutcome
VERSION_STATE_UNSPECIFIED: VersionState
VERSION_STATE_CURRENT: VersionState
VERSION_STATE_PENDING: VersionState
VERSION_STATE_FAILED: VersionState
VERSION_STATE_REPLACED: VersionState
VERSION_STATE_SUPERSEDED: VersionState
VERSION_STATE_DELETED: VersionState

class Progress(_message.Message):
    __slots__ = ("stage", "done", "total", "unit")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    stage: DocumentStatus
    done: int
    total: int
    unit: str
    def __init__(self, stage: _Optional[_Union[DocumentStatus, str]] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., unit: _Optional[str] = ...) -> None: ...

class Attempt(_message.Message):
    __slots__ = ("number", "worker_id", "stage", "outcome", "error_code", "error_message", "retryable", "start_time", "end_time")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    number: int
    worker_id: str
    stage: DocumentStatus
    outcome: AttemptOutcome
    error_code: str
    error_message: str
    retryable: bool
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, number: _Optional[int] = ..., worker_id: _Optional[str] = ..., stage: _Optional[_Union[DocumentStatus, str]] = ..., outcome: _Optional[_Union[AttemptOutcome, str]] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ..., retryable: _Optional[bool] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("name", "id", "collection", "filename", "mime_type", "status", "error_message", "error_code", "progress", "attempts", "max_attempts", "chunk_count", "content_sha256", "size_bytes", "metadata", "job_status", "create_time", "update_time", "attempt_history", "next_attempt_time", "typed_metadata", "source_uri", "version", "versions", "consistency_token")
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
        value: MetadataValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[MetadataValue, _Mapping]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    JOB_STATUS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_HISTORY_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    TYPED_METADATA_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    collection: str
    filename: str
    mime_type: str
    status: DocumentStatus
    error_message: str
    error_code: str
    progress: Progress
    attempts: int
    max_attempts: int
    chunk_count: int
    content_sha256: str
    size_bytes: int
    metadata: _containers.ScalarMap[str, str]
    job_status: IngestionJobStatus
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    attempt_history: _containers.RepeatedCompositeFieldContainer[Attempt]
    next_attempt_time: _timestamp_pb2.Timestamp
    typed_metadata: _containers.MessageMap[str, MetadataValue]
    source_uri: str
    version: int
    versions: DocumentVersions
    consistency_token: str
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., collection: _Optional[str] = ..., filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., status: _Optional[_Union[DocumentStatus, str]] = ..., error_message: _Optional[str] = ..., error_code: _Optional[str] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., attempts: _Optional[int] = ..., max_attempts: _Optional[int] = ..., chunk_count: _Optional[int] = ..., content_sha256: _Optional[str] = ..., size_bytes: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ..., job_status: _Optional[_Union[IngestionJobStatus, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attempt_history: _Optional[_Iterable[_Union[Attempt, _Mapping]]] = ..., next_attempt_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., typed_metadata: _Optional[_Mapping[str, MetadataValue]] = ..., source_uri: _Optional[str] = ..., version: _Optional[int] = ..., versions: _Optional[_Union[DocumentVersions, _Mapping]] = ..., consistency_token: _Optional[str] = ...) -> None: ...

class DocumentVersion(_message.Message):
    __slots__ = ("version", "document_id", "content_sha256", "state", "status", "error_message", "create_time", "serving_time", "end_time")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    SERVING_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    version: int
    document_id: str
    content_sha256: str
    state: VersionState
    status: DocumentStatus
    error_message: str
    create_time: _timestamp_pb2.Timestamp
    serving_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, version: _Optional[int] = ..., document_id: _Optional[str] = ..., content_sha256: _Optional[str] = ..., state: _Optional[_Union[VersionState, str]] = ..., status: _Optional[_Union[DocumentStatus, str]] = ..., error_message: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., serving_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DocumentVersions(_message.Message):
    __slots__ = ("current", "next", "history")
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    current: DocumentVersion
    next: DocumentVersion
    history: _containers.RepeatedCompositeFieldContainer[DocumentVersion]
    def __init__(self, current: _Optional[_Union[DocumentVersion, _Mapping]] = ..., next: _Optional[_Union[DocumentVersion, _Mapping]] = ..., history: _Optional[_Iterable[_Union[DocumentVersion, _Mapping]]] = ...) -> None: ...

class StringList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class MetadataValue(_message.Message):
    __slots__ = ("string_value", "number_value", "bool_value", "timestamp_value", "string_list_value")
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    NUMBER_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_LIST_VALUE_FIELD_NUMBER: _ClassVar[int]
    string_value: str
    number_value: float
    bool_value: bool
    timestamp_value: _timestamp_pb2.Timestamp
    string_list_value: StringList
    def __init__(self, string_value: _Optional[str] = ..., number_value: _Optional[float] = ..., bool_value: _Optional[bool] = ..., timestamp_value: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., string_list_value: _Optional[_Union[StringList, _Mapping]] = ...) -> None: ...

class DocumentEvent(_message.Message):
    __slots__ = ("document", "sequence")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    document: Document
    sequence: int
    def __init__(self, document: _Optional[_Union[Document, _Mapping]] = ..., sequence: _Optional[int] = ...) -> None: ...

class BoundingBox(_message.Message):
    __slots__ = ("page_number", "left", "top", "right", "bottom")
    PAGE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    LEFT_FIELD_NUMBER: _ClassVar[int]
    TOP_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    BOTTOM_FIELD_NUMBER: _ClassVar[int]
    page_number: int
    left: float
    top: float
    right: float
    bottom: float
    def __init__(self, page_number: _Optional[int] = ..., left: _Optional[float] = ..., top: _Optional[float] = ..., right: _Optional[float] = ..., bottom: _Optional[float] = ...) -> None: ...
