"""`sluice webhooks …`: subscribe URLs to a collection's document events (docs/webhooks.md)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from sluice.v1 import webhook_service_pb2 as wh
from sluice_common.reasons import Reason

from . import render
from .client import Clients
from .errors import EXIT_OK, EXIT_USAGE, CliError


def _wire_name(value: int) -> str:
    """WEBHOOK_EVENT_TYPE_DOCUMENT_READY → document.ready (the payload's `type`)."""
    kind, _, what = wh.WebhookEventType.Name(value).removeprefix("WEBHOOK_EVENT_TYPE_").lower().partition("_")
    return f"{kind}.{what}"


EVENT_TYPES = {_wire_name(v): v for v in wh.WebhookEventType.values() if v != wh.WEBHOOK_EVENT_TYPE_UNSPECIFIED}


def event_types(text: str | None) -> list[int]:
    if not text:
        return []
    chosen = []
    for name in (part.strip() for part in text.split(",") if part.strip()):
        if name not in EVENT_TYPES:
            raise CliError(f"unknown event type {name!r}; choose from {', '.join(EVENT_TYPES)}", EXIT_USAGE,
                           Reason.INVALID_EVENT_TYPE)
        chosen.append(EVENT_TYPES[name])
    return chosen


def _state(value: int) -> str:
    return wh.WebhookState.Name(value).removeprefix("WEBHOOK_STATE_").lower()


def _delivery_state(value: int) -> str:
    return wh.WebhookDeliveryState.Name(value).removeprefix("WEBHOOK_DELIVERY_STATE_").lower()


def add(clients: Clients, args) -> int:
    webhook = wh.Webhook(collection=args.collection, url=args.url, event_types=event_types(args.events),
                         description=args.description or "")
    response = clients.call(clients.webhooks.CreateWebhook, wh.CreateWebhookRequest(webhook=webhook))
    if args.json:
        render.print_json({"webhook": render.to_dict(response.webhook), "secret": response.secret})
        return EXIT_OK
    w = response.webhook
    render.out.print(f"Created webhook [bold]{w.id}[/] on collection {escape(w.collection)} → {escape(w.url)} "
                     f"({', '.join(_wire_name(t) for t in w.event_types)}). Its signing secret is shown this once:")
    render.out.print(response.secret, markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK


def ls(clients: Clients, args) -> int:
    webhooks, token = [], ""
    while True:
        page = clients.call(clients.webhooks.ListWebhooks,
                            wh.ListWebhooksRequest(collection=args.collection or "", page_size=200, page_token=token))
        webhooks.extend(page.webhooks)
        token = page.next_page_token
        if not token:
            break
    if args.json:
        render.print_json({"webhooks": [render.to_dict(w) for w in webhooks]})
        return EXIT_OK
    table = Table(box=None, header_style="bold")
    for column in ("ID", "COLLECTION", "URL", "EVENTS", "STATE", "PENDING", "FAILED"):
        table.add_column(column)
    for w in webhooks:
        state = _state(w.state) + (f" ({escape(w.disabled_reason)})" if w.disabled_reason else "")
        table.add_row(w.id, escape(w.collection), escape(w.url), ", ".join(_wire_name(t) for t in w.event_types),
                      state, str(w.pending_deliveries), str(w.failed_deliveries))
    render.out.print(table)
    return EXIT_OK


def rm(clients: Clients, args) -> int:
    response = clients.call(clients.webhooks.DeleteWebhook, wh.DeleteWebhookRequest(id=args.id))
    if args.json:
        render.print_json({"deleted": args.id, **render.to_dict(response)})
    else:
        dropped = response.dropped_pending_deliveries
        render.out.print(f"Deleted webhook {args.id}" + (f"; {dropped} pending deliveries dropped." if dropped else "."))
    return EXIT_OK


def deliveries(clients: Clients, args) -> int:
    state = wh.WEBHOOK_DELIVERY_STATE_FAILED if args.failed else wh.WEBHOOK_DELIVERY_STATE_UNSPECIFIED
    rows, token = [], ""
    while len(rows) < args.limit:
        page = clients.call(clients.webhooks.ListWebhookDeliveries, wh.ListWebhookDeliveriesRequest(
            webhook_id=args.id, state=state, page_size=min(args.limit - len(rows), 1000), page_token=token))
        rows.extend(page.deliveries)
        token = page.next_page_token
        if not token:
            break
    if args.json:
        render.print_json({"deliveries": [render.to_dict(d) for d in rows]})
        return EXIT_OK
    table = Table(box=None, header_style="bold")
    for column in ("EVENT TIME", "TYPE", "DOCUMENT", "STATE", "ATTEMPTS", "LAST", "NEXT ATTEMPT"):
        table.add_column(column)
    for d in rows:
        last = escape(d.last_error[:80]) if d.last_error else (f"HTTP {d.last_status_code}" if d.last_status_code else "")
        table.add_row(render.timestamp(d.event_time), d.event_type, d.document_id, _delivery_state(d.state),
                      str(d.attempts), last, render.timestamp(d.next_attempt_time) if d.HasField("next_attempt_time") else "")
    render.out.print(table)
    return EXIT_OK
