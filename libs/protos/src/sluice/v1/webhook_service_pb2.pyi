import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WebhookEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WEBHOOK_EVENT_TYPE_UNSPECIFIED: _ClassVar[WebhookEventType]
    WEBHOOK_EVENT_TYPE_DOCUMENT_READY: _ClassVar[WebhookEventType]
    WEBHOOK_EVENT_TYPE_DOCUMENT_FAILED: _ClassVar[WebhookEventType]
    WEBHOOK_EVENT_TYPE_DOCUMENT_DELETED: _ClassVar[WebhookEventType]
    WEBHOOK_EVENT_TYPE_DOCUMENT_STATUS_CHANGED: _ClassVar[WebhookEventType]
    WEBHOOK_EVENT_TYPE_SOURCE_RUN_STARTED: _ClassVar[WebhookEventType]
    WEBHOOK_EVENT_TYPE_SOURCE_RUN_PROGRESS: _ClassVar[WebhookEventType]
    WEBHOOK_EVENT_TYPE_SOURCE_RUN_FINISHED: _ClassVar[WebhookEventType]

class WebhookState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WEBHOOK_STATE_UNSPECIFIED: _ClassVar[WebhookState]
    WEBHOOK_STATE_ACTIVE: _ClassVar[WebhookState]
    WEBHOOK_STATE_DISABLED: _ClassVar[WebhookState]

class WebhookDeliveryState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WEBHOOK_DELIVERY_STATE_UNSPECIFIED: _ClassVar[WebhookDeliveryState]
    WEBHOOK_DELIVERY_STATE_PENDING: _ClassVar[WebhookDeliveryState]
    WEBHOOK_DELIVERY_STATE_DELIVERED: _ClassVar[WebhookDeliveryState]
    WEBHOOK_DELIVERY_STATE_FAILED: _ClassVar[WebhookDeliveryState]
WEBHOOK_EVENT_TYPE_UNSPECIFIED: WebhookEventType
WEBHOOK_EVENT_TYPE_DOCUMENT_READY: WebhookEventType
WEBHOOK_EVENT_TYPE_DOCUMENT_FAILED: WebhookEventType
WEBHOOK_EVENT_TYPE_DOCUMENT_DELETED: WebhookEventType
WEBHOOK_EVENT_TYPE_DOCUMENT_STATUS_CHANGED: WebhookEventType
WEBHOOK_EVENT_TYPE_SOURCE_RUN_STARTED: WebhookEventType
WEBHOOK_EVENT_TYPE_SOURCE_RUN_PROGRESS: WebhookEventType
WEBHOOK_EVENT_TYPE_SOURCE_RUN_FINISHED: WebhookEventType
WEBHOOK_STATE_UNSPECIFIED: WebhookState
WEBHOOK_STATE_ACTIVE: WebhookState
WEBHOOK_STATE_DISABLED: WebhookState
WEBHOOK_DELIVERY_STATE_UNSPECIFIED: WebhookDeliveryState
WEBHOOK_DELIVERY_STATE_PENDING: WebhookDeliveryState
WEBHOOK_DELIVERY_STATE_DELIVERED: WebhookDeliveryState
WEBHOOK_DELIVERY_STATE_FAILED: WebhookDeliveryState

class Webhook(_message.Message):
    __slots__ = ("id", "collection", "url", "event_types", "description", "state", "disabled_reason", "create_time", "pending_deliveries", "failed_deliveries", "lost_event_gaps")
    ID_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DISABLED_REASON_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    PENDING_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    FAILED_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    LOST_EVENT_GAPS_FIELD_NUMBER: _ClassVar[int]
    id: str
    collection: str
    url: str
    event_types: _containers.RepeatedScalarFieldContainer[WebhookEventType]
    description: str
    state: WebhookState
    disabled_reason: str
    create_time: _timestamp_pb2.Timestamp
    pending_deliveries: int
    failed_deliveries: int
    lost_event_gaps: int
    def __init__(self, id: _Optional[str] = ..., collection: _Optional[str] = ..., url: _Optional[str] = ..., event_types: _Optional[_Iterable[_Union[WebhookEventType, str]]] = ..., description: _Optional[str] = ..., state: _Optional[_Union[WebhookState, str]] = ..., disabled_reason: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending_deliveries: _Optional[int] = ..., failed_deliveries: _Optional[int] = ..., lost_event_gaps: _Optional[int] = ...) -> None: ...

class CreateWebhookRequest(_message.Message):
    __slots__ = ("webhook",)
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    webhook: Webhook
    def __init__(self, webhook: _Optional[_Union[Webhook, _Mapping]] = ...) -> None: ...

class CreateWebhookResponse(_message.Message):
    __slots__ = ("webhook", "secret")
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    webhook: Webhook
    secret: str
    def __init__(self, webhook: _Optional[_Union[Webhook, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListWebhooksRequest(_message.Message):
    __slots__ = ("collection", "page_size", "page_token")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    collection: str
    page_size: int
    page_token: str
    def __init__(self, collection: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWebhooksResponse(_message.Message):
    __slots__ = ("webhooks", "next_page_token")
    WEBHOOKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    webhooks: _containers.RepeatedCompositeFieldContainer[Webhook]
    next_page_token: str
    def __init__(self, webhooks: _Optional[_Iterable[_Union[Webhook, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetWebhookRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteWebhookRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteWebhookResponse(_message.Message):
    __slots__ = ("dropped_pending_deliveries",)
    DROPPED_PENDING_DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    dropped_pending_deliveries: int
    def __init__(self, dropped_pending_deliveries: _Optional[int] = ...) -> None: ...

class RotateWebhookSecretRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class WebhookDelivery(_message.Message):
    __slots__ = ("id", "webhook_id", "event_type", "document_id", "cursor", "state", "attempts", "last_status_code", "last_error", "next_attempt_time", "event_time", "delivered_time", "payload", "source_run_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LAST_STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_TIME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SOURCE_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    webhook_id: str
    event_type: str
    document_id: str
    cursor: str
    state: WebhookDeliveryState
    attempts: int
    last_status_code: int
    last_error: str
    next_attempt_time: _timestamp_pb2.Timestamp
    event_time: _timestamp_pb2.Timestamp
    delivered_time: _timestamp_pb2.Timestamp
    payload: str
    source_run_id: str
    def __init__(self, id: _Optional[str] = ..., webhook_id: _Optional[str] = ..., event_type: _Optional[str] = ..., document_id: _Optional[str] = ..., cursor: _Optional[str] = ..., state: _Optional[_Union[WebhookDeliveryState, str]] = ..., attempts: _Optional[int] = ..., last_status_code: _Optional[int] = ..., last_error: _Optional[str] = ..., next_attempt_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., delivered_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., payload: _Optional[str] = ..., source_run_id: _Optional[str] = ...) -> None: ...

class ListWebhookDeliveriesRequest(_message.Message):
    __slots__ = ("webhook_id", "state", "page_size", "page_token")
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    webhook_id: str
    state: WebhookDeliveryState
    page_size: int
    page_token: str
    def __init__(self, webhook_id: _Optional[str] = ..., state: _Optional[_Union[WebhookDeliveryState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWebhookDeliveriesResponse(_message.Message):
    __slots__ = ("deliveries", "next_page_token")
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    deliveries: _containers.RepeatedCompositeFieldContainer[WebhookDelivery]
    next_page_token: str
    def __init__(self, deliveries: _Optional[_Iterable[_Union[WebhookDelivery, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
