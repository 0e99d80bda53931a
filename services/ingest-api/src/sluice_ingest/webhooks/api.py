"""The WebhookService servicer: convert, call one use case, convert back."""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from sluice.v1 import webhook_service_pb2 as wh
from sluice.v1 import webhook_service_pb2_grpc
from sluice_common.auth import current_principal
from sluice_common.auth.scope import require_visible, scope
from sluice_common.errors import InvalidArgument, grpc_errors
from sluice_common.reasons import Reason
from sluice_common.worker_errors import client_message

from ..api.converters import timestamp
from ..domain import EventCursor
from .events import EventType
from .service import WebhookService
from .store import DeliveryRow, SubscriptionRow

# The proto enum of each event type: WEBHOOK_EVENT_TYPE_<NAME>.
EVENT_TYPE_TO_PROTO = {t: wh.WebhookEventType.Value("WEBHOOK_EVENT_TYPE_" + t.name) for t in EventType}
EVENT_TYPE_FROM_PROTO = {v: k for k, v in EVENT_TYPE_TO_PROTO.items()}


def tenant() -> int:
    return current_principal().tenant_id


def event_types_from_proto(values: Iterable[wh.WebhookEventType.ValueType]) -> list[str]:
    types = []
    for value in values:
        if value not in EVENT_TYPE_FROM_PROTO:
            raise InvalidArgument(f"unknown webhook event type {value}", reason=Reason.INVALID_EVENT_TYPE)
        types.append(str(EVENT_TYPE_FROM_PROTO[value]))
    return types


def delivery_state_from_proto(value: wh.WebhookDeliveryState.ValueType) -> str | None:
    if value == wh.WEBHOOK_DELIVERY_STATE_UNSPECIFIED:
        return None
    try:
        return wh.WebhookDeliveryState.Name(value).removeprefix("WEBHOOK_DELIVERY_STATE_")
    except ValueError:
        raise InvalidArgument(f"unknown delivery state {value}", reason=Reason.INVALID_STATUS) from None


def webhook_to_proto(row: SubscriptionRow) -> wh.Webhook:
    return wh.Webhook(
        id=str(row.id),
        collection=row.collection,
        url=row.url,
        event_types=[EVENT_TYPE_TO_PROTO[EventType(t)] for t in row.event_types],
        description=row.description,
        state=wh.WebhookState.Value("WEBHOOK_STATE_" + row.state),
        disabled_reason=row.disabled_reason or "",
        create_time=timestamp(row.created_at),
        pending_deliveries=row.pending_deliveries,
        failed_deliveries=row.failed_deliveries,
        lost_event_gaps=row.lost_events,
    )


def delivery_to_proto(row: DeliveryRow) -> wh.WebhookDelivery:
    run_event = row.event_type.startswith("source_run.")
    delivery = wh.WebhookDelivery(
        id=str(row.id),
        webhook_id=str(row.subscription_id),
        event_type=row.event_type,
        # A run event's delivery keys by its run (dispatcher._run_delivery): not a document.
        document_id="" if run_event else str(row.document_id),
        source_run_id=str(row.document_id) if run_event else "",
        cursor=EventCursor(row.event_txid, row.event_id).encode(),
        state=wh.WebhookDeliveryState.Value("WEBHOOK_DELIVERY_STATE_" + row.state),
        attempts=row.attempts,
        last_status_code=row.last_status_code or 0,
        # Made client-safe as a document's and a run's errors are: a bug in an attempt is recorded
        # with its exception's text (dispatcher.deliver).
        last_error=client_message(row.last_error) if row.last_error else "",
        event_time=timestamp(row.event_time),
        payload=row.payload,
    )
    if row.state == "PENDING":
        delivery.next_attempt_time.CopyFrom(timestamp(row.next_attempt_at))
    if row.delivered_at is not None:
        delivery.delivered_time.CopyFrom(timestamp(row.delivered_at))
    return delivery


class WebhookServicer(webhook_service_pb2_grpc.WebhookServiceServicer):
    def __init__(self, service: WebhookService) -> None:
        self.service = service

    @grpc_errors
    async def CreateWebhook(
        self, request: wh.CreateWebhookRequest, context: grpc.aio.ServicerContext
    ) -> wh.CreateWebhookResponse:
        w = request.webhook
        row, secret = await self.service.create(
            tenant(), w.collection, w.url, event_types_from_proto(w.event_types), w.description, current_principal().collections
        )
        return wh.CreateWebhookResponse(webhook=webhook_to_proto(row), secret=secret)

    @grpc_errors
    async def ListWebhooks(self, request: wh.ListWebhooksRequest, context: grpc.aio.ServicerContext) -> wh.ListWebhooksResponse:
        require_visible(request.collection)
        rows, token = await self.service.list_webhooks(
            tenant(), request.collection, request.page_size, request.page_token, scope()
        )
        return wh.ListWebhooksResponse(webhooks=[webhook_to_proto(r) for r in rows], next_page_token=token)

    @grpc_errors
    async def GetWebhook(self, request: wh.GetWebhookRequest, context: grpc.aio.ServicerContext) -> wh.Webhook:
        await self.service.require_visible(tenant(), request.id, current_principal().collections)
        return webhook_to_proto(await self.service.get(tenant(), request.id))

    @grpc_errors
    async def DeleteWebhook(
        self, request: wh.DeleteWebhookRequest, context: grpc.aio.ServicerContext
    ) -> wh.DeleteWebhookResponse:
        await self.service.require_visible(tenant(), request.id, current_principal().collections)
        dropped = await self.service.delete(tenant(), request.id)
        return wh.DeleteWebhookResponse(dropped_pending_deliveries=dropped)

    @grpc_errors
    async def ListWebhookDeliveries(
        self, request: wh.ListWebhookDeliveriesRequest, context: grpc.aio.ServicerContext
    ) -> wh.ListWebhookDeliveriesResponse:
        await self.service.require_visible(tenant(), request.webhook_id, current_principal().collections)
        rows, token = await self.service.list_deliveries(
            tenant(), request.webhook_id, delivery_state_from_proto(request.state), request.page_size, request.page_token
        )
        return wh.ListWebhookDeliveriesResponse(deliveries=[delivery_to_proto(r) for r in rows], next_page_token=token)

    @grpc_errors
    async def RotateWebhookSecret(
        self, request: wh.RotateWebhookSecretRequest, context: grpc.aio.ServicerContext
    ) -> wh.CreateWebhookResponse:
        await self.service.require_visible(tenant(), request.id, current_principal().collections)
        row, secret = await self.service.rotate_secret(tenant(), request.id)
        return wh.CreateWebhookResponse(webhook=webhook_to_proto(row), secret=secret)
