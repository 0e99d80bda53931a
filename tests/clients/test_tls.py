"""The SDK over TLS and mutual TLS against the real ingest-api, and TLS failures that say what
failed (certificates made here, as in tests/auth/test_tls.py)."""

from __future__ import annotations

import auth_keys
import pytest
from certificates import issue, make_ca
from sluice_client import Client, TLSError


@pytest.fixture
def pki(tmp_path):
    ca_key, ca_cert, ca_file = make_ca(tmp_path, "sluice-ca")
    other_key, other_cert, other_ca_file = make_ca(tmp_path, "other-ca")
    server = issue(tmp_path, "ingest-api", ca_key, ca_cert, server=True)
    client = issue(tmp_path, "client-1", ca_key, ca_cert, server=False)
    rogue = issue(tmp_path, "rogue", other_key, other_cert, server=False)
    return {"ca": ca_file, "other_ca": other_ca_file, "server": server, "client": client, "rogue": rogue}


def collections(address: str, **tls) -> list[str]:
    with Client(address, api_key=auth_keys.KEYS["client"], timeout=10, **tls) as client:
        return [c.name for c in client.collections.list()]


def test_tls_works_with_the_servers_ca_and_says_what_failed_otherwise(ingest_api_factory, pki):
    cert, key = pki["server"]
    server = ingest_api_factory(tls_cert_file=cert, tls_key_file=key)
    assert collections(server.address, ca_file=pki["ca"]) == []
    with pytest.raises(TLSError) as untrusted:
        collections(server.address, ca_file=pki["other_ca"])
    assert untrusted.value.problem == "untrusted certificate" and untrusted.value.reason == "TLS_HANDSHAKE_FAILED"
    assert "is not signed by the CA given" in str(untrusted.value)
    plain = ingest_api_factory()
    with pytest.raises(TLSError) as not_tls:
        collections(plain.address, ca_file=pki["ca"])
    assert not_tls.value.problem == "server does not speak TLS"


def test_mutual_tls_needs_a_client_certificate_the_server_trusts(ingest_api_factory, pki):
    cert, key = pki["server"]
    server = ingest_api_factory(tls_cert_file=cert, tls_key_file=key, tls_client_ca_file=pki["ca"])
    client_cert, client_key = pki["client"]
    assert collections(server.address, ca_file=pki["ca"], cert_file=client_cert, key_file=client_key) == []
    for tls in ({"ca_file": pki["ca"]}, {"ca_file": pki["ca"], "cert_file": pki["rogue"][0], "key_file": pki["rogue"][1]}):
        with pytest.raises(TLSError) as refused:
            collections(server.address, **tls)
        assert refused.value.problem == "client certificate refused" and "client certificate" in str(refused.value)
