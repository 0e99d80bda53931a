"""Real X.509 certificates for the TLS tests, made with `cryptography` (no fixture files):
a CA, and server or client certificates it signs.

    ca_key, ca_cert, ca_file = make_ca(directory, "sluice-ca")
    cert_file, key_file = issue(directory, "ingest-api", ca_key, ca_cert, server=True)

A server certificate names localhost and 127.0.0.1 unless `names` says otherwise; files are
PEM, written as `<directory>/<name>.pem` and `.key`.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAMES = ("localhost", "127.0.0.1")


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write(path: Path, key, cert) -> tuple[str, str]:
    path.with_suffix(".key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.with_suffix(".pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(path.with_suffix(".pem")), str(path.with_suffix(".key"))


def _alt_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def make_ca(directory: Path, name: str):
    """A self-signed CA: (key, certificate, PEM file of the certificate)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, _ = _write(Path(directory) / name, key, cert)
    return key, cert, cert_file


def issue(directory: Path, name: str, ca_key, ca_cert, *, server: bool, names: Sequence[str] = SERVER_NAMES) -> tuple[str, str]:
    """A certificate signed by the CA, for a server (named `names`) or a client: (cert file, key file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
    )
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([_alt_name(n) for n in names]), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return _write(Path(directory) / name, key, builder.sign(ca_key, hashes.SHA256()))


def make_pki(directory: Path) -> dict:
    """A CA with a server certificate and a client certificate, and a rogue client of another CA."""
    ca_key, ca_cert, ca_file = make_ca(directory, "sluice-ca")
    other_key, other_cert, other_ca_file = make_ca(directory, "other-ca")
    return {
        "ca": ca_file,
        "other_ca": other_ca_file,
        "server": issue(directory, "server", ca_key, ca_cert, server=True),
        "client": issue(directory, "client", ca_key, ca_cert, server=False),
        "rogue": issue(directory, "rogue", other_key, other_cert, server=False),
        "ca_key": ca_key,
        "ca_cert": ca_cert,
    }
