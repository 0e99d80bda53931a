"""Who may call what: API keys, principals, the access table and the one server interceptor.

A key is `slk_<id>_<secret>`: a 12-character public id (shown in listings, used for lookup)
and a 256-bit random secret, shown once at creation. The database keeps only the SHA-256 of
the secret; the comparison is constant-time. Keys travel as `authorization: Bearer <key>`.

`AuthInterceptor` runs in front of every method of ingest-api and search. It authenticates
the key (a lookup cached for `cache_seconds`, so a revoked key is refused by every process
within that time), checks the role against `METHOD_ROLES`, applies the per-key rate limit,
and makes the caller's `Principal` available to the servicer through `current_principal()`.
Health checks (for probes) and reflection (unless turned off) stay open. It also answers a
message that cannot be decoded (invalid UTF-8 in a string field) with INVALID_ARGUMENT
instead of gRPC's INTERNAL and a traceback.
"""

from __future__ import annotations

import contextvars
import enum
import hashlib
import hmac
import logging
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import grpc
from psycopg_pool import AsyncConnectionPool

from .errors import (
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RateLimited,
    SluiceError,
    Unauthenticated,
    status_of_unexpected,
    to_grpc_status,
)
from .reasons import Reason

log = logging.getLogger("sluice.auth")

KEY_PREFIX = "slk_"
_KEY = re.compile(r"^slk_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$")
_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
TENANT_HEADER = "x-sluice-tenant"
OPEN_SERVICES = frozenset(
    {"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"}
)
REFLECTION_SERVICES = frozenset({"grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"})


class Role(enum.StrEnum):
    ADMIN = "admin"
    CLIENT = "client"
    READER = "reader"
    WORKER = "worker"


A, C, R, W = Role.ADMIN, Role.CLIENT, Role.READER, Role.WORKER
_WRITE = frozenset({A, C})
_READ = frozenset({A, C, R})

# The access table: every RPC of every service, and the roles that may call it. A method that
# is missing here is refused (tests/auth checks that every RPC of the protos is listed).
METHOD_ROLES: dict[str, frozenset[Role]] = {
    "/sluice.v1.DocumentService/CreateCollection": _WRITE,
    "/sluice.v1.DocumentService/GetCollection": _READ,
    "/sluice.v1.DocumentService/ListCollections": _READ,
    "/sluice.v1.DocumentService/DeleteCollection": _WRITE,
    "/sluice.v1.DocumentService/ReindexCollection": _WRITE,
    "/sluice.v1.DocumentService/CancelReindex": _WRITE,
    "/sluice.v1.DocumentService/UploadDocument": _WRITE,
    "/sluice.v1.DocumentService/GetDocument": _READ,
    "/sluice.v1.DocumentService/ListDocuments": _READ,
    "/sluice.v1.DocumentService/DeleteDocument": _WRITE,
    "/sluice.v1.DocumentService/RetryDocument": _WRITE,
    "/sluice.v1.DocumentService/ReprocessDocument": _WRITE,
    "/sluice.v1.DocumentService/WatchDocument": _READ,
    "/sluice.v1.DocumentService/WatchCollection": _READ,
    "/sluice.v1.SearchService/Search": _READ,
    # Only a worker holding a lease can put chunks into the index (DESIGN §7).
    "/sluice.v1.JobService/ClaimJob": frozenset({W}),
    "/sluice.v1.JobService/RenewLease": frozenset({W}),
    "/sluice.v1.JobService/ReportStage": frozenset({W}),
    "/sluice.v1.JobService/ReadDocumentContent": frozenset({W}),
    "/sluice.v1.JobService/SaveSnapshot": frozenset({W}),
    "/sluice.v1.JobService/ReadSnapshot": frozenset({W}),
    "/sluice.v1.JobService/CompleteJob": frozenset({W}),
    "/sluice.v1.JobService/FailJob": frozenset({W}),
    "/sluice.v1.JobService/ReleaseJob": frozenset({W}),
    "/sluice.v1.WebhookService/CreateWebhook": _WRITE,
    "/sluice.v1.WebhookService/ListWebhooks": _READ,
    "/sluice.v1.WebhookService/GetWebhook": _READ,
    "/sluice.v1.WebhookService/DeleteWebhook": _WRITE,
    "/sluice.v1.WebhookService/ListWebhookDeliveries": _READ,
    "/sluice.v1.WebhookService/RotateWebhookSecret": _WRITE,
    "/sluice.v1.AdminService/CreateTenant": frozenset({A}),
    "/sluice.v1.AdminService/ListTenants": frozenset({A}),
    "/sluice.v1.AdminService/CreateApiKey": frozenset({A}),
    "/sluice.v1.AdminService/ListApiKeys": frozenset({A}),
    "/sluice.v1.AdminService/RevokeApiKey": frozenset({A}),
}


@dataclass(frozen=True)
class Principal:
    """The authenticated caller: which key, which role, acting in which tenant."""

    key_id: str
    role: Role
    tenant_id: int
    tenant: str


@dataclass(frozen=True)
class NewKey:
    id: str
    secret: str  # the whole key, slk_<id>_<secret>: shown once, never stored
    secret_sha256: bytes


def generate_key() -> NewKey:
    key_id = "".join(secrets.choice(_ID_ALPHABET) for _ in range(12))
    secret = secrets.token_urlsafe(32)  # 32 random bytes → 43 characters
    return NewKey(key_id, f"{KEY_PREFIX}{key_id}_{secret}", hashlib.sha256(secret.encode()).digest())


def parse_key(value: str) -> tuple[str, str] | None:
    """(id, secret) of a well-formed key, else None."""
    match = _KEY.match(value.strip())
    return (match.group(1), match.group(2)) if match else None


def key_id_of(value: str) -> str:
    """The id from a whole key, its prefix `slk_<id>_` or the bare id."""
    value = value.strip()
    if value.startswith(KEY_PREFIX):
        value = value[len(KEY_PREFIX) :]
    return value.split("_", 1)[0]


def prefix_of(key_id: str) -> str:
    return f"{KEY_PREFIX}{key_id}_"


_current: contextvars.ContextVar[Principal] = contextvars.ContextVar("sluice_principal")


def current_principal() -> Principal:
    """The caller of the RPC being served (set by AuthInterceptor before the servicer runs)."""
    try:
        return _current.get()
    except LookupError:  # pragma: no cover - a servicer outside the interceptor is a wiring bug
        raise Unauthenticated("the call was not authenticated", reason=Reason.API_KEY_MISSING) from None


# ---------------------------------------------------------------- key lookup


@dataclass(frozen=True)
class _KeyRecord:
    tenant_id: int
    tenant: str
    role: Role
    secret_sha256: bytes
    revoked: bool


_DUMMY_HASH = hashlib.sha256(b"no such key").digest()


class KeyDirectory:
    """Looks keys up in PostgreSQL, caching each answer for `cache_seconds` (≤ 1 s, so a
    revocation reaches every process within a second without a listener of its own)."""

    def __init__(self, pool: AsyncConnectionPool, *, cache_seconds: float = 0.5, max_entries: int = 100_000) -> None:
        self._pool = pool
        self._ttl = cache_seconds
        self._max = max_entries
        self._keys: dict[str, tuple[float, _KeyRecord | None]] = {}
        self._tenants: dict[str, tuple[float, int | None]] = {}
        # Whole keys verified within the TTL, so a hot key costs one dict lookup per call.
        self._verified: dict[str, tuple[float, Principal]] = {}

    async def authenticate(self, key: str) -> Principal:
        now = time.monotonic()
        verified = self._verified.get(key)
        if verified is not None and verified[0] > now:
            return verified[1]
        principal = await self._authenticate(key)
        if len(self._verified) >= self._max:
            self._verified.clear()
        self._verified[key] = (self._keys[principal.key_id][0], principal)  # expires with its record
        return principal

    async def _authenticate(self, key: str) -> Principal:
        parsed = parse_key(key)
        if parsed is None:
            raise Unauthenticated("the API key is malformed; keys look like slk_<id>_<secret>", reason=Reason.API_KEY_INVALID)
        key_id, secret = parsed
        record = await self._record(key_id)
        presented = hashlib.sha256(secret.encode()).digest()
        matches = hmac.compare_digest(presented, record.secret_sha256 if record else _DUMMY_HASH)
        if record is None or not matches or record.revoked:
            raise Unauthenticated("the API key is not valid (unknown or revoked)", reason=Reason.API_KEY_INVALID)
        return Principal(key_id, record.role, record.tenant_id, record.tenant)

    async def tenant_id(self, name: str) -> int:
        now = time.monotonic()
        cached = self._tenants.get(name)
        if cached is None or cached[0] <= now:
            async with self._pool.connection() as conn:
                row = await (await conn.execute("SELECT id FROM tenants WHERE name = %s", (name,))).fetchone()
            if len(self._tenants) >= self._max:
                self._tenants.clear()
            cached = (now + self._ttl, row[0] if row else None)
            self._tenants[name] = cached
        if cached[1] is None:
            raise NotFound(f"tenant {name[:64]!r} does not exist", reason=Reason.TENANT_NOT_FOUND)
        return cached[1]

    def forget(self, key_id: str) -> None:
        """Drop a key from this process's cache at once (after a revocation here)."""
        self._keys.pop(key_id, None)
        for key in [k for k in self._verified if k.startswith(prefix_of(key_id))]:
            del self._verified[key]

    async def _record(self, key_id: str) -> _KeyRecord | None:
        now = time.monotonic()
        cached = self._keys.get(key_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        async with self._pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT k.tenant_id, t.name, k.role::text, k.secret_sha256, k.revoked_at IS NOT NULL"
                    " FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.id = %s",
                    (key_id,),
                )
            ).fetchone()
        record = _KeyRecord(row[0], row[1], Role(row[2]), bytes(row[3]), row[4]) if row else None
        if len(self._keys) >= self._max:
            self._keys.clear()
        self._keys[key_id] = (now + self._ttl, record)
        return record


# ---------------------------------------------------------------- rate limit


class RateLimiter:
    """A token bucket per key, in this process: `rate` calls a second, bursts of `burst`.

    Per process by design (no shared state to slow every call down): N replicas of a service
    admit up to N × rate calls a second of one key in all.
    """

    def __init__(self, rate: float, burst: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def take(self, key_id: str) -> float:
        """0 when the call may go ahead; otherwise the seconds until a token is free."""
        if not self.enabled:
            return 0.0
        now = self._clock()
        tokens, last = self._buckets.get(key_id, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        if tokens >= 1.0:
            self._buckets[key_id] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key_id] = (tokens, now)
        if len(self._buckets) > 100_000:
            self._buckets.clear()
        return (1.0 - tokens) / self.rate


# ---------------------------------------------------------------- the interceptor


class _Malformed:
    """Stands in for a request message that could not be decoded."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


def _safe_deserializer(deserialize):
    if deserialize is None:
        return None

    def wrapped(data: bytes):
        try:
            return deserialize(data)
        except Exception as exc:  # noqa: BLE001 - DecodeError, invalid UTF-8 in a string field, …
            return _Malformed(exc)

    return wrapped


def _malformed_error() -> InvalidArgument:
    return InvalidArgument(
        "the request message could not be decoded (a string field holds invalid UTF-8, or the message is corrupt)",
        reason=Reason.MALFORMED_REQUEST,
    )


async def _checked_stream(requests):
    async for request in requests:
        if isinstance(request, _Malformed):
            raise _malformed_error()
        yield request


def bearer_key(metadata: Iterable[tuple[str, str | bytes]] | None) -> tuple[str | None, str | None]:
    """(key, tenant header) from call metadata."""
    key = tenant = None
    for name, value in metadata or ():
        if isinstance(value, bytes):
            continue
        if name == "authorization":
            scheme, _, token = value.strip().partition(" ")
            key = token.strip() if scheme.lower() == "bearer" else ""
        elif name == TENANT_HEADER:
            tenant = value.strip()
    return key, tenant


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates and authorizes every call; see the module docstring."""

    def __init__(
        self,
        directory: KeyDirectory,
        limiter: RateLimiter,
        *,
        method_roles: Mapping[str, frozenset[Role]] = METHOD_ROLES,
        reflection: bool = True,
    ) -> None:
        self.directory = directory
        self.limiter = limiter
        self.method_roles = method_roles
        self.open_services = OPEN_SERVICES if reflection else OPEN_SERVICES - REFLECTION_SERVICES
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        service = method.split("/")[1] if method.count("/") == 2 else ""
        if service in REFLECTION_SERVICES and service not in self.open_services:
            return None  # reflection turned off: UNIMPLEMENTED, as if it were never registered
        handler = await continuation(handler_call_details)
        if handler is None or service in self.open_services:
            return handler
        cached = self._wrapped.get(method)
        if cached is None or cached[0] is not handler:
            cached = (handler, self._wrap(handler, method))
            self._wrapped[method] = cached
        return cached[1]

    async def admit(self, method: str, context) -> Principal:
        key, tenant = bearer_key(context.invocation_metadata())
        if not key:
            raise Unauthenticated(
                "this call needs an API key: send `authorization: Bearer <key>` metadata", reason=Reason.API_KEY_MISSING
            )
        principal = await self.directory.authenticate(key)
        allowed = self.method_roles.get(method, frozenset())
        if principal.role not in allowed:
            raise PermissionDenied(
                f"a {principal.role} key may not call {method.rsplit('/', 1)[-1]}", reason=Reason.ROLE_NOT_ALLOWED,
                role=str(principal.role),
            )
        if tenant and tenant != principal.tenant:
            if principal.role != Role.ADMIN:
                raise PermissionDenied("only admin keys may act for another tenant", reason=Reason.TENANT_NOT_ALLOWED)
            principal = Principal(principal.key_id, principal.role, await self.directory.tenant_id(tenant), tenant)
        if principal.role != Role.WORKER:  # the worker fleet is paced by its leases, not by a budget
            wait = self.limiter.take(principal.key_id)
            if wait > 0:
                raise RateLimited(
                    f"too many calls with this API key; retry in {wait:.2f} s", retry_after=wait,
                    limit_per_second=self.limiter.rate,
                )
        return principal

    def _wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        deserializer = _safe_deserializer(handler.request_deserializer)
        serializer = handler.response_serializer

        async def enter(context) -> contextvars.Token | None:
            try:
                return _current.set(await self.admit(method, context))
            except SluiceError as err:
                await context.abort_with_status(to_grpc_status(err))
            except Exception as exc:  # noqa: BLE001 - e.g. the database is down: no traceback to the client
                if type(exc).__name__ in {"AbortError", "UsageError"}:
                    raise
                await context.abort_with_status(status_of_unexpected(exc))
            return None

        async def reject_malformed(request, context) -> None:
            if isinstance(request, _Malformed):
                log.info("malformed request refused", extra={"method": method, "error": type(request.error).__name__})
                await context.abort_with_status(to_grpc_status(_malformed_error()))

        if handler.unary_unary:
            inner = handler.unary_unary

            async def unary_unary(request, context):
                token = await enter(context)
                try:
                    await reject_malformed(request, context)
                    return await inner(request, context)
                finally:
                    _current.reset(token)

            return grpc.unary_unary_rpc_method_handler(unary_unary, deserializer, serializer)
        if handler.unary_stream:
            inner_us = handler.unary_stream

            async def unary_stream(request, context):
                token = await enter(context)
                try:
                    await reject_malformed(request, context)
                    async for response in inner_us(request, context):
                        yield response
                finally:
                    _current.reset(token)

            return grpc.unary_stream_rpc_method_handler(unary_stream, deserializer, serializer)
        if handler.stream_unary:
            inner_su = handler.stream_unary

            async def stream_unary(requests, context):
                token = await enter(context)
                try:
                    return await inner_su(_checked_stream(requests), context)
                finally:
                    _current.reset(token)

            return grpc.stream_unary_rpc_method_handler(stream_unary, deserializer, serializer)
        inner_ss = handler.stream_stream

        async def stream_stream(requests, context):
            token = await enter(context)
            try:
                async for response in inner_ss(_checked_stream(requests), context):
                    yield response
            finally:
                _current.reset(token)

        return grpc.stream_stream_rpc_method_handler(stream_stream, deserializer, serializer)


__all__ = [
    "METHOD_ROLES",
    "AuthInterceptor",
    "KeyDirectory",
    "NewKey",
    "Principal",
    "RateLimiter",
    "Role",
    "current_principal",
    "generate_key",
    "key_id_of",
    "parse_key",
    "prefix_of",
]
