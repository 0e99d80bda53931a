"""Webhooks are tenant-scoped: another tenant's collection or webhook answers exactly as a
missing one (NOT_FOUND), listings never cross, and a reader may list but not manage."""

from __future__ import annotations

import uuid

import auth_keys
import grpc
import pytest
from ingest.helpers import Clients
from sluice.v1 import webhook_service_pb2 as wh
from sluice.v1 import webhook_service_pb2_grpc
from sluice_common.channels import keyed_channel
from sluice_common.errors import reason_of

# A public address given literally (no DNS); nothing is delivered: no event follows the creation.
PUBLIC_URL = "https://93.184.215.14/hooks/sluice"


def hooks(address: str, key: str) -> webhook_service_pb2_grpc.WebhookServiceStub:
    return webhook_service_pb2_grpc.WebhookServiceStub(keyed_channel(address, key))


def expect_not_found(call, request, reason: str) -> str:
    with pytest.raises(grpc.RpcError) as err:
        call(request, timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND, err.value.details()
    assert reason_of(err.value) == reason
    return err.value.details()


def test_another_tenants_webhooks_are_not_found(ingest_api, tenant_b):
    b_clients = Clients(ingest_api.address)
    b_clients.channel = keyed_channel(ingest_api.address, tenant_b.keys["client"])
    from sluice.v1 import document_service_pb2_grpc

    b_clients.docs = document_service_pb2_grpc.DocumentServiceStub(b_clients.channel)
    b_clients.create_collection("secret")
    a_clients = Clients(ingest_api.address)
    a_clients.create_collection("mine")
    a, b = hooks(ingest_api.address, auth_keys.KEYS["client"]), hooks(ingest_api.address, tenant_b.keys["client"])
    b_hook = b.CreateWebhook(wh.CreateWebhookRequest(webhook=wh.Webhook(collection="secret", url=PUBLIC_URL))).webhook
    a_hook = a.CreateWebhook(wh.CreateWebhookRequest(webhook=wh.Webhook(collection="mine", url=PUBLIC_URL))).webhook

    expect_not_found(
        a.CreateWebhook, wh.CreateWebhookRequest(webhook=wh.Webhook(collection="secret", url=PUBLIC_URL)), "COLLECTION_NOT_FOUND"
    )
    expect_not_found(a.ListWebhooks, wh.ListWebhooksRequest(collection="secret"), "COLLECTION_NOT_FOUND")
    missing = str(uuid.uuid4())
    for call, request in (
        (a.GetWebhook, wh.GetWebhookRequest),
        (a.DeleteWebhook, wh.DeleteWebhookRequest),
        (a.RotateWebhookSecret, wh.RotateWebhookSecretRequest),
    ):
        theirs = expect_not_found(call, request(id=b_hook.id), "WEBHOOK_NOT_FOUND")
        absent = expect_not_found(call, request(id=missing), "WEBHOOK_NOT_FOUND")
        assert theirs.replace(b_hook.id, missing) == absent  # the same answer as a webhook that does not exist
    expect_not_found(a.ListWebhookDeliveries, wh.ListWebhookDeliveriesRequest(webhook_id=b_hook.id), "WEBHOOK_NOT_FOUND")
    assert [w.id for w in a.ListWebhooks(wh.ListWebhooksRequest()).webhooks] == [a_hook.id]
    assert [w.id for w in b.ListWebhooks(wh.ListWebhooksRequest()).webhooks] == [b_hook.id]
    # B's webhook is untouched by A's attempts.
    assert b.GetWebhook(wh.GetWebhookRequest(id=b_hook.id)).url == PUBLIC_URL

    reader = hooks(ingest_api.address, tenant_b.keys["reader"])
    assert [w.id for w in reader.ListWebhooks(wh.ListWebhooksRequest()).webhooks] == [b_hook.id]
    with pytest.raises(grpc.RpcError) as err:
        reader.DeleteWebhook(wh.DeleteWebhookRequest(id=b_hook.id))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    a_clients.close()
    b_clients.close()
