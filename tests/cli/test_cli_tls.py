"""`sluice` with TLS and mutual TLS: --ca-file, --tls-cert and --tls-key (or the SLUICE_TLS_*
variables), and failures that say what failed instead of "is it running?"."""

from __future__ import annotations

import json

import pytest
from certificates import issue, make_ca

from .conftest import run_sluice_process


@pytest.fixture
def pki(tmp_path):
    ca_key, ca_cert, ca_file = make_ca(tmp_path, "sluice-ca")
    _other_key, _other_cert, other_ca_file = make_ca(tmp_path, "other-ca")
    return {
        "ca": ca_file,
        "other_ca": other_ca_file,
        "server": issue(tmp_path, "ingest-api", ca_key, ca_cert, server=True),
        "client": issue(tmp_path, "cli", ca_key, ca_cert, server=False),
    }


def test_cli_flags_and_variables_for_mutual_tls(ingest_api_factory, pki):
    cert, key = pki["server"]
    server = ingest_api_factory(tls_cert_file=cert, tls_key_file=key, tls_client_ca_file=pki["ca"])
    client_cert, client_key = pki["client"]
    at = ["--ingest-address", server.address, "--ca-file", pki["ca"]]
    ok = run_sluice_process("--json", "collections", "list", *at, "--tls-cert", client_cert, "--tls-key", client_key)
    assert ok.code == 0 and json.loads(ok.out) == {"collections": []}, ok.err
    by_env = run_sluice_process(
        "--json",
        "collections",
        "list",
        "--ingest-address",
        server.address,
        env={
            "SLUICE_TLS_CA_FILE": pki["ca"],
            "SLUICE_TLS_CLIENT_CERT_FILE": client_cert,
            "SLUICE_TLS_CLIENT_KEY_FILE": client_key,
        },
    )
    assert by_env.code == 0, by_env.err

    no_cert = run_sluice_process("collections", "list", *at)
    assert no_cert.code == 4 and "client certificate" in no_cert.err and "is it running" not in no_cert.err
    assert len(no_cert.err.strip().splitlines()) == 1
    untrusted = run_sluice_process(
        "--json",
        "collections",
        "list",
        "--ingest-address",
        server.address,
        "--ca-file",
        pki["other_ca"],
        "--tls-cert",
        client_cert,
        "--tls-key",
        client_key,
    )
    error = json.loads(untrusted.err)["error"]
    assert untrusted.code == 4 and error["reason"] == "TLS_HANDSHAKE_FAILED" and "untrusted certificate" in error["message"]
    half = run_sluice_process("collections", "list", *at, "--tls-cert", client_cert)
    assert half.code == 2 and "needs its key" in half.err


def test_plaintext_cli_against_a_tls_server_is_told_to_use_tls(ingest_api_factory, pki):
    cert, key = pki["server"]
    server = ingest_api_factory(tls_cert_file=cert, tls_key_file=key)
    result = run_sluice_process("collections", "list", "--ingest-address", server.address)
    assert result.code == 4 and "requires TLS" in result.err and "--ca-file" in result.err
    assert "is it running" not in result.err
