"""Webhooks end to end: real PostgreSQL, real gRPC, real HTTP receivers on localhost.

Documents are driven through the real JobService (claim, stages, complete or fail, delete);
the dispatcher reads the events log and POSTs to receivers that fail, answer slowly,
never answer, or refuse, and every request's signature is checked with the verification code
of docs/webhooks.md itself. No wall-clock assertion: the tests assert order and causality and
print the figures (deliveries/s, latency from the event's transaction to receipt).

The dispatcher runs as it is deployed by default: sluice-webhooks' WebhooksApp, apart from
ingest-api (its own event loop, pool and LISTEN connection; `webhooks_factory`); one test runs
it inside ingest-api too (SLUICE_WEBHOOKS_ENABLED=true), and test_webhook_process.py runs the
real `sluice-webhooks` process."""

from __future__ import annotations

import hashlib
import itertools
import re
import statistics
import threading
import time
from pathlib import Path

import auth_keys
import grpc
import psycopg
import pytest
from helpers import wait_for
from sluice.v1 import document_pb2 as D
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import webhook_service_pb2 as wh
from sluice.v1 import webhook_service_pb2_grpc
from sluice_common.channels import keyed_channel
from sluice_common.errors import reason_of
from sluice_ingest.webhooks import signing
from sluice_ingest.webhooks.dispatcher import retry_delay
from sluice_ingest.webhooks.events import EventType, types_of_change

from .helpers import Clients
from .webhook_receiver import Receipt, Receiver, SilentListener, make_certificates, refused_url

ROOT = Path(__file__).resolve().parents[2]

FAST = {
    "webhook_allow_private_networks": True,
    "webhook_retry_base_seconds": 0.05,
    "webhook_retry_max_delay_seconds": 0.2,
    "webhook_max_attempts": 4,
    "webhook_poll_seconds": 0.5,
    "webhook_timeout_seconds": 5.0,
    "webhook_connect_timeout_seconds": 1.0,
    "webhook_lease_seconds": 3.0,
}
ALL = ()  # no event types: every type
TERMINAL = (wh.WEBHOOK_EVENT_TYPE_DOCUMENT_READY, wh.WEBHOOK_EVENT_TYPE_DOCUMENT_FAILED, wh.WEBHOOK_EVENT_TYPE_DOCUMENT_DELETED)
STAGES = ("PENDING", "PARSING", "CHUNKING", "EMBEDDING", "INDEXING")


def docs_verify():
    """The `verify` function of docs/webhooks.md, executed from the document itself."""
    text = (ROOT / "docs" / "webhooks.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block, "docs/webhooks.md has no python example"
    assert len(block.group(1).strip().splitlines()) <= 12
    namespace: dict = {}
    exec(block.group(1), namespace)  # our own documentation
    return namespace["verify"]


VERIFY = docs_verify()


class Api(Clients):
    def __init__(self, address: str, key: str | None = None) -> None:
        super().__init__(address)
        channel = auth_keys.channel(address) if key is None else keyed_channel(address, key)
        self.hooks = webhook_service_pb2_grpc.WebhookServiceStub(channel)

    def add_webhook(self, url: str, types=ALL, collection: str = "docs", description: str = "") -> wh.CreateWebhookResponse:
        return self.hooks.CreateWebhook(
            wh.CreateWebhookRequest(
                webhook=wh.Webhook(collection=collection, url=url, event_types=list(types), description=description)
            )
        )

    def deliveries(self, webhook_id: str, state: int = 0) -> list[wh.WebhookDelivery]:
        out, token = [], ""
        while True:
            page = self.hooks.ListWebhookDeliveries(
                wh.ListWebhookDeliveriesRequest(webhook_id=webhook_id, state=state, page_size=100, page_token=token)
            )
            out.extend(page.deliveries)
            token = page.next_page_token
            if not token:
                return out

    def ready(self, texts=("one chunk",)) -> D.Document:
        """Upload a document and run it to READY through JobService."""
        doc = self.upload()
        job = self.claim()
        assert job is not None and job.document_id == doc.id
        self.run_to_indexing(job)
        self.complete(job, list(texts))
        return doc

    def failed(self) -> D.Document:
        doc = self.upload()
        job = self.claim()
        assert job is not None and job.document_id == doc.id
        self.stage(job, D.DOCUMENT_STATUS_PARSING)
        self.fail(job, retryable=False, code="DOCUMENT_CORRUPT", message="the file is corrupt")
        return doc

    def delete(self, document_id: str) -> None:
        self.docs.DeleteDocument(ds.DeleteDocumentRequest(id=document_id))


def signed_by(secret: str):
    """A receiver check: every request must carry a valid signature of `secret`."""
    bad: list[Receipt] = []

    def check(receipt: Receipt) -> None:
        if not VERIFY(secret, receipt.headers, receipt.body):
            bad.append(receipt)

    return check, bad


def by_document(receipts: list[Receipt]) -> dict[str, list[dict]]:
    """First 2xx receipt of each webhook-id, grouped by document, in order of receipt."""
    seen: set[str] = set()
    out: dict[str, list[dict]] = {}
    for r in receipts:
        if r.webhook_id in seen:
            continue
        seen.add(r.webhook_id)
        out.setdefault(r.payload["data"]["document_id"], []).append(r.payload)
    return out


def latencies(receipts: list[Receipt]) -> list[float]:
    from datetime import datetime

    return [r.received_at - datetime.fromisoformat(r.payload["timestamp"].replace("Z", "+00:00")).timestamp() for r in receipts]


# ---------------------------------------------------------------- pure parts


def test_signature_matches_the_standard_webhooks_reference_vector():
    # The test vector of the Standard Webhooks reference libraries.
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    assert (
        signing.signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)
        == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    )
    headers = signing.headers(secret, "msg_1", int(time.time()), body)
    assert VERIFY(secret, headers, body)
    assert not VERIFY(secret, headers, body + b" ")
    assert not VERIFY(signing.new_secret(), headers, body)
    stale = signing.headers(secret, "msg_1", int(time.time()) - 3600, body)
    assert not VERIFY(secret, stale, body)


def test_event_types_of_a_change():
    assert types_of_change("PENDING", None, False) == [EventType.DOCUMENT_STATUS_CHANGED]
    assert types_of_change("PARSING", "PARSING", False) == []  # progress only
    assert types_of_change("READY", "INDEXING", False) == [EventType.DOCUMENT_STATUS_CHANGED, EventType.DOCUMENT_READY]
    assert types_of_change("FAILED", "PARSING", False) == [EventType.DOCUMENT_STATUS_CHANGED, EventType.DOCUMENT_FAILED]
    assert types_of_change("READY", "READY", True) == [EventType.DOCUMENT_DELETED]


def test_retry_delays_grow_to_about_a_day_in_total():
    import random

    rng = random.Random(7)
    delays = [retry_delay(n, 5.0, 6 * 3600.0, rng) for n in range(1, 10)]  # the 9 waits of 10 attempts
    assert all(b > a for a, b in itertools.pairwise(delays[:6]))
    assert 4 <= delays[0] <= 6 and max(delays) <= 6 * 3600 * 1.2
    assert 14 * 3600 < sum(delays) < 30 * 3600


# ---------------------------------------------------------------- delivery


@pytest.fixture
def delivering(ingest_api_factory, webhooks_factory):
    """`delivering(**settings)`: an ingest-api and, apart from it, a webhook dispatcher, both with
    these settings; returns the ingest-api."""

    def start(**settings):
        server = ingest_api_factory(**settings)
        webhooks_factory(**settings)
        return server

    return start


@pytest.fixture
def api(delivering):
    server = delivering(**FAST)
    client = Api(server.address)
    client.create_collection()
    yield client
    client.close()


def test_every_event_is_delivered_in_order_per_document_signed_despite_failures_and_slowness(api):
    failures_left = {"n": 5}
    lock = threading.Lock()

    def flaky_and_slow(receipt: Receipt, seen: int) -> tuple[int, float]:
        check(receipt)
        with lock:
            if failures_left["n"] > 0:  # the first deliveries fail (500, then 503...)
                failures_left["n"] -= 1
                return 500 + failures_left["n"] % 4, 0.0
        return 200, 0.05 if receipt.payload["data"]["status"] == "READY" else 0.0  # READY answers slowly

    receiver = Receiver(flaky_and_slow)
    terminal_receiver = Receiver()
    try:
        created = api.add_webhook(receiver.url)
        check, bad = signed_by(created.secret)
        terminal = api.add_webhook(terminal_receiver.url, TERMINAL)
        assert created.secret.startswith("whsec_") and created.webhook.state == wh.WEBHOOK_STATE_ACTIVE
        started = time.time()
        ready = [api.ready() for _ in range(12)]
        failed = [api.failed() for _ in range(4)]
        for doc in ready[:4]:
            api.delete(doc.id)
        expected_terminal = len(ready) + len(failed) + 4
        # Per document: PENDING..INDEXING, READY (+ready) for ready ones; PENDING, PARSING, FAILED (+failed); +deleted.
        expected_all = len(ready) * 7 + len(failed) * 4 + 4
        wait_for(lambda: len({r.webhook_id for r in receiver.delivered()}) >= expected_all)
        wait_for(lambda: len({r.webhook_id for r in terminal_receiver.delivered()}) >= expected_terminal)
        elapsed = time.time() - started

        assert bad == [], "a request carried an invalid signature"
        docs = by_document(receiver.delivered())
        for doc in ready:
            events = docs[doc.id]
            statuses = [(e["type"], e["data"]["status"]) for e in events if e["type"] != "document.deleted"]
            assert statuses == [
                *(("document.status_changed", s) for s in STAGES),
                ("document.status_changed", "READY"),
                ("document.ready", "READY"),
            ]
            ids = [e["data"]["event_id"] for e in events]
            assert ids == sorted(ids), "a later event was delivered before an earlier one of the same document"
        for doc in ready[:4]:
            assert docs[doc.id][-1]["type"] == "document.deleted"
            assert docs[doc.id][-1]["data"]["filename"] == "a.txt"
        for doc in failed:
            last = docs[doc.id][-1]
            assert last["type"] == "document.failed"
            assert last["data"]["error"] == {"code": "DOCUMENT_CORRUPT", "message": "the file is corrupt"}
        only_terminal = by_document(terminal_receiver.delivered())
        assert sorted(e["type"] for events in only_terminal.values() for e in events) == sorted(
            ["document.ready"] * len(ready) + ["document.failed"] * len(failed) + ["document.deleted"] * 4
        )
        assert ready[5].id in only_terminal and only_terminal[ready[5].id][0]["data"]["chunk_count"] == 1

        # Retries kept the delivery's id; the failed attempts show in the deliveries list.
        retried = [r for r in receiver.all() if r.status >= 500]
        assert len(retried) == 5
        for failure in retried:
            assert any(r.webhook_id == failure.webhook_id for r in receiver.delivered())
        # The receiver holds the last request before the dispatcher has read its answer and recorded it.
        listed = wait_for(
            lambda: (
                (now := api.deliveries(created.webhook.id))
                and all(d.state == wh.WEBHOOK_DELIVERY_STATE_DELIVERED for d in now)
                and now
            ),
            30,
            what="every delivery recorded DELIVERED",
        )
        assert len(listed) == expected_all
        assert sum(d.attempts for d in listed) == expected_all + 5
        webhook = api.hooks.GetWebhook(wh.GetWebhookRequest(id=created.webhook.id))
        assert webhook.pending_deliveries == 0 and webhook.failed_deliveries == 0
        lat = latencies(terminal_receiver.delivered())
        print(
            f"\nwebhooks: {expected_all} + {expected_terminal} deliveries in {elapsed:.2f} s"
            f" (incl. ingestion), {(expected_all + expected_terminal) / elapsed:.0f}/s; terminal-only subscription"
            f" latency event→receipt median {statistics.median(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms;"
            f" retries observed {len(retried)}"
        )
        assert terminal.webhook.event_types == list(TERMINAL)
    finally:
        receiver.close()
        terminal_receiver.close()


def measure_healthy(api: Api, receiver: Receiver, count: int) -> tuple[list[D.Document], list[float]]:
    before = len(receiver.delivered())
    docs = [api.ready() for _ in range(count)]
    wait_for(lambda: len(receiver.delivered()) >= before + count)
    return docs, latencies(receiver.delivered()[before:])


def test_a_dead_receiver_delays_neither_other_subscriptions_nor_ingestion(delivering):
    server = delivering(**{**FAST, "webhook_timeout_seconds": 60.0, "webhook_connect_timeout_seconds": 30.0})
    api = Api(server.address)
    api.create_collection()
    healthy = Receiver()
    silent = SilentListener()
    try:
        api.add_webhook(healthy.url, [wh.WEBHOOK_EVENT_TYPE_DOCUMENT_READY])
        _, alone = measure_healthy(api, healthy, 20)
        # A receiver that accepts connections and never answers, and one that refuses them.
        dead = api.add_webhook(silent.url, [wh.WEBHOOK_EVENT_TYPE_DOCUMENT_READY])
        refusing = api.add_webhook(refused_url(), [wh.WEBHOOK_EVENT_TYPE_DOCUMENT_READY])
        docs, with_dead = measure_healthy(api, healthy, 20)
        # Ingestion went on: every document is READY (they were completed one after the other).
        assert all(api.get(d.id).status == D.DOCUMENT_STATUS_READY for d in docs)
        # The healthy subscription got all of its 20 while the silent one's first attempt is still in flight.
        stuck = api.deliveries(dead.webhook.id)
        assert len(stuck) == 20
        assert all(d.state == wh.WEBHOOK_DELIVERY_STATE_PENDING and d.attempts == 0 for d in stuck)
        assert wait_for(lambda: any(d.attempts >= 1 for d in api.deliveries(refusing.webhook.id)))
        print(
            f"\nhealthy subscription latency event→receipt, median/max: alone {statistics.median(alone) * 1000:.0f}/"
            f"{max(alone) * 1000:.0f} ms; beside a silent and a refusing receiver "
            f"{statistics.median(with_dead) * 1000:.0f}/{max(with_dead) * 1000:.0f} ms"
        )
    finally:
        api.close()
        healthy.close()
        silent.close()


def test_retries_exhausted_mark_the_delivery_failed_and_later_events_still_go(api):
    doomed: set[str] = set()

    def refuse_doomed_ready(receipt: Receipt, seen: int) -> tuple[int, float]:
        data = receipt.payload["data"]
        if data["document_id"] in doomed and receipt.payload["type"] == "document.ready":
            return 500, 0.0
        return 204, 0.0

    receiver = Receiver(refuse_doomed_ready)
    try:
        created = api.add_webhook(receiver.url, TERMINAL)
        doc = api.upload()
        doomed.add(doc.id)
        job = api.claim()
        api.run_to_indexing(job)
        api.complete(job)
        failed = wait_for(lambda: api.deliveries(created.webhook.id, wh.WEBHOOK_DELIVERY_STATE_FAILED))
        assert len(failed) == 1
        assert failed[0].attempts == 4 and failed[0].last_status_code == 500
        assert "gave up after 4 attempts" in failed[0].last_error and "HTTP 500" in failed[0].last_error
        assert failed[0].event_type == "document.ready" and failed[0].document_id == doc.id
        assert not failed[0].HasField("next_attempt_time")
        # The document's next event, and another document's, are delivered after the give-up.
        api.delete(doc.id)
        other = api.ready()
        wait_for(
            lambda: (
                {(r.payload["type"], r.payload["data"]["document_id"]) for r in receiver.delivered()}
                >= {("document.deleted", doc.id), ("document.ready", other.id)}
            )
        )
        assert [r.status for r in receiver.all() if r.payload["data"]["document_id"] == doc.id] == [500] * 4 + [204]
        webhook = api.hooks.GetWebhook(wh.GetWebhookRequest(id=created.webhook.id))
        assert webhook.failed_deliveries == 1 and webhook.state == wh.WEBHOOK_STATE_ACTIVE
    finally:
        receiver.close()


def test_gone_disables_the_subscription(api):
    receiver = Receiver(lambda receipt, seen: (410, 0.0))
    try:
        created = api.add_webhook(receiver.url, TERMINAL)
        api.ready()
        webhook = wait_for(
            lambda: (
                (w := api.hooks.GetWebhook(wh.GetWebhookRequest(id=created.webhook.id))).state == wh.WEBHOOK_STATE_DISABLED and w
            )
        )
        assert "410" in webhook.disabled_reason
        api.ready()
        time.sleep(1.0)  # nothing is sent to a disabled subscription (the poll is 0.5 s)
        assert len(receiver.all()) == 1
        assert [d.state for d in api.deliveries(created.webhook.id)] == [wh.WEBHOOK_DELIVERY_STATE_FAILED]
    finally:
        receiver.close()


def test_two_replicas_never_deliver_twice_and_hand_over(ingest_api_factory, webhooks_factory):
    """A sluice-webhooks dispatcher and one inside ingest-api (SLUICE_WEBHOOKS_ENABLED=true) share
    the subscriptions through the leases; when the first stops, the other takes over."""
    first = webhooks_factory(**FAST)
    second = ingest_api_factory(**FAST, webhooks_enabled=True)
    api = Api(second.address)
    api.create_collection()
    receivers = [Receiver() for _ in range(4)]
    try:
        hooks = [api.add_webhook(r.url, TERMINAL) for r in receivers]
        docs = [api.ready() for _ in range(15)]
        for r in receivers:
            wait_for(lambda r=r: len(r.delivered()) >= 15)
        owners = {}
        import psycopg

        with psycopg.connect(first.settings.database_url) as conn:
            owners = dict(conn.execute("SELECT id::text, lease_owner FROM webhook_subscriptions").fetchall())
        assert set(owners) == {h.webhook.id for h in hooks} and all(owners.values())
        # One replica stops: the other takes over and delivers the rest.
        first.stop()
        more = [api.ready() for _ in range(5)]
        for r in receivers:
            wait_for(lambda r=r: len(r.delivered()) >= 20)
        time.sleep(0.5)
        for r in receivers:
            ids = [x.webhook_id for x in r.all()]
            assert len(ids) == len(set(ids)) == 20, "a delivery was sent twice"
            assert {x.payload["data"]["document_id"] for x in r.all()} == {d.id for d in docs + more}
    finally:
        api.close()
        for r in receivers:
            r.close()


def test_a_deleted_collection_stops_its_subscriptions(api):
    receiver = Receiver()
    try:
        created = api.add_webhook(receiver.url, TERMINAL)
        api.ready()
        wait_for(lambda: len(receiver.delivered()) == 1)
        api.docs.DeleteCollection(ds.DeleteCollectionRequest(name="docs", force=True))
        with pytest.raises(grpc.RpcError) as err:
            api.hooks.GetWebhook(wh.GetWebhookRequest(id=created.webhook.id))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND and reason_of(err.value) == "WEBHOOK_NOT_FOUND"
        api.create_collection()  # same name, a new collection: no subscription comes back
        assert list(api.hooks.ListWebhooks(wh.ListWebhooksRequest()).webhooks) == []
        api.ready()
        time.sleep(1.0)
        assert len(receiver.all()) == 1
    finally:
        receiver.close()


def test_old_finished_deliveries_are_pruned_and_pending_ones_kept(delivering):
    server = delivering(
        **{
            **FAST,
            "webhook_delivery_retention_days": 1.0 / 86400,  # one second
            "webhook_timeout_seconds": 60.0,
            "webhook_connect_timeout_seconds": 30.0,
        }
    )
    api = Api(server.address)
    api.create_collection()
    receiver, silent = Receiver(), SilentListener()
    try:
        done = api.add_webhook(receiver.url, TERMINAL)
        stuck = api.add_webhook(silent.url, TERMINAL)
        api.ready()
        wait_for(lambda: receiver.delivered())
        assert len(api.deliveries(done.webhook.id)) == 1
        wait_for(lambda: api.deliveries(done.webhook.id) == [])  # delivered, then older than the retention
        assert [d.state for d in api.deliveries(stuck.webhook.id)] == [wh.WEBHOOK_DELIVERY_STATE_PENDING]
    finally:
        api.close()
        receiver.close()
        silent.close()


def test_https_goes_to_the_checked_address_with_the_urls_name_for_sni_and_the_certificate(delivering, tmp_path):
    """The request connects to the IP the guard checked, yet TLS speaks to the URL's host: SNI
    and certificate verification use `localhost` (the certificate names no IP address), and the
    Host header is the URL's. A URL naming the IP itself fails verification with that certificate."""
    ca_file, server_tls = make_certificates(tmp_path, "localhost")
    server = delivering(**{**FAST, "webhook_tls_ca_file": ca_file})
    api = Api(server.address)
    api.create_collection()
    by_name = Receiver(tls=server_tls, host="localhost")
    by_ip = Receiver(tls=server_tls)
    try:
        named = api.add_webhook(by_name.url, TERMINAL)
        literal = api.add_webhook(by_ip.url, TERMINAL)
        api.ready()
        receipt = wait_for(lambda: by_name.delivered())[0]
        assert by_name.server_names[0] == "localhost"
        assert receipt.headers["host"] == f"localhost:{by_name.port}"
        assert VERIFY(named.secret, receipt.headers, receipt.body)
        refused = wait_for(lambda: [d for d in api.deliveries(literal.webhook.id) if d.attempts >= 1])[0]
        assert "certificate" in refused.last_error.lower() and refused.last_status_code == 0
        assert by_ip.all() == []
    finally:
        api.close()
        by_name.close()
        by_ip.close()


# ---------------------------------------------------------------- the SSRF guard


REFUSED = [
    ("http://127.0.0.1:8080/hook", "127.0.0.1", "loopback"),
    ("http://localhost:8080/hook", "127.0.0.1", "loopback"),
    ("http://10.1.2.3/hook", "10.1.2.3", "private"),
    ("http://192.168.0.10/hook", "192.168.0.10", "private"),
    ("http://169.254.169.254/latest/meta-data", "169.254.169.254", "link-local"),
    ("https://[::1]/hook", "::1", "loopback"),
    ("http://[::ffff:10.0.0.1]/hook", "::ffff:10.0.0.1", "IPv4-mapped private"),
    ("http://0.0.0.0/hook", "0.0.0.0", "unspecified"),
    ("http://224.0.0.1/hook", "224.0.0.1", "multicast"),
    ("http://100.64.0.1/hook", "100.64.0.1", "non-public"),
]


@pytest.mark.parametrize(("url", "address", "why"), REFUSED)
def test_private_and_loopback_addresses_are_refused_unless_allowed(ingest_api, url, address, why):
    api = Api(ingest_api.address)
    api.create_collection()
    with pytest.raises(grpc.RpcError) as err:
        api.add_webhook(url)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(err.value) == "WEBHOOK_URL_NOT_ALLOWED"
    assert address in err.value.details() and why in err.value.details()
    assert "SLUICE_WEBHOOK_ALLOW_PRIVATE_NETWORKS" in err.value.details()
    api.close()


@pytest.mark.parametrize(
    "url",
    [
        "",
        "ftp://example.com/hook",
        "file:///etc/passwd",
        "http://user:secret@example.com/hook",
        "http:///nohost",
        "https://example.com/" + "a" * 2000,
        "http://example.com:99999/",
        "http://exa mple.com/",
        "gopher://127.0.0.1/",
        "http://example.com/hook#fragment",
    ],
)
def test_malformed_urls_are_refused(ingest_api, url):
    api = Api(ingest_api.address)
    api.create_collection()
    with pytest.raises(grpc.RpcError) as err:
        api.add_webhook(url)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(err.value) == "INVALID_WEBHOOK_URL", err.value.details()
    api.close()


def test_the_address_is_checked_again_at_delivery_time(ingest_api_factory, webhooks_factory):
    """A subscription accepted where private networks were allowed (as after a DNS answer that
    changed) is refused by a dispatcher that does not allow them: nothing reaches the receiver."""
    allowing = ingest_api_factory(**FAST)  # no dispatcher inside (the default)
    webhooks_factory(**{**FAST, "webhook_allow_private_networks": False})
    api = Api(allowing.address)
    api.create_collection()
    receiver = Receiver()
    try:
        created = api.add_webhook(receiver.url.replace("127.0.0.1", "localhost"), TERMINAL)
        api.ready()
        delivery = wait_for(lambda: [d for d in api.deliveries(created.webhook.id) if d.attempts >= 1])[0]
        assert "loopback" in delivery.last_error and delivery.last_status_code == 0
        assert receiver.all() == []
    finally:
        receiver.close()
        api.close()


# ---------------------------------------------------------------- the API


def test_create_validates_and_lists_pages_and_rotates(delivering):
    server = delivering(**{**FAST, "webhook_max_per_collection": 3})
    api = Api(server.address)
    api.create_collection()
    receiver = Receiver()
    try:
        for bad, reason in (
            (dict(collection="nope"), "COLLECTION_NOT_FOUND"),
            (dict(collection=""), "MISSING_COLLECTION"),
            (dict(types=[99]), "INVALID_EVENT_TYPE"),
            (dict(description="x" * 501), "INVALID_DESCRIPTION"),
        ):
            with pytest.raises(grpc.RpcError) as err:
                api.add_webhook(receiver.url, **bad)
            assert reason_of(err.value) == reason, bad
        created = [api.add_webhook(receiver.url, description=f"hook {i}") for i in range(3)]
        with pytest.raises(grpc.RpcError) as err:
            api.add_webhook(receiver.url)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and reason_of(err.value) == "QUOTA_EXCEEDED"
        page = api.hooks.ListWebhooks(wh.ListWebhooksRequest(page_size=2))
        rest = api.hooks.ListWebhooks(wh.ListWebhooksRequest(page_size=2, page_token=page.next_page_token))
        assert [w.id for w in [*page.webhooks, *rest.webhooks]] == [c.webhook.id for c in created]
        assert rest.next_page_token == ""
        assert all(len(w.event_types) == 4 for w in page.webhooks)
        with pytest.raises(grpc.RpcError) as err:
            api.hooks.ListWebhooks(wh.ListWebhooksRequest(collection="other", page_token=page.next_page_token))
        assert reason_of(err.value) == "INVALID_PAGE_TOKEN"
        for bad_id in ("", "not-a-uuid"):
            with pytest.raises(grpc.RpcError) as err:
                api.hooks.GetWebhook(wh.GetWebhookRequest(id=bad_id))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        rotated = api.hooks.RotateWebhookSecret(wh.RotateWebhookSecretRequest(id=created[0].webhook.id))
        assert rotated.secret.startswith("whsec_") and rotated.secret != created[0].secret
        # The next delivery is signed with the new secret.
        api.hooks.DeleteWebhook(wh.DeleteWebhookRequest(id=created[1].webhook.id))
        api.hooks.DeleteWebhook(wh.DeleteWebhookRequest(id=created[2].webhook.id))
        time.sleep(0.2 + FAST["webhook_lease_seconds"] / 3)  # the dispatcher renews (and reads the secret) each tick
        api.ready()
        wait_for(lambda: any(r.payload["type"] == "document.ready" for r in receiver.delivered()))
        assert all(VERIFY(rotated.secret, r.headers, r.body) for r in receiver.delivered())
        with pytest.raises(grpc.RpcError) as err:
            api.hooks.DeleteWebhook(wh.DeleteWebhookRequest(id=created[1].webhook.id))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        receiver.close()
        api.close()


def test_a_subscription_registers_its_collection_and_is_woken_by_its_notifications(delivering, database_url):
    """Events notify only collections someone listens to (migration 0014): the dispatcher
    registers its subscriptions' collections. With the fallback poll an hour away, only the
    notification can bring the delivery."""
    from sluice_ingest.notify import COLLECTIONS_CHANNEL

    server = delivering(**{**FAST, "webhook_poll_seconds": 3600.0})
    api = Api(server.address)
    api.create_collection()
    receiver = Receiver()
    try:
        api.add_webhook(receiver.url, TERMINAL)
        with psycopg.connect(database_url) as conn:
            (collection_id,) = conn.execute("SELECT id FROM collections WHERE name = 'docs'").fetchone()

        def listened() -> bool:
            with psycopg.connect(database_url) as conn:
                return (
                    conn.execute(
                        "SELECT count(*) FROM event_listeners WHERE channel = %s AND key = %s",
                        (COLLECTIONS_CHANNEL, str(collection_id)),
                    ).fetchone()[0]
                    == 1
                )

        wait_for(listened, timeout=30)
        doc = api.ready()
        wait_for(lambda: [r for r in receiver.delivered() if r.payload["data"]["document_id"] == doc.id], timeout=30)
    finally:
        receiver.close()
        api.close()


def test_document_payloads_describe_the_document_and_a_deletion_keeps_its_description(api):
    """A document event's data has the document's source_uri, version and SHA-256 (read with the
    event from the documents row), and its deletion's too (kept in the deletion's event, or else
    from this subscription's earlier deliveries; docs/webhooks.md)."""
    receiver = Receiver(lambda receipt, seen: (200, 0.0))
    try:
        api.add_webhook(receiver.url, ALL)
        content = b"the amber signal"
        doc = api.docs.UploadDocument(
            iter(
                [
                    ds.UploadDocumentRequest(
                        metadata=ds.UploadDocumentMetadata(collection="docs", filename="notes.txt", source_uri="guide/notes.txt")
                    ),
                    ds.UploadDocumentRequest(data=content),
                    ds.UploadDocumentRequest(
                        trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
                    ),
                ]
            )
        )
        job = api.claim()
        assert job is not None and job.document_id == doc.id
        api.run_to_indexing(job)
        api.complete(job, ["one chunk"])
        api.delete(doc.id)
        events = wait_for(
            lambda: (got := by_document(receiver.delivered()).get(doc.id, [])) and got[-1]["type"] == "document.deleted" and got
        )
        described = {
            (e["data"]["filename"], e["data"]["source_uri"], e["data"]["version"], e["data"]["content_sha256"]) for e in events
        }
        assert described == {("notes.txt", "guide/notes.txt", 1, hashlib.sha256(content).hexdigest())}
        assert [e["type"] for e in events][-3:] == ["document.status_changed", "document.ready", "document.deleted"]
    finally:
        receiver.close()
