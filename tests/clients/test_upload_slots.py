"""Full upload slots (TOO_MANY_UPLOADS) name a real wait in their RetryInfo, and the Python SDK
waits it out (docs/clients.md, "Retries and deadlines"): against a real ingest-api that admits
one upload stream at a time, its slot held by a real stream that has sent its metadata."""

from __future__ import annotations

import hashlib
import threading

import auth_keys
import grpc
import pytest
from helpers import wait_for
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import document_service_pb2_grpc as ds_grpc
from sluice_client import AsyncClient, Client, RateLimited, ResourceExhausted
from sluice_common.channels import keyed_channel


class HeldSlot:
    """An upload stream that sends its metadata, then waits for `release` before its bytes."""

    def __init__(self, address: str, collection: str) -> None:
        self.release = threading.Event()
        self.result: ds.Document | None = None
        self.channel = keyed_channel(address, auth_keys.KEYS["client"])
        content = b"held upload"

        def messages():
            yield ds.UploadDocumentRequest(metadata=ds.UploadDocumentMetadata(collection=collection, filename="held.txt"))
            self.release.wait(60)
            yield ds.UploadDocumentRequest(data=content)
            yield ds.UploadDocumentRequest(
                trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
            )

        def run():
            self.result = ds_grpc.DocumentServiceStub(self.channel).UploadDocument(messages())

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def finish(self) -> ds.Document | None:
        self.release.set()
        self.thread.join(60)
        self.channel.close()
        return self.result


@pytest.fixture
def one_slot(ingest_api_factory):
    api = ingest_api_factory(max_concurrent_uploads=1)
    with Client(api.address, api_key=auth_keys.KEYS["client"]) as client:
        client.collections.create("slots", embedder="hashing")
    return api


def hold(api) -> HeldSlot:
    held = HeldSlot(api.address, "slots")
    wait_for(lambda: api.app.documents.uploads.active == 1, what="the held upload admitted")
    return held


def test_a_refusal_names_a_real_wait_and_is_not_a_rate_limit(one_slot):
    held = hold(one_slot)
    try:
        with Client(one_slot.address, api_key=auth_keys.KEYS["client"]) as client:
            # A deadline shorter than the wait the server names: the refusal surfaces as it came.
            with pytest.raises(ResourceExhausted) as refused:
                client.documents.upload("slots", b"refused", filename="a.txt", timeout=0.05)
            assert not isinstance(refused.value, RateLimited)  # the server's slots, not this key's rate
            assert refused.value.reason == "TOO_MANY_UPLOADS"
            assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
            # No upload has finished yet: the mean duration is its starting 1 s, shared by 1 stream.
            assert refused.value.retry_after == pytest.approx(1.0)
            assert "try again in 1.0 s" in refused.value.message
            assert client.settings.pacer.rate is None
    finally:
        assert held.finish() is not None


def test_the_sdk_waits_for_a_free_slot_and_uploads(one_slot):
    held = hold(one_slot)
    timer = threading.Timer(1.5, held.release.set)
    timer.start()
    try:
        with Client(one_slot.address, api_key=auth_keys.KEYS["client"], timeout=30) as client:
            document = client.documents.upload("slots", b"waited for a slot", filename="b.txt")
            assert document.size_bytes == len(b"waited for a slot")
            # Other calls were never held back, and nothing paces this client afterwards.
            assert client.settings.pacer.rate is None and client.settings.pacer.reserve() == 0.0
    finally:
        timer.cancel()
        assert held.finish() is not None


async def test_the_async_sdk_waits_for_a_free_slot_too(one_slot):
    held = hold(one_slot)
    timer = threading.Timer(1.0, held.release.set)
    timer.start()
    try:
        async with AsyncClient(one_slot.address, api_key=auth_keys.KEYS["client"], timeout=30) as client:
            document = await client.documents.upload("slots", b"async waited", filename="c.txt")
            assert document.size_bytes == len(b"async waited")
    finally:
        timer.cancel()
        assert held.finish() is not None
