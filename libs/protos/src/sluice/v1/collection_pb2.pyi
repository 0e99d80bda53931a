import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EmbedderProvider(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EMBEDDER_PROVIDER_UNSPECIFIED: _ClassVar[EmbedderProvider]
    EMBEDDER_PROVIDER_HASHING: _ClassVar[EmbedderProvider]
    EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS: _ClassVar[EmbedderProvider]
    EMBEDDER_PROVIDER_OPENAI: _ClassVar[EmbedderProvider]

class GenerationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GENERATION_STATE_UNSPECIFIED: _ClassVar[GenerationState]
    GENERATION_STATE_BUILDING: _ClassVar[GenerationState]
    GENERATION_STATE_ACTIVE: _ClassVar[GenerationState]
    GENERATION_STATE_RETIRED: _ClassVar[GenerationState]
    GENERATION_STATE_CANCELLED: _ClassVar[GenerationState]

class VectorPrecision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VECTOR_PRECISION_UNSPECIFIED: _ClassVar[VectorPrecision]
    VECTOR_PRECISION_FLOAT4: _ClassVar[VectorPrecision]
    VECTOR_PRECISION_HALFVEC: _ClassVar[VectorPrecision]
    VECTOR_PRECISION_BINARY: _ClassVar[VectorPrecision]

class EvaluationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVALUATION_STATE_UNSPECIFIED: _ClassVar[EvaluationState]
    EVALUATION_STATE_PENDING: _ClassVar[EvaluationState]
    EVALUATION_STATE_PASSED: _ClassVar[EvaluationState]
    EVALUATION_STATE_FAILED: _ClassVar[EvaluationState]

class RerankerProvider(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RERANKER_PROVIDER_UNSPECIFIED: _ClassVar[RerankerProvider]
    RERANKER_PROVIDER_COHERE: _ClassVar[RerankerProvider]
    RERANKER_PROVIDER_JINA: _ClassVar[RerankerProvider]
    RERANKER_PROVIDER_TEI: _ClassVar[RerankerProvider]
    RERANKER_PROVIDER_CROSS_ENCODER: _ClassVar[RerankerProvider]
EMBEDDER_PROVIDER_UNSPECIFIED: EmbedderProvider
EMBEDDER_PROVIDER_HASHING: EmbedderProvider
EMBEDDER_PROVIDER_SENTENCE_TRANSFORMERS: EmbedderProvider
EMBEDDER_PROVIDER_OPENAI: EmbedderProvider
GENERATION_STATE_UNSPECIFIED: GenerationState
GENERATION_STATE_BUILDING: GenerationState
GENERATION_STATE_ACTIVE: GenerationState
GENERATION_STATE_RETIRED: GenerationState
GENERATION_STATE_CANCELLED: GenerationState
VECTOR_PRECISION_UNSPECIFIED: VectorPrecision
VECTOR_PRECISION_FLOAT4: VectorPrecision
VECTOR_PRECISION_HALFVEC: VectorPrecision
VECTOR_PRECISION_BINARY: VectorPrecision
EVALUATION_STATE_UNSPECIFIED: EvaluationState
EVALUATION_STATE_PENDING: EvaluationState
EVALUATION_STATE_PASSED: EvaluationState
EVALUATION_STATE_FAILED: EvaluationState
RERANKER_PROVIDER_UNSPECIFIED: RerankerProvider
RERANKER_PROVIDER_COHERE: RerankerProvider
RERANKER_PROVIDER_JINA: RerankerProvider
RERANKER_PROVIDER_TEI: RerankerProvider
RERANKER_PROVIDER_CROSS_ENCODER: RerankerProvider

class EmbedderConfig(_message.Message):
    __slots__ = ("provider", "model", "dimensions")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    provider: EmbedderProvider
    model: str
    dimensions: int
    def __init__(self, provider: _Optional[_Union[EmbedderProvider, str]] = ..., model: _Optional[str] = ..., dimensions: _Optional[int] = ...) -> None: ...

class GenerationFailure(_message.Message):
    __slots__ = ("document_id", "filename", "error_code", "error_message")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    filename: str
    error_code: str
    error_message: str
    def __init__(self, document_id: _Optional[str] = ..., filename: _Optional[str] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ...) -> None: ...

class CollectionGeneration(_message.Message):
    __slots__ = ("number", "embedder", "state", "documents_total", "documents_ready", "documents_failed", "documents_pending", "create_time", "activate_time", "end_time", "failures", "evaluation", "vector_precision")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_READY_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FAILED_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_PENDING_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ACTIVATE_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    VECTOR_PRECISION_FIELD_NUMBER: _ClassVar[int]
    number: int
    embedder: EmbedderConfig
    state: GenerationState
    documents_total: int
    documents_ready: int
    documents_failed: int
    documents_pending: int
    create_time: _timestamp_pb2.Timestamp
    activate_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    failures: _containers.RepeatedCompositeFieldContainer[GenerationFailure]
    evaluation: GenerationEvaluation
    vector_precision: VectorPrecision
    def __init__(self, number: _Optional[int] = ..., embedder: _Optional[_Union[EmbedderConfig, _Mapping]] = ..., state: _Optional[_Union[GenerationState, str]] = ..., documents_total: _Optional[int] = ..., documents_ready: _Optional[int] = ..., documents_failed: _Optional[int] = ..., documents_pending: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., activate_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., failures: _Optional[_Iterable[_Union[GenerationFailure, _Mapping]]] = ..., evaluation: _Optional[_Union[GenerationEvaluation, _Mapping]] = ..., vector_precision: _Optional[_Union[VectorPrecision, str]] = ...) -> None: ...

class GenerationEvaluation(_message.Message):
    __slots__ = ("state", "metric", "active_score", "candidate_score", "queries", "min_ratio", "evaluate_time", "active_generation")
    STATE_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_SCORE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_SCORE_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    MIN_RATIO_FIELD_NUMBER: _ClassVar[int]
    EVALUATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_GENERATION_FIELD_NUMBER: _ClassVar[int]
    state: EvaluationState
    metric: str
    active_score: float
    candidate_score: float
    queries: int
    min_ratio: float
    evaluate_time: _timestamp_pb2.Timestamp
    active_generation: int
    def __init__(self, state: _Optional[_Union[EvaluationState, str]] = ..., metric: _Optional[str] = ..., active_score: _Optional[float] = ..., candidate_score: _Optional[float] = ..., queries: _Optional[int] = ..., min_ratio: _Optional[float] = ..., evaluate_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., active_generation: _Optional[int] = ...) -> None: ...

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
    __slots__ = ("name", "description", "embedder", "chunking", "document_count", "ready_document_count", "create_time", "max_attempts", "generations", "reranker", "vector_precision")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    CHUNKING_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    READY_DOCUMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    RERANKER_FIELD_NUMBER: _ClassVar[int]
    VECTOR_PRECISION_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    embedder: EmbedderConfig
    chunking: ChunkingConfig
    document_count: int
    ready_document_count: int
    create_time: _timestamp_pb2.Timestamp
    max_attempts: int
    generations: _containers.RepeatedCompositeFieldContainer[CollectionGeneration]
    reranker: RerankerConfig
    vector_precision: VectorPrecision
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., embedder: _Optional[_Union[EmbedderConfig, _Mapping]] = ..., chunking: _Optional[_Union[ChunkingConfig, _Mapping]] = ..., document_count: _Optional[int] = ..., ready_document_count: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_attempts: _Optional[int] = ..., generations: _Optional[_Iterable[_Union[CollectionGeneration, _Mapping]]] = ..., reranker: _Optional[_Union[RerankerConfig, _Mapping]] = ..., vector_precision: _Optional[_Union[VectorPrecision, str]] = ...) -> None: ...

class RerankerConfig(_message.Message):
    __slots__ = ("provider", "model", "base_url", "api_key_env", "candidates", "timeout_ms")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ENV_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    provider: RerankerProvider
    model: str
    base_url: str
    api_key_env: str
    candidates: int
    timeout_ms: int
    def __init__(self, provider: _Optional[_Union[RerankerProvider, str]] = ..., model: _Optional[str] = ..., base_url: _Optional[str] = ..., api_key_env: _Optional[str] = ..., candidates: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...
