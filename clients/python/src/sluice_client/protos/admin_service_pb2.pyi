import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApiKeyRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    API_KEY_ROLE_UNSPECIFIED: _ClassVar[ApiKeyRole]
    API_KEY_ROLE_ADMIN: _ClassVar[ApiKeyRole]
    API_KEY_ROLE_CLIENT: _ClassVar[ApiKeyRole]
    API_KEY_ROLE_READER: _ClassVar[ApiKeyRole]
    API_KEY_ROLE_WORKER: _ClassVar[ApiKeyRole]
API_KEY_ROLE_UNSPECIFIED: ApiKeyRole
API_KEY_ROLE_ADMIN: ApiKeyRole
API_KEY_ROLE_CLIENT: ApiKeyRole
API_KEY_ROLE_READER: ApiKeyRole
API_KEY_ROLE_WORKER: ApiKeyRole

class TenantQuota(_message.Message):
    __slots__ = ("max_documents", "max_stored_bytes", "max_collections")
    MAX_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_STORED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    max_documents: int
    max_stored_bytes: int
    max_collections: int
    def __init__(self, max_documents: _Optional[int] = ..., max_stored_bytes: _Optional[int] = ..., max_collections: _Optional[int] = ...) -> None: ...

class TenantUsage(_message.Message):
    __slots__ = ("documents", "stored_bytes", "collections")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    STORED_BYTES_FIELD_NUMBER: _ClassVar[int]
    COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    documents: int
    stored_bytes: int
    collections: int
    def __init__(self, documents: _Optional[int] = ..., stored_bytes: _Optional[int] = ..., collections: _Optional[int] = ...) -> None: ...

class Tenant(_message.Message):
    __slots__ = ("name", "quota", "usage", "create_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    quota: TenantQuota
    usage: TenantUsage
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., quota: _Optional[_Union[TenantQuota, _Mapping]] = ..., usage: _Optional[_Union[TenantUsage, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateTenantRequest(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class ListTenantsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTenantsResponse(_message.Message):
    __slots__ = ("tenants",)
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    tenants: _containers.RepeatedCompositeFieldContainer[Tenant]
    def __init__(self, tenants: _Optional[_Iterable[_Union[Tenant, _Mapping]]] = ...) -> None: ...

class ApiKey(_message.Message):
    __slots__ = ("id", "prefix", "tenant", "role", "name", "create_time", "revoke_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    prefix: str
    tenant: str
    role: ApiKeyRole
    name: str
    create_time: _timestamp_pb2.Timestamp
    revoke_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., prefix: _Optional[str] = ..., tenant: _Optional[str] = ..., role: _Optional[_Union[ApiKeyRole, str]] = ..., name: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoke_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateApiKeyRequest(_message.Message):
    __slots__ = ("tenant", "role", "name")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    role: ApiKeyRole
    name: str
    def __init__(self, tenant: _Optional[str] = ..., role: _Optional[_Union[ApiKeyRole, str]] = ..., name: _Optional[str] = ...) -> None: ...

class CreateApiKeyResponse(_message.Message):
    __slots__ = ("api_key", "secret")
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    api_key: ApiKey
    secret: str
    def __init__(self, api_key: _Optional[_Union[ApiKey, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListApiKeysRequest(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class ListApiKeysResponse(_message.Message):
    __slots__ = ("api_keys",)
    API_KEYS_FIELD_NUMBER: _ClassVar[int]
    api_keys: _containers.RepeatedCompositeFieldContainer[ApiKey]
    def __init__(self, api_keys: _Optional[_Iterable[_Union[ApiKey, _Mapping]]] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...
