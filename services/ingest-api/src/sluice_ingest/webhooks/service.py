"""Use cases of WebhookService: validate, call the store once, return rows."""

from __future__ import annotations

import datetime as dt
import uuid

from sluice_common.auth.scope import collection_not_found
from sluice_common.errors import InvalidArgument, NotFound
from sluice_common.reasons import Reason

from ..arguments import decode_token, encode_token, page_size_of, parse_id
from ..settings import IngestSettings
from . import guard, signing
from .domain import DeliveryState
from .events import event_types_of
from .store import DeliveryRow, SubscriptionRow, WebhookStore

MAX_DESCRIPTION = 500
DELIVERY_STATES = frozenset(DeliveryState)


class WebhookService:
    def __init__(self, store: WebhookStore, settings: IngestSettings) -> None:
        self.store = store
        self.settings = settings

    async def create(
        self,
        tenant_id: int,
        collection: str,
        url: str,
        event_types: list[str],
        description: str,
        scope: frozenset[str] | None = None,
    ) -> tuple[SubscriptionRow, str]:
        if not collection:
            raise InvalidArgument("webhook.collection is required", reason=Reason.MISSING_COLLECTION)
        if len(description) > MAX_DESCRIPTION:
            raise InvalidArgument(f"description is longer than {MAX_DESCRIPTION} characters", reason=Reason.INVALID_DESCRIPTION)
        types = event_types_of(event_types)
        target = guard.parse_url(url)
        await guard.resolve(target, self.settings.webhook_allow_private_networks, self.settings.webhook_connect_timeout_seconds)
        if scope is not None and collection not in scope:  # as a missing collection (docs/tenancy.md, "Scoped keys")
            raise collection_not_found(collection)
        secret = signing.new_secret()
        row = await self.store.create(
            tenant_id, collection, url, [str(t) for t in types], description, secret, self.settings.webhook_max_per_collection
        )
        return row, secret

    async def require_visible(self, tenant_id: int, webhook_id: str, scope: frozenset[str] | None) -> None:
        """For a scoped key (docs/tenancy.md, "Scoped keys"): a webhook of a collection outside
        `scope` answers NOT_FOUND as a missing one (a read by id, then the check); an unscoped key
        (None) costs no read."""
        if scope is None:
            return
        row = await self.get(tenant_id, webhook_id)
        if row.collection not in scope:
            raise NotFound(f"webhook {row.id} does not exist", reason=Reason.WEBHOOK_NOT_FOUND)

    async def get(self, tenant_id: int, webhook_id: str) -> SubscriptionRow:
        return await self.store.get(tenant_id, parse_id(webhook_id, "webhook"))

    async def list_webhooks(
        self, tenant_id: int, collection: str, page_size: int, page_token: str, scope: list[str] | None = None
    ) -> tuple[list[SubscriptionRow], str]:
        limit = page_size_of(page_size)
        filters = f"webhooks:{collection}"
        token = decode_token(page_token, filters)
        try:
            after = (dt.datetime.fromisoformat(token["t"]), uuid.UUID(token["i"])) if token else None
        except (KeyError, TypeError, ValueError):
            raise InvalidArgument("page_token is not valid", reason=Reason.INVALID_PAGE_TOKEN) from None
        rows = await self.store.list_webhooks(tenant_id, collection or None, after, limit + 1, scope)
        next_token = ""
        if len(rows) > limit:
            last = rows[limit - 1]
            next_token = encode_token({"f": filters, "t": last.created_at.isoformat(), "i": str(last.id)})
        return rows[:limit], next_token

    async def delete(self, tenant_id: int, webhook_id: str) -> int:
        return await self.store.delete(tenant_id, parse_id(webhook_id, "webhook"))

    async def rotate_secret(self, tenant_id: int, webhook_id: str) -> tuple[SubscriptionRow, str]:
        secret = signing.new_secret()
        return await self.store.rotate_secret(tenant_id, parse_id(webhook_id, "webhook"), secret), secret

    async def list_deliveries(
        self, tenant_id: int, webhook_id: str, state: str | None, page_size: int, page_token: str
    ) -> tuple[list[DeliveryRow], str]:
        subscription_id = parse_id(webhook_id, "webhook")
        if state is not None and state not in DELIVERY_STATES:
            raise InvalidArgument(f"unknown delivery state {state!r}", reason=Reason.INVALID_STATUS)
        limit = page_size_of(page_size)
        filters = f"deliveries:{subscription_id}:{state or ''}"
        token = decode_token(page_token, filters)
        try:
            before = int(token["s"]) if token else None
        except (KeyError, TypeError, ValueError):
            raise InvalidArgument("page_token is not valid", reason=Reason.INVALID_PAGE_TOKEN) from None
        rows = await self.store.list_deliveries(tenant_id, subscription_id, state, before, limit + 1)
        next_token = encode_token({"f": filters, "s": rows[limit - 1].seq}) if len(rows) > limit else ""
        return rows[:limit], next_token
