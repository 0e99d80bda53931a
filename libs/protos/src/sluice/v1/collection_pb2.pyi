import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EmbedderProvider(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EMBEDDER_PROVIDER_UNSPECIFIED: _ClassVar[EmbedderProvider]
    EMBEDDER_PROVIDER_HASHING: _ClassVar[EmbedderProvider]
    EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS: _ClassVar[EmbedderProvider]
    EMBEDDER_PROVIDER_OPENAI: _ClassVar[EmbedderProvider]
EMBEDDER_PROVIDER_UNSPECIFIED: EmbedderProvider
EMBEDDER_PROVIDER_HASHING: EmbedderProvider
EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS: EmbedderProvider
EMBEDDER_PROVIDER_OPENAI: EmbedderProvider

class EmbedderConfig(_message.Message):
    __slots__ = ("provider", "model", "dimensions")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    provider: EmbedderProvider
    model: str
    dimensions: int
    def __init__(self, provider: _Optional[_Union[EmbedderProvider, str]] = ..., model: _Optional[str] = ..., dimensions: _Optional[int] = ...) -> None: ...

class ChunkingConfig(_message.Message):
    __slots__ = ("max_characters", "new_after_n_chars", "overlap")
    MAX_CHARACTERS_FIELD_NUMBER: _ClassVar[int]
    NEW_AFTER_N_CHARS_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    max_characters: int
    new_after_n_chars: int
    overlap: int
    def __init__(self, max_characters: _Optional[int] = ..., new_after_n_chars: _Optional[int] = ..., overlap: _Optional[int] = ...) -> None: ...

class Collection(_message.Message):
    __slots__ = ("name", "description", "embedder", "chunking", "document_count", "ready_document_count", "create_time", "max_attempts")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    CHUNKING_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    READY_DOCUMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    embedder: EmbedderConfig
    chunking: ChunkingConfig
    document_count: int
    ready_document_count: int
    create_time: _timestamp_pb2.Timestamp
    max_attempts: int
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., embedder: _Optional[_Union[EmbedderConfig, _Mapping]] = ..., chunking: _Optional[_Union[ChunkingConfig, _Mapping]] = ..., document_count: _Optional[int] = ..., ready_document_count: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_attempts: _Optional[int] = ...) -> None: ...
