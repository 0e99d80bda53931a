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

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_VECTOR: _ClassVar[SearchMode]
    SEARCH_MODE_KEYWORD: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]

class FilterOperator(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FILTER_OPERATOR_UNSPECIFIED: _ClassVar[FilterOperator]
    FILTER_OPERATOR_EQ: _ClassVar[FilterOperator]
    FILTER_OPERATOR_NE: _ClassVar[FilterOperator]
    FILTER_OPERATOR_IN: _ClassVar[FilterOperator]
    FILTER_OPERATOR_NOT_IN: _ClassVar[FilterOperator]
    FILTER_OPERATOR_GT: _ClassVar[FilterOperator]
    FILTER_OPERATOR_GTE: _ClassVar[FilterOperator]
    FILTER_OPERATOR_LT: _ClassVar[FilterOperator]
    FILTER_OPERATOR_LTE: _ClassVar[FilterOperator]
    FILTER_OPERATOR_EXISTS: _ClassVar[FilterOperator]
    FILTER_OPERATOR_NOT_EXISTS: _ClassVar[FilterOperator]

class RerankStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RERANK_STATUS_UNSPECIFIED: _ClassVar[RerankStatus]
    RERANK_STATUS_APPLIED: _ClassVar[RerankStatus]
    RERANK_STATUS_FAILED: _ClassVar[RerankStatus]
    RERANK_STATUS_TIMED_OUT: _ClassVar[RerankStatus]
    RERANK_STATUS_SKIPPED: _ClassVar[RerankStatus]
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_VECTOR: SearchMode
SEARCH_MODE_KEYWORD: SearchMode
SEARCH_MODE_HYBRID: SearchMode
FILTER_OPERATOR_UNSPECIFIED: FilterOperator
FILTER_OPERATOR_EQ: FilterOperator
FILTER_OPERATOR_NE: FilterOperator
FILTER_OPERATOR_IN: FilterOperator
FILTER_OPERATOR_NOT_IN: FilterOperator
FILTER_OPERATOR_GT: FilterOperator
FILTER_OPERATOR_GTE: FilterOperator
FILTER_OPERATOR_LT: FilterOperator
FILTER_OPERATOR_LTE: FilterOperator
FILTER_OPERATOR_EXISTS: FilterOperator
FILTER_OPERATOR_NOT_EXISTS: FilterOperator
RERANK_STATUS_UNSPECIFIED: RerankStatus
RERANK_STATUS_APPLIED: RerankStatus
RERANK_STATUS_FAILED: RerankStatus
RERANK_STATUS_TIMED_OUT: RerankStatus
RERANK_STATUS_SKIPPED: RerankStatus

class SearchFilter(_message.Message):
    __slots__ = ("metadata", "filenames", "mime_types", "document_ids", "where", "create_time", "update_time")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    METADATA_FIELD_NUMBER: _ClassVar[int]
    FILENAMES_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPES_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    metadata: _containers.ScalarMap[str, str]
    filenames: _containers.RepeatedScalarFieldContainer[str]
    mime_types: _containers.RepeatedScalarFieldContainer[str]
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    where: MetadataFilter
    create_time: TimeRange
    update_time: TimeRange
    def __init__(self, metadata: _Optional[_Mapping[str, str]] = ..., filenames: _Optional[_Iterable[str]] = ..., mime_types: _Optional[_Iterable[str]] = ..., document_ids: _Optional[_Iterable[str]] = ..., where: _Optional[_Union[MetadataFilter, _Mapping]] = ..., create_time: _Optional[_Union[TimeRange, _Mapping]] = ..., update_time: _Optional[_Union[TimeRange, _Mapping]] = ...) -> None: ...

class MetadataCondition(_message.Message):
    __slots__ = ("key", "op", "value", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: str
    op: FilterOperator
    value: _document_pb2.MetadataValue
    values: _containers.RepeatedCompositeFieldContainer[_document_pb2.MetadataValue]
    def __init__(self, key: _Optional[str] = ..., op: _Optional[_Union[FilterOperator, str]] = ..., value: _Optional[_Union[_document_pb2.MetadataValue, _Mapping]] = ..., values: _Optional[_Iterable[_Union[_document_pb2.MetadataValue, _Mapping]]] = ...) -> None: ...

class MetadataFilterList(_message.Message):
    __slots__ = ("filters",)
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[MetadataFilter]
    def __init__(self, filters: _Optional[_Iterable[_Union[MetadataFilter, _Mapping]]] = ...) -> None: ...

class MetadataFilter(_message.Message):
    __slots__ = ("condition", "all_of", "any_of")
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    ALL_OF_FIELD_NUMBER: _ClassVar[int]
    ANY_OF_FIELD_NUMBER: _ClassVar[int]
    condition: MetadataCondition
    all_of: MetadataFilterList
    any_of: MetadataFilterList
    def __init__(self, condition: _Optional[_Union[MetadataCondition, _Mapping]] = ..., all_of: _Optional[_Union[MetadataFilterList, _Mapping]] = ..., any_of: _Optional[_Union[MetadataFilterList, _Mapping]] = ...) -> None: ...

class TimeRange(_message.Message):
    __slots__ = ("start_time", "end_time")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("collection", "query", "query_vector", "top_k", "mode", "filter", "neighbor_chunks", "max_hits_per_document", "min_score", "rerank", "consistency_token")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    NEIGHBOR_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    MAX_HITS_PER_DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_TOKEN_FIELD_NUMBER: _ClassVar[int]
    collection: str
    query: str
    query_vector: _containers.RepeatedScalarFieldContainer[float]
    top_k: int
    mode: SearchMode
    filter: SearchFilter
    neighbor_chunks: int
    max_hits_per_document: int
    min_score: float
    rerank: SearchRerank
    consistency_token: str
    def __init__(self, collection: _Optional[str] = ..., query: _Optional[str] = ..., query_vector: _Optional[_Iterable[float]] = ..., top_k: _Optional[int] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., filter: _Optional[_Union[SearchFilter, _Mapping]] = ..., neighbor_chunks: _Optional[int] = ..., max_hits_per_document: _Optional[int] = ..., min_score: _Optional[float] = ..., rerank: _Optional[_Union[SearchRerank, _Mapping]] = ..., consistency_token: _Optional[str] = ...) -> None: ...

class SearchRerank(_message.Message):
    __slots__ = ("disabled", "reranker", "min_score")
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    RERANKER_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    disabled: bool
    reranker: _collection_pb2.RerankerConfig
    min_score: float
    def __init__(self, disabled: _Optional[bool] = ..., reranker: _Optional[_Union[_collection_pb2.RerankerConfig, _Mapping]] = ..., min_score: _Optional[float] = ...) -> None: ...

class RerankInfo(_message.Message):
    __slots__ = ("status", "message", "provider", "model", "candidates", "elapsed_ms")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    status: RerankStatus
    message: str
    provider: _collection_pb2.RerankerProvider
    model: str
    candidates: int
    elapsed_ms: float
    def __init__(self, status: _Optional[_Union[RerankStatus, str]] = ..., message: _Optional[str] = ..., provider: _Optional[_Union[_collection_pb2.RerankerProvider, str]] = ..., model: _Optional[str] = ..., candidates: _Optional[int] = ..., elapsed_ms: _Optional[float] = ...) -> None: ...

class Highlight(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("chunk_id", "text", "score", "document_id", "filename", "chunk_index", "page_number", "element_type", "highlights", "metadata", "text_as_html", "text_source", "ocr_confidence", "typed_metadata", "context", "context_first_chunk_index", "context_last_chunk_index", "boxes", "first_stage_score", "rerank_score")
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
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    CHUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    PAGE_NUMBER_FIELD_NUMBER: _ClassVar[int]
    ELEMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    HIGHLIGHTS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TEXT_AS_HTML_FIELD_NUMBER: _ClassVar[int]
    TEXT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    OCR_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    TYPED_METADATA_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIRST_CHUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_LAST_CHUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    BOXES_FIELD_NUMBER: _ClassVar[int]
    FIRST_STAGE_SCORE_FIELD_NUMBER: _ClassVar[int]
    RERANK_SCORE_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    text: str
    score: float
    document_id: str
    filename: str
    chunk_index: int
    page_number: int
    element_type: str
    highlights: _containers.RepeatedCompositeFieldContainer[Highlight]
    metadata: _containers.ScalarMap[str, str]
    text_as_html: str
    text_source: str
    ocr_confidence: float
    typed_metadata: _containers.MessageMap[str, _document_pb2.MetadataValue]
    context: str
    context_first_chunk_index: int
    context_last_chunk_index: int
    boxes: _containers.RepeatedCompositeFieldContainer[_document_pb2.BoundingBox]
    first_stage_score: float
    rerank_score: float
    def __init__(self, chunk_id: _Optional[str] = ..., text: _Optional[str] = ..., score: _Optional[float] = ..., document_id: _Optional[str] = ..., filename: _Optional[str] = ..., chunk_index: _Optional[int] = ..., page_number: _Optional[int] = ..., element_type: _Optional[str] = ..., highlights: _Optional[_Iterable[_Union[Highlight, _Mapping]]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., text_as_html: _Optional[str] = ..., text_source: _Optional[str] = ..., ocr_confidence: _Optional[float] = ..., typed_metadata: _Optional[_Mapping[str, _document_pb2.MetadataValue]] = ..., context: _Optional[str] = ..., context_first_chunk_index: _Optional[int] = ..., context_last_chunk_index: _Optional[int] = ..., boxes: _Optional[_Iterable[_Union[_document_pb2.BoundingBox, _Mapping]]] = ..., first_stage_score: _Optional[float] = ..., rerank_score: _Optional[float] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "mode", "generation", "embedder_model", "rerank")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_MODEL_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    mode: SearchMode
    generation: int
    embedder_model: str
    rerank: RerankInfo
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., generation: _Optional[int] = ..., embedder_model: _Optional[str] = ..., rerank: _Optional[_Union[RerankInfo, _Mapping]] = ...) -> None: ...
