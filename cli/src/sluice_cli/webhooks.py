"""`sluice webhooks …`: subscribe URLs to a collection's document events, and its sources' sync-run
events when named (docs/webhooks.md)."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table
from sluice_client import Client
from sluice_client.protos import webhook_service_pb2 as wh
from sluice_client.types import WEBHOOK_EVENT_TYPES as EVENT_TYPES
from sluice_client.types import webhook_event_name as _wire_name
from sluice_common.reasons import Reason

from . import render
from .errors import EXIT_OK, EXIT_USAGE, CliError


def event_types(text: str | None) -> list[str]:
    if not text:
        return []
    chosen = []
    for name in (part.strip() for part in text.split(",") if part.strip()):
        if name not in EVENT_TYPES:
            raise CliError(
                f"unknown event type {name!r}; choose from {', '.join(EVENT_TYPES)}", EXIT_USAGE, Reason.INVALID_EVENT_TYPE
            )
        chosen.append(name)
    return chosen


def _state(value: wh.WebhookState.ValueType) -> str:
    name: str = wh.WebhookState.Name(value)
    return name.removeprefix("WEBHOOK_STATE_").lower()


def _delivery_state(value: wh.WebhookDeliveryState.ValueType) -> str:
    name: str = wh.WebhookDeliveryState.Name(value)
    return name.removeprefix("WEBHOOK_DELIVERY_STATE_").lower()


def add(client: Client, args: argparse.Namespace) -> int:
    response = client.webhooks.create(
        args.collection, args.url, event_types=event_types(args.events), description=args.description or ""
    )
    if args.json:
        render.print_json({"webhook": render.to_dict(response.webhook.raw), "secret": response.secret})
        return EXIT_OK
    w = response.webhook.raw
    render.out.print(
        f"Created webhook [bold]{w.id}[/] on collection {escape(w.collection)} → {escape(w.url)} "
        f"({', '.join(_wire_name(t) for t in w.event_types)}). Its signing secret is shown this once:"
    )
    render.out.print(response.secret, markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK


def ls(client: Client, args: argparse.Namespace) -> int:
    webhooks = [w.raw for w in client.webhooks.list(args.collection or None)]
    if args.json:
        render.print_json({"webhooks": [render.to_dict(w) for w in webhooks]})
        return EXIT_OK
    table = Table(box=None, header_style="bold")
    for column in ("ID", "COLLECTION", "URL", "EVENTS", "STATE", "PENDING", "FAILED"):
        table.add_column(column)
    for w in webhooks:
        state = _state(w.state) + (f" ({escape(w.disabled_reason)})" if w.disabled_reason else "")
        table.add_row(
            w.id,
            escape(w.collection),
            escape(w.url),
            ", ".join(_wire_name(t) for t in w.event_types),
            state,
            str(w.pending_deliveries),
            str(w.failed_deliveries),
        )
    render.out.print(table)
    return EXIT_OK


def rm(client: Client, args: argparse.Namespace) -> int:
    dropped = client.webhooks.delete(args.id)
    if args.json:
        render.print_json({"deleted": args.id, "dropped_pending_deliveries": str(dropped)})  # int64 as in the contract's JSON
    else:
        render.out.print(f"Deleted webhook {args.id}" + (f"; {dropped} pending deliveries dropped." if dropped else "."))
    return EXIT_OK


def deliveries(client: Client, args: argparse.Namespace) -> int:
    rows = [d.raw for d in client.webhooks.deliveries(args.id, failed=args.failed, limit=args.limit)]
    if args.json:
        render.print_json({"deliveries": [render.to_dict(d) for d in rows]})
        return EXIT_OK
    table = Table(box=None, header_style="bold")
    for column in ("EVENT TIME", "TYPE", "DOCUMENT OR RUN", "STATE", "ATTEMPTS", "LAST", "NEXT ATTEMPT"):
        table.add_column(column)
    for d in rows:
        last = escape(d.last_error[:80]) if d.last_error else (f"HTTP {d.last_status_code}" if d.last_status_code else "")
        table.add_row(
            render.timestamp(d.event_time),
            d.event_type,
            d.document_id or d.source_run_id,
            _delivery_state(d.state),
            str(d.attempts),
            last,
            render.timestamp(d.next_attempt_time) if d.HasField("next_attempt_time") else "",
        )
    render.out.print(table)
    return EXIT_OK
