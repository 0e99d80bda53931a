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
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_VECTOR: SearchMode
SEARCH_MODE_KEYWORD: SearchMode
SEARCH_MODE_HYBRID: SearchMode

class SearchFilter(_message.Message):
    __slots__ = ("metadata", "filenames", "mime_types", "document_ids")
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
    metadata: _containers.ScalarMap[str, str]
    filenames: _containers.RepeatedScalarFieldContainer[str]
    mime_types: _containers.RepeatedScalarFieldContainer[str]
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, metadata: _Optional[_Mapping[str, str]] = ..., filenames: _Optional[_Iterable[str]] = ..., mime_types: _Optional[_Iterable[str]] = ..., document_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("collection", "query", "query_vector", "top_k", "mode", "filter")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    collection: str
    query: str
    query_vector: _containers.RepeatedScalarFieldContainer[float]
    top_k: int
    mode: SearchMode
    filter: SearchFilter
    def __init__(self, collection: _Optional[str] = ..., query: _Optional[str] = ..., query_vector: _Optional[_Iterable[float]] = ..., top_k: _Optional[int] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., filter: _Optional[_Union[SearchFilter, _Mapping]] = ...) -> None: ...

class Highlight(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("chunk_id", "text", "score", "document_id", "filename", "chunk_index", "page_number", "element_type", "highlights", "metadata", "text_as_html", "text_source", "ocr_confidence")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
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
    def __init__(self, chunk_id: _Optional[str] = ..., text: _Optional[str] = ..., score: _Optional[float] = ..., document_id: _Optional[str] = ..., filename: _Optional[str] = ..., chunk_index: _Optional[int] = ..., page_number: _Optional[int] = ..., element_type: _Optional[str] = ..., highlights: _Optional[_Iterable[_Union[Highlight, _Mapping]]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., text_as_html: _Optional[str] = ..., text_source: _Optional[str] = ..., ocr_confidence: _Optional[float] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "mode", "generation", "embedder_model")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_MODEL_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    mode: SearchMode
    generation: int
    embedder_model: str
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., generation: _Optional[int] = ..., embedder_model: _Optional[str] = ...) -> None: ...
