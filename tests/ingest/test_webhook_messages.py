"""A webhook delivery's last_error is client-visible (ListWebhookDeliveries) and is made fit for
the client as a document's and a source run's errors are (issue 21): the dispatcher records a
bug in an attempt as "<exception type>: <its text>", and that text may carry internals."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from sluice_common.worker_errors import internals_in
from sluice_ingest.webhooks.api import delivery_to_proto
from sluice_ingest.webhooks.store import DeliveryRow

NOW = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)


def delivery(last_error: str | None) -> DeliveryRow:
    return DeliveryRow(
        seq=1,
        id=uuid.uuid4(),
        subscription_id=uuid.uuid4(),
        event_id=7,
        event_txid=42,
        document_id=uuid.uuid4(),
        event_type="document.failed",
        payload="{}",
        event_time=NOW,
        state="FAILED",
        attempts=3,
        next_attempt_at=NOW,
        last_status_code=None,
        last_error=last_error,
        delivered_at=None,
    )


@pytest.mark.parametrize(
    "recorded",
    [
        # What dispatcher.deliver records for a bug in an attempt: f"{type(exc).__name__}: {exc}".
        "gave up after 3 attempts: TypeError: cannot pickle '_thread.lock' object <sluice_ingest.webhooks.sender.Sender object at 0x7f3a2c1d9e50>",
        'gave up after 3 attempts: OSError: [Errno 24] Too many open files: "/srv/sluice/.venv/lib/python3.11/site-packages/certifi/cacert.pem"',
    ],
)
def test_a_delivery_error_reaches_the_client_without_server_internals(recorded):
    assert internals_in(recorded), "the scan must see what is wrong with it"
    shown = delivery_to_proto(delivery(recorded)).last_error
    assert internals_in(shown) == [], shown
    assert shown.startswith("gave up after 3 attempts:"), shown


def test_a_clean_delivery_error_is_shown_as_it_is():
    message = "gave up after 3 attempts: the endpoint answered 503"
    assert delivery_to_proto(delivery(message)).last_error == message
    assert delivery_to_proto(delivery(None)).last_error == ""
