import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SourceKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SOURCE_KIND_UNSPECIFIED: _ClassVar[SourceKind]
    SOURCE_KIND_LOCAL_FOLDER: _ClassVar[SourceKind]
    SOURCE_KIND_S3: _ClassVar[SourceKind]
    SOURCE_KIND_HTTP: _ClassVar[SourceKind]
    SOURCE_KIND_GIT: _ClassVar[SourceKind]

class SourceRunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SOURCE_RUN_STATE_UNSPECIFIED: _ClassVar[SourceRunState]
    SOURCE_RUN_STATE_PENDING: _ClassVar[SourceRunState]
    SOURCE_RUN_STATE_RUNNING: _ClassVar[SourceRunState]
    SOURCE_RUN_STATE_SUCCEEDED: _ClassVar[SourceRunState]
    SOURCE_RUN_STATE_FAILED: _ClassVar[SourceRunState]
    SOURCE_RUN_STATE_BLOCKED_MASS_DELETE: _ClassVar[SourceRunState]
SOURCE_KIND_UNSPECIFIED: SourceKind
SOURCE_KIND_LOCAL_FOLDER: SourceKind
SOURCE_KIND_S3: SourceKind
SOURCE_KIND_HTTP: SourceKind
SOURCE_KIND_GIT: SourceKind
SOURCE_RUN_STATE_UNSPECIFIED: SourceRunState
SOURCE_RUN_STATE_PENDING: SourceRunState
SOURCE_RUN_STATE_RUNNING: SourceRunState
SOURCE_RUN_STATE_SUCCEEDED: SourceRunState
SOURCE_RUN_STATE_FAILED: SourceRunState
SOURCE_RUN_STATE_BLOCKED_MASS_DELETE: SourceRunState

class LocalFolderSource(_message.Message):
    __slots__ = ("path", "glob")
    PATH_FIELD_NUMBER: _ClassVar[int]
    GLOB_FIELD_NUMBER: _ClassVar[int]
    path: str
    glob: str
    def __init__(self, path: _Optional[str] = ..., glob: _Optional[str] = ...) -> None: ...

class S3Source(_message.Message):
    __slots__ = ("endpoint", "bucket", "prefix", "region", "access_key_id_env", "secret_access_key_env")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    ACCESS_KEY_ID_ENV_FIELD_NUMBER: _ClassVar[int]
    SECRET_ACCESS_KEY_ENV_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    bucket: str
    prefix: str
    region: str
    access_key_id_env: str
    secret_access_key_env: str
    def __init__(self, endpoint: _Optional[str] = ..., bucket: _Optional[str] = ..., prefix: _Optional[str] = ..., region: _Optional[str] = ..., access_key_id_env: _Optional[str] = ..., secret_access_key_env: _Optional[str] = ...) -> None: ...

class HttpSource(_message.Message):
    __slots__ = ("sitemap_url", "start_url", "max_pages")
    SITEMAP_URL_FIELD_NUMBER: _ClassVar[int]
    START_URL_FIELD_NUMBER: _ClassVar[int]
    MAX_PAGES_FIELD_NUMBER: _ClassVar[int]
    sitemap_url: str
    start_url: str
    max_pages: int
    def __init__(self, sitemap_url: _Optional[str] = ..., start_url: _Optional[str] = ..., max_pages: _Optional[int] = ...) -> None: ...

class GitSource(_message.Message):
    __slots__ = ("repository", "ref", "subpath")
    REPOSITORY_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SUBPATH_FIELD_NUMBER: _ClassVar[int]
    repository: str
    ref: str
    subpath: str
    def __init__(self, repository: _Optional[str] = ..., ref: _Optional[str] = ..., subpath: _Optional[str] = ...) -> None: ...

class Source(_message.Message):
    __slots__ = ("name", "id", "collection", "display_name", "kind", "local_folder", "s3", "http", "git", "schedule_interval_seconds", "max_delete_share", "create_time", "last_run", "next_sync_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FOLDER_FIELD_NUMBER: _ClassVar[int]
    S3_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    GIT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_DELETE_SHARE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_FIELD_NUMBER: _ClassVar[int]
    NEXT_SYNC_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    collection: str
    display_name: str
    kind: SourceKind
    local_folder: LocalFolderSource
    s3: S3Source
    http: HttpSource
    git: GitSource
    schedule_interval_seconds: int
    max_delete_share: float
    create_time: _timestamp_pb2.Timestamp
    last_run: SourceRun
    next_sync_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., collection: _Optional[str] = ..., display_name: _Optional[str] = ..., kind: _Optional[_Union[SourceKind, str]] = ..., local_folder: _Optional[_Union[LocalFolderSource, _Mapping]] = ..., s3: _Optional[_Union[S3Source, _Mapping]] = ..., http: _Optional[_Union[HttpSource, _Mapping]] = ..., git: _Optional[_Union[GitSource, _Mapping]] = ..., schedule_interval_seconds: _Optional[int] = ..., max_delete_share: _Optional[float] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_run: _Optional[_Union[SourceRun, _Mapping]] = ..., next_sync_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SourceRun(_message.Message):
    __slots__ = ("name", "id", "state", "allow_mass_delete", "listed", "uploaded", "unchanged", "deleted", "failed", "error_message", "attempts", "create_time", "start_time", "end_time", "would_delete", "scheduled")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ALLOW_MASS_DELETE_FIELD_NUMBER: _ClassVar[int]
    LISTED_FIELD_NUMBER: _ClassVar[int]
    UPLOADED_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    WOULD_DELETE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    state: SourceRunState
    allow_mass_delete: bool
    listed: int
    uploaded: int
    unchanged: int
    deleted: int
    failed: int
    error_message: str
    attempts: int
    create_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    would_delete: int
    scheduled: bool
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., state: _Optional[_Union[SourceRunState, str]] = ..., allow_mass_delete: _Optional[bool] = ..., listed: _Optional[int] = ..., uploaded: _Optional[int] = ..., unchanged: _Optional[int] = ..., deleted: _Optional[int] = ..., failed: _Optional[int] = ..., error_message: _Optional[str] = ..., attempts: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., would_delete: _Optional[int] = ..., scheduled: _Optional[bool] = ...) -> None: ...

class CreateSourceRequest(_message.Message):
    __slots__ = ("source",)
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    source: Source
    def __init__(self, source: _Optional[_Union[Source, _Mapping]] = ...) -> None: ...

class GetSourceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListSourcesRequest(_message.Message):
    __slots__ = ("collection", "page_size", "page_token")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    collection: str
    page_size: int
    page_token: str
    def __init__(self, collection: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSourcesResponse(_message.Message):
    __slots__ = ("sources", "next_page_token")
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[Source]
    next_page_token: str
    def __init__(self, sources: _Optional[_Iterable[_Union[Source, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteSourceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteSourceResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SyncSourceRequest(_message.Message):
    __slots__ = ("name", "allow_mass_delete")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALLOW_MASS_DELETE_FIELD_NUMBER: _ClassVar[int]
    name: str
    allow_mass_delete: bool
    def __init__(self, name: _Optional[str] = ..., allow_mass_delete: _Optional[bool] = ...) -> None: ...

class ListSourceRunsRequest(_message.Message):
    __slots__ = ("name", "page_size", "page_token")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    page_size: int
    page_token: str
    def __init__(self, name: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSourceRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[SourceRun]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[SourceRun, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
