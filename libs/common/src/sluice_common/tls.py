"""TLS for the gRPC servers and their clients.

A server serves TLS when it is given a certificate and key; with a client CA as well, it
requires every client to present a certificate signed by that CA (mutual TLS). Without a
certificate it serves plaintext, which is allowed only on a loopback address (the embedded
`make run`) unless `allow_plaintext` says the network is trusted (e.g. inside a compose
network behind a TLS-terminating proxy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}


@dataclass(frozen=True)
class ServerTLS:
    cert_file: str = ""
    key_file: str = ""
    client_ca_file: str = ""  # set: clients must present a certificate signed by this CA

    @property
    def enabled(self) -> bool:
        return bool(self.cert_file or self.key_file)

    def credentials(self) -> grpc.ServerCredentials:
        if not (self.cert_file and self.key_file):
            raise ValueError("TLS needs both a certificate file and a key file")
        pair = (Path(self.key_file).read_bytes(), Path(self.cert_file).read_bytes())
        client_ca = Path(self.client_ca_file).read_bytes() if self.client_ca_file else None
        return grpc.ssl_server_credentials([pair], root_certificates=client_ca, require_client_auth=client_ca is not None)


@dataclass(frozen=True)
class ClientTLS:
    ca_file: str = ""  # the CA that signed the server's certificate; empty: plaintext
    cert_file: str = ""  # for mutual TLS
    key_file: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.ca_file or self.cert_file)

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=Path(self.ca_file).read_bytes() if self.ca_file else None,
            private_key=Path(self.key_file).read_bytes() if self.key_file else None,
            certificate_chain=Path(self.cert_file).read_bytes() if self.cert_file else None,
        )


def host_of(bind: str) -> str:
    host, _, _ = bind.rpartition(":")
    return host or bind


def check_plaintext_allowed(bind: str, tls: ServerTLS, allow_plaintext: bool) -> None:
    if tls.enabled or allow_plaintext or host_of(bind) in LOOPBACK_HOSTS:
        return
    raise SystemExit(
        f"refusing to serve plaintext gRPC on {bind}: give a certificate (SLUICE_TLS_CERT_FILE and SLUICE_TLS_KEY_FILE), "
        "bind to localhost, or set SLUICE_ALLOW_PLAINTEXT=true on a trusted network"
    )


def secure_or_insecure_channel(
    address: str, tls: ClientTLS, options: Sequence[tuple[str, object]] | None = None, *, aio: bool = False
) -> grpc.Channel | grpc.aio.Channel:
    module = grpc.aio if aio else grpc
    if tls.enabled:
        return module.secure_channel(address, tls.credentials(), options=options)
    return module.insecure_channel(address, options=options)


__all__ = ["ClientTLS", "ServerTLS", "check_plaintext_allowed", "secure_or_insecure_channel"]
