"""Real HTTP receivers for the webhook tests: a threaded http.server that records every request
and answers as the test says (status, delay), and a listener that never answers."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# wait_for is re-exported for tests that still import it from here (tests/cli); new code
# imports it from helpers.
from helpers import free_port, wait_for  # noqa: F401


@dataclass
class Receipt:
    received_at: float  # time.time() when the request was read
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(self.body)

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


# (receipt so far, number of earlier requests with the same webhook-id) -> (status, delay seconds)
Behaviour = Callable[[Receipt, int], tuple[int, float]]


def always_ok(receipt: Receipt, seen: int) -> tuple[int, float]:
    return 200, 0.0


class Receiver:
    """An HTTP server on 127.0.0.1 that records requests; `behaviour` decides each answer."""

    def __init__(self, behaviour: Behaviour = always_ok, tls: tuple[str, str] | None = None, host: str = "127.0.0.1") -> None:
        """`tls`: (certificate, key) PEM files to serve https; the names the clients asked for
        (SNI) are kept in `server_names`."""
        self.behaviour = behaviour
        self.server_names: list[str | None] = []
        self.receipts: list[Receipt] = []
        self.lock = threading.Lock()
        self._seen: dict[str, int] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                receipt = Receipt(time.time(), {k.lower(): v for k, v in self.headers.items()}, body, 0)
                with receiver.lock:
                    seen = receiver._seen.get(receipt.webhook_id, 0)
                    receiver._seen[receipt.webhook_id] = seen + 1
                status, delay = receiver.behaviour(receipt, seen)
                if delay:
                    time.sleep(delay)
                receipt.status = status
                with receiver.lock:
                    receiver.receipts.append(receipt)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        scheme = "http"
        if tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            context.sni_callback = lambda sock, name, ctx: self.server_names.append(name)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://{host}:{self.port}/hooks"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def delivered(self) -> list[Receipt]:
        """Requests answered 2xx, in the order they were received."""
        with self.lock:
            return [r for r in self.receipts if 200 <= r.status < 300]

    def all(self) -> list[Receipt]:
        with self.lock:
            return list(self.receipts)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SilentListener:
    """Accepts TCP connections (the kernel's backlog does) and never answers a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hooks"

    def close(self) -> None:
        self.sock.close()


def make_certificates(directory, dns_name: str = "localhost") -> tuple[str, tuple[str, str]]:
    """A CA and a server certificate for `dns_name` only (no IP address in it): (ca file, (cert, key))."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("webhook test ca"))
        .issuer_name(name("webhook test ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(dns_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, cert_file, key_file = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(ca_file), (str(cert_file), str(key_file))


def refused_url() -> str:
    """A URL whose port refuses connections (free: nobody listens on it)."""
    return f"http://127.0.0.1:{free_port()}/hooks"
