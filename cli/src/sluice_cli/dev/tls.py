"""TLS under `make run` (docs/operations.md, "TLS"). The services serve what the SLUICE_TLS_*
variables in sluice-dev's environment say, and everything else follows them: the workers and
sluice-dev's own readiness checks connect with the CA and, under mutual TLS, the client
certificate that `sluice` uses too; the /metrics endpoints serve HTTPS with the services'
certificate (and require a client certificate under mutual TLS) unless SLUICE_METRICS_TLS_*
say otherwise. A setting that would leave a service unreachable is refused before anything
starts, rather than found after the readiness timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sluice_common.tls import ClientTLS

# The /metrics TLS variable that takes each service TLS variable's value by default.
METRICS_FROM_SERVICE = {
    "SLUICE_METRICS_TLS_CERT_FILE": "SLUICE_TLS_CERT_FILE",
    "SLUICE_METRICS_TLS_KEY_FILE": "SLUICE_TLS_KEY_FILE",
    "SLUICE_METRICS_TLS_CLIENT_CA_FILE": "SLUICE_TLS_CLIENT_CA_FILE",
}


@dataclass(frozen=True)
class DevTLS:
    cert_file: str = ""  # the services' certificate and key
    key_file: str = ""
    client_ca_file: str = ""  # set: the services require client certificates (mutual TLS)
    ca_file: str = ""  # what clients verify the services' certificate with
    client_cert_file: str = ""  # what clients present under mutual TLS
    client_key_file: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DevTLS:
        return cls(
            *(
                env.get(f"SLUICE_TLS_{name}", "").strip()
                for name in ("CERT_FILE", "KEY_FILE", "CLIENT_CA_FILE", "CA_FILE", "CLIENT_CERT_FILE", "CLIENT_KEY_FILE")
            )
        )

    @property
    def serving(self) -> bool:
        return bool(self.cert_file or self.key_file)

    @property
    def mutual(self) -> bool:
        return self.serving and bool(self.client_ca_file)

    @property
    def client_enabled(self) -> bool:
        """Whether a worker or `sluice` given these variables speaks TLS (sluice_common.tls.ClientTLS)."""
        return bool(self.ca_file or self.client_cert_file)

    def problems(self) -> list[str]:
        """Why the services, the workers or the readiness checks could not work together."""
        found = []
        for name, value in zip(
            (
                "SLUICE_TLS_CERT_FILE",
                "SLUICE_TLS_KEY_FILE",
                "SLUICE_TLS_CLIENT_CA_FILE",
                "SLUICE_TLS_CA_FILE",
                "SLUICE_TLS_CLIENT_CERT_FILE",
                "SLUICE_TLS_CLIENT_KEY_FILE",
            ),
            (self.cert_file, self.key_file, self.client_ca_file, self.ca_file, self.client_cert_file, self.client_key_file),
            strict=True,
        ):
            if value and not Path(value).is_file():
                found.append(f"{name}={value}: no such file")
        if bool(self.cert_file) != bool(self.key_file):
            found.append("SLUICE_TLS_CERT_FILE and SLUICE_TLS_KEY_FILE go together")
        if bool(self.client_cert_file) != bool(self.client_key_file):
            found.append("SLUICE_TLS_CLIENT_CERT_FILE and SLUICE_TLS_CLIENT_KEY_FILE go together")
        if self.client_ca_file and not self.serving:
            found.append(
                "SLUICE_TLS_CLIENT_CA_FILE (mutual TLS) needs the services' SLUICE_TLS_CERT_FILE and SLUICE_TLS_KEY_FILE"
            )
        if self.serving and not self.client_enabled:
            found.append(
                "the services serve TLS but SLUICE_TLS_CA_FILE is not set: the workers, `sluice` and sluice-dev's "
                "readiness checks need the CA that signed the services' certificate"
            )
        if self.mutual and not self.client_cert_file:
            found.append(
                "the services require client certificates (SLUICE_TLS_CLIENT_CA_FILE) but SLUICE_TLS_CLIENT_CERT_FILE "
                "and SLUICE_TLS_CLIENT_KEY_FILE are not set: the workers, `sluice` and the readiness checks would be refused"
            )
        if self.client_enabled and not self.serving:
            found.append(
                "SLUICE_TLS_CA_FILE or SLUICE_TLS_CLIENT_CERT_FILE is set but the services serve plaintext (no "
                "SLUICE_TLS_CERT_FILE): the workers would speak TLS to them. Set both sides, or neither"
            )
        return found

    def client_tls(self) -> ClientTLS:
        """sluice_common.tls.ClientTLS for the readiness checks (grpc is imported late: see main())."""
        from sluice_common.tls import ClientTLS

        return ClientTLS(self.ca_file, self.client_cert_file, self.client_key_file)

    def metrics_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """SLUICE_METRICS_TLS_* for the children: the services' TLS, unless the operator set any."""
        if not self.serving or any(env.get(name) for name in METRICS_FROM_SERVICE):
            return {}
        return {name: env[service] for name, service in METRICS_FROM_SERVICE.items() if env.get(service)}

    def describe(self) -> str:
        """One line for the banner; empty for plaintext."""
        if not self.serving:
            return ""
        if self.mutual:
            return (
                f"mutual TLS: certificate {self.cert_file}; clients present one signed by {self.client_ca_file} "
                f"(workers and `sluice`: SLUICE_TLS_CLIENT_CERT_FILE)"
            )
        return f"TLS: certificate {self.cert_file}; clients verify it with SLUICE_TLS_CA_FILE={self.ca_file}"
