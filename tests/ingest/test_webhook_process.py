"""`sluice-webhooks` as a real process: health, a signed delivery, metrics and JSON logs, and on
SIGTERM its leases handed back at once so a second process takes over (long before the lease
would have expired)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import psycopg
from helpers import free_ports, wait_for, wait_serving
from sluice.v1 import webhook_service_pb2 as wh

from .test_webhooks import TERMINAL, VERIFY, Api
from .webhook_receiver import Receiver

ROOT = Path(__file__).resolve().parents[2]
LEASE_SECONDS = 120  # far longer than the test: a take-over can only come from the hand-back


def command() -> list[str]:
    """The console script `sluice-webhooks`, from the pyproject that declares it (the venv's own
    script when installed, else the same `module:function` run by this interpreter)."""
    scripts = tomllib.loads((ROOT / "services/ingest-api/pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["sluice-webhooks"].split(":")
    installed = Path(sys.executable).parent / "sluice-webhooks"
    if installed.exists() and module in installed.read_text():
        return [str(installed)]
    return [sys.executable, "-c", f"from {module} import {function}; {function}()"]


class Process:
    def __init__(self, database_url: str, log: Path) -> None:
        self.health_port, self.metrics_port = free_ports(2)
        env = {
            **os.environ,
            "SLUICE_DATABASE_URL": database_url,
            "SLUICE_WEBHOOKS_BIND": f"127.0.0.1:{self.health_port}",
            "SLUICE_METRICS_PORT": str(self.metrics_port),
            "SLUICE_LOG_JSON": "true",
            "SLUICE_LOG_LEVEL": "INFO",
            "SLUICE_WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true",
            "SLUICE_WEBHOOK_POLL_SECONDS": "0.3",
            "SLUICE_WEBHOOK_LEASE_SECONDS": str(LEASE_SECONDS),
        }
        self.log_path = log
        self.log = open(log, "w+")  # noqa: SIM115 - the dispatcher process writes to it until stop()
        self.proc = subprocess.Popen(command(), env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_serving(f"127.0.0.1:{self.health_port}")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as answer:
            return answer.read().decode()

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.startswith("{")]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


def owner(database_url: str, webhook_id: str) -> str | None:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT lease_owner FROM webhook_subscriptions WHERE id = %s", (webhook_id,)).fetchone()
    return row[0]


def test_the_process_delivers_signed_and_hands_its_lease_back_on_sigterm(ingest_api_factory, database_url, tmp_path):
    server = ingest_api_factory(webhook_allow_private_networks=True)  # no dispatcher inside: the default
    api = Api(server.address)
    api.create_collection()
    receiver = Receiver()
    first = second = None
    try:
        first = Process(database_url, tmp_path / "first.log")
        created = api.add_webhook(receiver.url, TERMINAL)
        doc = api.ready()
        receipt = wait_for(lambda: receiver.delivered())[0]
        assert VERIFY(created.secret, receipt.headers, receipt.body)
        assert receipt.payload["type"] == "document.ready" and receipt.payload["data"]["document_id"] == doc.id
        held_by = owner(database_url, created.webhook.id)
        assert held_by and f":{first.proc.pid}:" in held_by
        metrics = wait_for(
            lambda: next((m for m in [first.metrics()] if 'sluice_webhook_attempts_total{outcome="delivered"} 1.0' in m), None)
        )
        assert "sluice_webhook_subscriptions_held 1.0" in metrics
        delivered = [e for e in first.events() if e.get("event") == "webhook attempt"]
        assert delivered and delivered[0]["service"] == "webhooks" and delivered[0]["outcome"] == "delivered"

        # A second process finds the subscription leased (for LEASE_SECONDS) and waits.
        second = Process(database_url, tmp_path / "second.log")
        assert owner(database_url, created.webhook.id) == held_by
        # SIGTERM: the first stops cleanly and hands the lease back; the second takes over at once.
        first.proc.send_signal(signal.SIGTERM)
        assert first.proc.wait(30) == 0
        assert any(e.get("event") == "webhook leases handed back" and e.get("count") == 1 for e in first.events())
        wait_for(lambda: f":{second.proc.pid}:" in (owner(database_url, created.webhook.id) or ""))
        later = api.ready()
        wait_for(lambda: len(receiver.delivered()) >= 2)
        assert [r.payload["data"]["document_id"] for r in receiver.delivered()] == [doc.id, later.id]
        assert all(VERIFY(created.secret, r.headers, r.body) for r in receiver.delivered())
        # The receiver holds a request before the dispatcher has read its answer and recorded it.
        both_delivered = [wh.WEBHOOK_DELIVERY_STATE_DELIVERED] * 2
        wait_for(
            lambda: [d.state for d in api.deliveries(created.webhook.id)] == both_delivered, 30, what="both recorded DELIVERED"
        )
    finally:
        for process in (first, second):
            if process is not None:
                process.kill()
        receiver.close()
        api.close()
