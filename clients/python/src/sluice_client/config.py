"""Where the services are, which key to send and how to speak TLS.

Each setting is taken from the argument when given, else from the environment, else from the
default (the embedded `make run` on localhost):

| setting              | argument                        | environment                                   |
|----------------------|---------------------------------|-----------------------------------------------|
| ingest-api           | `address`                       | SLUICE_INGEST_ADDRESS (localhost:50051)       |
| search               | `search_address`                | SLUICE_SEARCH_ADDRESS (localhost:50052)       |
| API key              | `api_key`                       | SLUICE_API_KEY, else the credentials file     |
| TLS: servers' CA     | `ca_file`                       | SLUICE_TLS_CA_FILE                            |
| TLS: client cert/key | `cert_file`, `key_file`         | SLUICE_TLS_CLIENT_CERT_FILE / _KEY_FILE       |
| act for a tenant     | `tenant` (admin keys)           | SLUICE_TENANT                                 |

The credentials file is the one `make run` writes: SLUICE_CREDENTIALS, else ./.sluice/credentials,
else $SLUICE_DEV_HOME/credentials. Its admin key serves the admin calls, its client key the rest.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import grpc

from .errors import ConfigError

DEFAULT_INGEST_ADDRESS = "localhost:50051"
DEFAULT_SEARCH_ADDRESS = "localhost:50052"


def ingest_address(explicit: str | None = None) -> str:
    return explicit or os.environ.get("SLUICE_INGEST_ADDRESS") or DEFAULT_INGEST_ADDRESS


def search_address(explicit: str | None = None) -> str:
    return explicit or os.environ.get("SLUICE_SEARCH_ADDRESS") or DEFAULT_SEARCH_ADDRESS


def credentials_file() -> Path | None:
    """The credentials file `make run` wrote, if one is found (see the module's docstring)."""
    candidates = [os.environ.get("SLUICE_CREDENTIALS", ""), ".sluice/credentials"]
    if os.environ.get("SLUICE_DEV_HOME"):
        candidates.append(os.path.join(os.environ["SLUICE_DEV_HOME"], "credentials"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


@dataclass(frozen=True)
class Keys:
    """The key for ordinary calls and the one for AdminService (the same when one key was given)."""

    client: str = ""
    admin: str = ""


def resolve_keys(api_key: str | None = None) -> Keys:
    explicit = api_key or os.environ.get("SLUICE_API_KEY", "")
    if explicit:
        return Keys(explicit.strip(), explicit.strip())
    path = credentials_file()
    if path is None:
        return Keys()
    try:
        keys = json.loads(path.read_text()).get("keys", {})
    except (OSError, ValueError, AttributeError):
        raise ConfigError(
            f"the credentials file {path} is not valid JSON; delete it and restart `make run`", reason="CREDENTIALS_INVALID"
        ) from None
    if not isinstance(keys, dict):
        return Keys()
    return Keys(str(keys.get("client", "")), str(keys.get("admin", "") or keys.get("client", "")))


@dataclass(frozen=True)
class TLS:
    """TLS towards the services: the CA that signed their certificates, and for mutual TLS the
    client's certificate and key (PEM files). Nothing given: plaintext (fine on localhost)."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""

    @property
    def enabled(self) -> bool:
        return bool(self.ca_file or self.cert_file)

    @classmethod
    def resolve(cls, ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None) -> TLS:
        """Arguments first, then SLUICE_TLS_CA_FILE, SLUICE_TLS_CLIENT_CERT_FILE, SLUICE_TLS_CLIENT_KEY_FILE."""
        env = os.environ.get
        return cls(
            ca_file or env("SLUICE_TLS_CA_FILE", ""),
            cert_file or env("SLUICE_TLS_CLIENT_CERT_FILE", ""),
            key_file or env("SLUICE_TLS_CLIENT_KEY_FILE", ""),
        )

    def credentials(self) -> grpc.ChannelCredentials:
        if bool(self.cert_file) != bool(self.key_file):
            raise ConfigError(
                "a client certificate needs its key, and a key its certificate (give both: "
                "--tls-cert and --tls-key, or SLUICE_TLS_CLIENT_CERT_FILE and SLUICE_TLS_CLIENT_KEY_FILE)",
                reason="TLS_CONFIG_INVALID",
            )
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_file, "CA certificate") if self.ca_file else None,
            private_key=_read(self.key_file, "client key") if self.key_file else None,
            certificate_chain=_read(self.cert_file, "client certificate") if self.cert_file else None,
        )


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise ConfigError(f"cannot read the {what} {path}: {error.strerror or error}", reason="TLS_CONFIG_INVALID") from None


__all__ = [
    "DEFAULT_INGEST_ADDRESS",
    "DEFAULT_SEARCH_ADDRESS",
    "TLS",
    "Keys",
    "credentials_file",
    "ingest_address",
    "resolve_keys",
    "search_address",
]
