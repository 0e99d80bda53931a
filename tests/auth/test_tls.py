"""TLS on the real servers, with certificates made by the test (tests/certificates.py)."""

from __future__ import annotations

import auth_keys
import grpc
import pytest
from certificates import issue, make_ca
from sluice.v1 import document_service_pb2 as ds
from sluice.v1 import document_service_pb2_grpc
from sluice_common.channels import keyed_channel
from sluice_common.tls import ClientTLS, ServerTLS, check_plaintext_allowed
from sluice_worker.jobs_client import JobClient


@pytest.fixture
def pki(tmp_path):
    ca_key, ca_cert, ca_file = make_ca(tmp_path, "sluice-ca")
    other_key, other_cert, other_ca_file = make_ca(tmp_path, "other-ca")
    server_cert, server_key = issue(tmp_path, "ingest-api", ca_key, ca_cert, server=True)
    worker_cert, worker_key = issue(tmp_path, "worker-1", ca_key, ca_cert, server=False)
    rogue_cert, rogue_key = issue(tmp_path, "rogue", other_key, other_cert, server=False)
    return {
        "ca": ca_file,
        "other_ca": other_ca_file,
        "server": (server_cert, server_key),
        "worker": (worker_cert, worker_key),
        "rogue": (rogue_cert, rogue_key),
    }


def list_collections(address, tls: ClientTLS | None) -> grpc.StatusCode:
    channel = keyed_channel(address, auth_keys.KEYS["client"], tls=tls)
    try:
        document_service_pb2_grpc.DocumentServiceStub(channel).ListCollections(ds.ListCollectionsRequest(), timeout=5)
        return grpc.StatusCode.OK
    except grpc.RpcError as err:
        return err.code()
    finally:
        channel.close()


def test_tls_server_refuses_plaintext_and_the_wrong_ca(ingest_api_factory, pki):
    cert, key = pki["server"]
    server = ingest_api_factory(tls_cert_file=cert, tls_key_file=key)
    assert list_collections(server.address, ClientTLS(ca_file=pki["ca"])) == grpc.StatusCode.OK
    assert list_collections(server.address, None) == grpc.StatusCode.UNAVAILABLE  # plaintext client
    assert list_collections(server.address, ClientTLS(ca_file=pki["other_ca"])) == grpc.StatusCode.UNAVAILABLE


async def test_mutual_tls_refuses_a_worker_without_a_client_certificate(ingest_api_factory, pki):
    cert, key = pki["server"]
    server = ingest_api_factory(tls_cert_file=cert, tls_key_file=key, tls_client_ca_file=pki["ca"])
    worker_cert, worker_key = pki["worker"]
    rogue_cert, rogue_key = pki["rogue"]
    outcomes = {}
    for name, tls in {
        "no client certificate": ClientTLS(ca_file=pki["ca"]),
        "certificate of another CA": ClientTLS(ca_file=pki["ca"], cert_file=rogue_cert, key_file=rogue_key),
        "worker certificate": ClientTLS(ca_file=pki["ca"], cert_file=worker_cert, key_file=worker_key),
    }.items():
        client = JobClient(server.address, api_key=auth_keys.KEYS["worker"], tls=tls, retries=1)
        try:
            await client.claim_job("tls-worker", 0)
            outcomes[name] = "ok"
        except Exception as error:  # the outcome is what is compared
            outcomes[name] = type(error).__name__
        finally:
            await client.close()
    assert outcomes["worker certificate"] == "ok"
    assert outcomes["no client certificate"] != "ok"
    assert outcomes["certificate of another CA"] != "ok"


def test_plaintext_is_refused_off_loopback_unless_allowed():
    check_plaintext_allowed("localhost:50051", ServerTLS(), False)
    check_plaintext_allowed("127.0.0.1:0", ServerTLS(), False)
    with pytest.raises(SystemExit, match="refusing to serve plaintext"):
        check_plaintext_allowed("0.0.0.0:50051", ServerTLS(), False)
    check_plaintext_allowed("0.0.0.0:50051", ServerTLS(), True)
    check_plaintext_allowed("0.0.0.0:50051", ServerTLS("c.pem", "k.pem"), False)
