"""The CLI's one client: a `sluice_client.Client` configured from flags and the environment.

Settings, first match wins: the flag, then the environment, then the default (sluice_client's
config.py): `--ingest-address` / SLUICE_INGEST_ADDRESS, `--search-address` /
SLUICE_SEARCH_ADDRESS, `--api-key` / SLUICE_API_KEY (else the credentials file that `make run`
writes: SLUICE_CREDENTIALS, ./.sluice/credentials, $SLUICE_DEV_HOME/credentials, whose admin key
serves `sluice tenants`/`sluice keys` and whose client key everything else), `--ca-file` /
SLUICE_TLS_CA_FILE, `--tls-cert` / SLUICE_TLS_CLIENT_CERT_FILE and `--tls-key` /
SLUICE_TLS_CLIENT_KEY_FILE (mutual TLS), `--as-tenant` / SLUICE_TENANT.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sluice_client import Client
from sluice_common import tracing

# Unary calls fail instead of hanging when a server accepts the connection but never answers.
DEFAULT_TIMEOUT_SECONDS = 30.0
# The prefix of the request_ids of uploads (stable per collection, file and content).
REQUEST_ID_PREFIX = "cli-"


@contextmanager
def open_client(
    ingest: str | None = None,
    search: str | None = None,
    *,
    api_key: str | None = None,
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
    tenant: str | None = None,
) -> Iterator[Client]:
    client = Client(
        ingest,
        search_address=search,
        api_key=api_key,
        ca_file=ca_file,
        cert_file=cert_file,
        key_file=key_file,
        tenant=tenant,
        timeout=DEFAULT_TIMEOUT_SECONDS,
        wrap_channel=tracing.traced_channel,
        request_id_prefix=REQUEST_ID_PREFIX,
    )
    try:
        yield client
    finally:
        client.close()
