"""The gateway over TLS: it dials ingest-api and search with the SLUICE_TLS_* settings the CLI and
the SDK read (the servers' CA, and a client certificate under mutual TLS), and serves HTTPS with
SLUICE_TLS_CERT_FILE / SLUICE_TLS_KEY_FILE (docs/http.md#keys-limits-and-tls)."""

from __future__ import annotations

import ssl

import httpx
from certificates import make_pki
from search_server import RunningSearch

from gateway.conftest import RunningGateway, key_headers


def test_mutual_tls_to_both_backends_and_https_to_the_caller(ingest_api_factory, database_url, tmp_path):
    pki = make_pki(tmp_path)
    cert, key = pki["server"]
    client_cert, client_key = pki["client"]
    ingest = ingest_api_factory(tls_cert_file=cert, tls_key_file=key, tls_client_ca_file=pki["ca"])
    search = RunningSearch(database_url, tls_cert_file=cert, tls_key_file=key, tls_client_ca_file=pki["ca"])
    gateways = []
    try:
        gateway = RunningGateway(
            ingest.address,
            search.address,
            tls_ca_file=pki["ca"],
            tls_client_cert_file=client_cert,
            tls_client_key_file=client_key,
            tls_cert_file=cert,
            tls_key_file=key,
        )
        gateways.append(gateway)
        https = gateway.url.replace("http://", "https://")
        verify = ssl.create_default_context(cafile=pki["ca"])
        with httpx.Client(base_url=https, headers=key_headers(), verify=verify, timeout=30) as http:
            assert http.get("/healthz").json() == {"status": "SERVING", "backends": {"ingest": "SERVING", "search": "SERVING"}}
            assert http.post("/sluice.v1.DocumentService/ListCollections", json={}).status_code == 200
            missing = http.post("/sluice.v1.SearchService/Search", json={"collection": "nope", "query": "x"})
            assert missing.status_code == 404 and missing.json()["reason"] == "COLLECTION_NOT_FOUND"

        # Without its client certificate the backends refuse the gateway: not ready, and said why.
        bare = RunningGateway(ingest.address, search.address, tls_ca_file=pki["ca"])
        gateways.append(bare)
        with httpx.Client(base_url=bare.url, timeout=30) as http:
            health = http.get("/healthz")
            assert health.status_code == 503
            assert all(answer.startswith("UNAVAILABLE") for answer in health.json()["backends"].values()), health.json()
    finally:
        for running in gateways:
            running.stop()
        search.stop()
