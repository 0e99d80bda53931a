"""`sluice webhooks …` against the real ingest-api, with a real local receiver."""

from __future__ import annotations

import json

import pytest
from ingest.webhook_receiver import Receiver, wait_for


@pytest.fixture
def ingest_api(ingest_api_factory, webhooks_factory):
    """This module's ingest-api, and a webhook dispatcher apart from it (sluice-webhooks'), let
    webhooks call the local receiver, and retry fast."""
    settings = dict(
        webhook_allow_private_networks=True,
        webhook_retry_base_seconds=0.05,
        webhook_retry_max_delay_seconds=0.1,
        webhook_max_attempts=2,
        webhook_poll_seconds=0.3,
    )
    webhooks_factory(**settings)
    return ingest_api_factory(**settings)


def test_add_list_deliveries_and_remove_from_the_cli(sluice, stack, tmp_path):
    good = Receiver()
    bad = Receiver(lambda receipt, seen: (500, 0.0))
    try:
        assert sluice("collections", "create", "docs", "--embedder", "hashing", *stack.args).code == 0
        added = sluice("webhooks", "add", "docs", good.url, "--events", "document.ready,document.failed", *stack.args)
        assert added.code == 0 and "whsec_" in added.out and "document.ready, document.failed" in added.out
        made = json.loads(sluice("--json", "webhooks", "add", "docs", bad.url, "--events", "document.ready", *stack.args).out)
        assert made["secret"].startswith("whsec_")
        bad_id = made["webhook"]["id"]
        runs_hook = sluice("webhooks", "add", "docs", good.url, "--events", "source_run.finished", *stack.args)
        assert runs_hook.code == 0 and "source_run.finished" in runs_hook.out  # the sync-run types by their wire name
        unknown = sluice("webhooks", "add", "docs", good.url, "--events", "document.done", *stack.args)
        assert unknown.code == 2 and "document.ready" in unknown.err
        refused = sluice("webhooks", "add", "docs", "ftp://example.com/x", *stack.args)
        assert refused.code == 2 and "INVALID_WEBHOOK_URL" in refused.err

        (tmp_path / "a.txt").write_text("hello webhooks")
        assert sluice("upload", str(tmp_path / "a.txt"), "-c", "docs", *stack.args).code == 0
        wait_for(lambda: good.delivered())
        assert good.delivered()[0].payload["type"] == "document.ready"
        wait_for(lambda: "failed" in sluice("webhooks", "deliveries", bad_id, "--failed", *stack.args).out)

        listed = sluice("webhooks", "ls", *stack.args)
        assert listed.code == 0 and good.url in listed.out and bad.url in listed.out and "whsec_" not in listed.out
        failed = sluice("webhooks", "deliveries", bad_id, "--failed", *stack.args)
        assert "document.ready" in failed.out and "HTTP 500" in failed.out
        assert "gave up after 2 attempts" in failed.out
        rows = json.loads(sluice("--json", "webhooks", "deliveries", bad_id, *stack.args).out)["deliveries"]
        assert [(r["state"], r["attempts"], r["last_status_code"]) for r in rows] == [("WEBHOOK_DELIVERY_STATE_FAILED", 2, 500)]

        removed = sluice("webhooks", "rm", bad_id, *stack.args)
        assert removed.code == 0 and bad_id in removed.out
        assert sluice("webhooks", "rm", bad_id, *stack.args).code == 3
        assert bad.url not in sluice("webhooks", "ls", *stack.args).out
    finally:
        good.close()
        bad.close()
