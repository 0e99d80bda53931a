"""`make run` with TLS and with mutual TLS, as an operator sets it up (docs/operations.md, TLS):
sluice-dev reports ready because its readiness checks speak the services' TLS (no plaintext
handshake lands in a service's log), the workers connect with their certificate, /metrics
serves HTTPS on the services' interface only, and what has no certificate is refused.
Certificates are made by the test; sluice-dev runs as a subprocess on free ports."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import ssl
import tempfile
import urllib.request
from pathlib import Path

import pytest
from certificates import make_pki
from dev_stack import DevStack
from helpers import wait_for
from sluice.v1 import collection_pb2, document_pb2, document_service_pb2_grpc
from sluice.v1 import document_service_pb2 as ds
from sluice_common.channels import keyed_channel
from sluice_common.health_probe import check_grpc
from sluice_common.tls import ClientTLS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("sluice_ingest.main", "sluice_search.main", "sluice_worker.main")),
        reason="needs the ingest-api, search and worker main modules",
    ),
]

# What a service logs when a client speaks plaintext, or no certificate, to its TLS port.
HANDSHAKE_FAILURES = re.compile(r"WRONG_VERSION_NUMBER|handshake failed|PEER_DID_NOT_RETURN_A_CERTIFICATE", re.I)


@pytest.fixture(scope="module")
def base():
    # Not under pytest's tmp dir (0700): the embedded PostgreSQL may run as its own user.
    path = Path(tempfile.mkdtemp(prefix="sluice-dev-tls-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def pki(base):
    directory = base / "pki"
    directory.mkdir()
    return make_pki(directory)


def server_env(pki) -> dict[str, str]:
    cert, key = pki["server"]
    return {"SLUICE_TLS_CERT_FILE": cert, "SLUICE_TLS_KEY_FILE": key, "SLUICE_TLS_CA_FILE": pki["ca"]}


def mutual_env(pki) -> dict[str, str]:
    cert, key = pki["client"]
    return {
        **server_env(pki),
        "SLUICE_TLS_CLIENT_CA_FILE": pki["ca"],
        "SLUICE_TLS_CLIENT_CERT_FILE": cert,
        "SLUICE_TLS_CLIENT_KEY_FILE": key,
    }


def metrics_urls(stack: DevStack) -> dict[str, str]:
    return dict(re.findall(r"^  (\S+)\s.*metrics (https?://\S+/metrics)$", stack.output, flags=re.M))


def scrape(url: str, tls: ClientTLS | None) -> str:
    context = None
    if tls is not None:
        context = ssl.create_default_context(cafile=tls.ca_file)
        if tls.cert_file:
            context.load_cert_chain(tls.cert_file, tls.key_file)
    with urllib.request.urlopen(url, timeout=10, context=context) as response:
        return response.read().decode()


def refused(url: str, tls: ClientTLS | None) -> bool:
    try:
        scrape(url, tls)
    except OSError:  # URLError, SSLError, a reset connection: all OSError
        return True
    return False


def upload_and_wait(address: str, key: str, tls: ClientTLS, content: bytes) -> document_pb2.Document:
    """Create a collection (hashing embedder), upload one Markdown file, wait until it is done."""
    channel = keyed_channel(address, key, tls=tls)
    try:
        documents = document_service_pb2_grpc.DocumentServiceStub(channel)
        collection = collection_pb2.Collection(
            name="tls",
            embedder=collection_pb2.EmbedderConfig(
                provider=collection_pb2.EMBEDDER_PROVIDER_HASHING, model="hashing-v1", dimensions=64
            ),
        )
        documents.CreateCollection(ds.CreateCollectionRequest(collection=collection), timeout=30)
        messages = [
            ds.UploadDocumentRequest(metadata=ds.UploadDocumentMetadata(collection="tls", filename="tls-note.md")),
            ds.UploadDocumentRequest(data=content),
            ds.UploadDocumentRequest(
                trailer=ds.UploadDocumentTrailer(size_bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
            ),
        ]
        uploaded = documents.UploadDocument(iter(messages), timeout=30)
        done = (document_pb2.DOCUMENT_STATUS_READY, document_pb2.DOCUMENT_STATUS_FAILED)
        return wait_for(
            lambda: (d := documents.GetDocument(ds.GetDocumentRequest(id=uploaded.id), timeout=10)).status in done and d,
            120,
            interval=0.2,
            what="the document to be READY or FAILED",
        )
    finally:
        channel.close()


def assert_ready_over_tls(stack: DevStack, client: ClientTLS) -> None:
    """Ready, no failed handshake in any log, and everything listening on 127.0.0.1 only."""
    stack.wait_ready()
    assert "Sluice is ready." in stack.output
    logs = "\n".join(path.read_text(errors="replace") for path in (stack.home / "logs").glob("*.log"))
    noise = [line for line in logs.splitlines() if HANDSHAKE_FAILURES.search(line)]
    assert not noise, "\n".join(noise[:5])
    assert {host for host, _ in stack.listening()} == {"127.0.0.1"}, stack.listening()
    for address in (stack.ingest, stack.search):
        assert check_grpc(address, client) == ""
    assert check_grpc(stack.ingest, None).startswith(f"{stack.ingest}: UNAVAILABLE")  # plaintext refused


def test_mismatched_tls_settings_are_refused_before_anything_starts(base, pki):
    cert, key = pki["server"]
    home = base / "refused"
    cases = {
        "SLUICE_TLS_CA_FILE is not set": {"SLUICE_TLS_CERT_FILE": cert, "SLUICE_TLS_KEY_FILE": key},
        "SLUICE_TLS_CLIENT_CERT_FILE and SLUICE_TLS_CLIENT_KEY_FILE are not set": {
            **server_env(pki),
            "SLUICE_TLS_CLIENT_CA_FILE": pki["ca"],
        },
        "the services serve plaintext": {"SLUICE_TLS_CA_FILE": pki["ca"]},
        "no such file": {**server_env(pki), "SLUICE_TLS_CA_FILE": str(base / "missing.pem")},
    }
    for expected, env in cases.items():
        stack = DevStack(home, extra_env=env)
        assert stack.process.wait(60) == 1, stack.output
        assert expected in stack.output, stack.output
        assert not (home / "pg").exists()


def test_make_run_with_tls_reports_ready_and_serves_metrics_over_https(base, pki):
    stack = DevStack(base / "tls", extra_env=server_env(pki))
    try:
        client = ClientTLS(ca_file=pki["ca"])
        assert_ready_over_tls(stack, client)
        assert "TLS: certificate" in stack.output
        urls = metrics_urls(stack)
        assert set(urls) == {"ingest-api", "search", "worker-1", "webhooks", "sources", "gateway"}, stack.output
        for url in urls.values():
            assert url.startswith("https://127.0.0.1:")
            assert "python_info" in scrape(url, client)
            assert refused(url.replace("https://", "http://"), None)
    finally:
        code = stack.stop()
    assert code == 0, stack.output


def test_make_run_with_mutual_tls_reports_ready_and_workers_connect_with_their_certificate(base, pki):
    env = mutual_env(pki)
    stack = DevStack(base / "mutual", extra_env=env)
    try:
        client = ClientTLS(pki["ca"], *pki["client"])
        assert_ready_over_tls(stack, client)
        assert "mutual TLS: certificate" in stack.output
        # Health needs no API key, but a certificate: a probe without one is refused at the handshake.
        assert check_grpc(stack.ingest, ClientTLS(ca_file=pki["ca"])).startswith(f"{stack.ingest}: UNAVAILABLE")
        assert check_grpc(stack.ingest, ClientTLS(pki["ca"], *pki["rogue"])).startswith(f"{stack.ingest}: UNAVAILABLE")
        for url in metrics_urls(stack).values():
            assert "python_info" in scrape(url, client)
            assert refused(url, ClientTLS(ca_file=pki["ca"]))  # no client certificate

        # A document to the worker through ingest-api, with the client's certificate: READY.
        key = json.loads((stack.home / "credentials").read_text())["keys"]["client"]
        document = upload_and_wait(
            stack.ingest, key, client, b"# Over mutual TLS\n\nThe lock keeper checks every certificate at the gate.\n"
        )
        assert document.status == document_pb2.DOCUMENT_STATUS_READY and document.chunk_count > 0, document
    finally:
        code = stack.stop()
    assert code == 0, stack.output
