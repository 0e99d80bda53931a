"""The states of a webhook subscription and of one delivery (docs/webhooks.md), as migration 0012
constrains them. No IO."""

from __future__ import annotations

from ..domain import StateEnum


class SubscriptionState(StateEnum):
    ACTIVE = "ACTIVE", "the dispatcher follows the collection's events log and delivers them"
    DISABLED = "DISABLED", "the receiver said 410 Gone: nothing more is delivered, its pending deliveries failed"


class DeliveryState(StateEnum):
    PENDING = "PENDING", "waiting for its first attempt or a retry"
    DELIVERED = "DELIVERED", "the receiver answered 2xx"
    FAILED = "FAILED", "the attempts ran out, the receiver refused it for good, or its subscription was disabled"


__all__ = ["DeliveryState", "SubscriptionState"]
