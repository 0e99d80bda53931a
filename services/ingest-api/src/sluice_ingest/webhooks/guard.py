"""Which webhook URLs may be called: the SSRF guard.

Only http(s) URLs without credentials, at most 2,000 characters. Their host is resolved and
every address must be public: private, loopback, link-local, multicast, reserved, unspecified,
shared (CGNAT) and IPv4-mapped forms of those are refused unless the server allows private
networks (SLUICE_WEBHOOK_ALLOW_PRIVATE_NETWORKS=true). The check runs at creation and again
before every attempt against the very address the sender then connects to (sender.py), so a
name that later resolves elsewhere (DNS rebinding) cannot reach the internal network.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from sluice_common.errors import InvalidArgument
from sluice_common.reasons import Reason

MAX_URL_LENGTH = 2000
ALLOW_SETTING = "SLUICE_WEBHOOK_ALLOW_PRIVATE_NETWORKS"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Target:
    """A checked URL, split: what to connect to and what to say in Host and SNI."""

    scheme: str
    host: str  # as in the URL, without brackets
    port: int
    path: str  # path and query, never empty

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def parse_url(url: str) -> Target:
    """The URL's parts, or INVALID_ARGUMENT (INVALID_WEBHOOK_URL) saying what is wrong."""
    if not url:
        raise InvalidArgument("webhook url is required", reason=Reason.INVALID_WEBHOOK_URL)
    if len(url) > MAX_URL_LENGTH:
        raise InvalidArgument(f"webhook url is longer than {MAX_URL_LENGTH} characters", reason=Reason.INVALID_WEBHOOK_URL)
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise InvalidArgument("webhook url contains whitespace or control characters", reason=Reason.INVALID_WEBHOOK_URL)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidArgument(f"webhook url is not valid: {exc}", reason=Reason.INVALID_WEBHOOK_URL) from None
    if parts.scheme not in ("http", "https"):
        raise InvalidArgument(
            f"webhook url must be http or https, not {parts.scheme or 'none'!r}", reason=Reason.INVALID_WEBHOOK_URL
        )
    if parts.username is not None or parts.password is not None:
        raise InvalidArgument("webhook url must not carry credentials (user:password@)", reason=Reason.INVALID_WEBHOOK_URL)
    if not parts.hostname:
        raise InvalidArgument("webhook url has no host", reason=Reason.INVALID_WEBHOOK_URL)
    if parts.fragment:
        raise InvalidArgument("webhook url must not carry a fragment (#…)", reason=Reason.INVALID_WEBHOOK_URL)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), path)


def refusal(address: IPAddress) -> str | None:
    """Why `address` is not a public address (a webhook may not call it), or None if it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        why = refusal(address.ipv4_mapped)
        return f"IPv4-mapped {why}" if why else None
    for test, why in (
        ("is_loopback", "loopback"),
        ("is_unspecified", "unspecified"),
        ("is_link_local", "link-local"),
        ("is_multicast", "multicast"),
        ("is_private", "private"),
        ("is_reserved", "reserved"),
    ):
        if getattr(address, test):
            return f"{why} address"
    if not address.is_global:
        return "non-public address"
    return None


def check_address(address: IPAddress, host: str, allow_private: bool) -> None:
    if allow_private:
        return
    why = refusal(address)
    if why is not None:
        shown = host if host == str(address) else f"{host} ({address})"
        raise InvalidArgument(
            f"webhook url host {shown} is a {why}; webhooks may only call public addresses"
            f" unless {ALLOW_SETTING}=true is set on ingest-api",
            reason=Reason.WEBHOOK_URL_NOT_ALLOWED,
            address=str(address),
        )


async def resolve(target: Target, allow_private: bool, timeout: float) -> list[IPAddress]:
    """Every address of the target's host, each checked; INVALID_ARGUMENT when one is refused
    or the name does not resolve."""
    try:
        literal: IPAddress | None = ipaddress.ip_address(target.host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        try:
            infos = await asyncio.wait_for(
                asyncio.get_running_loop().getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM), timeout
            )
        except (OSError, TimeoutError) as exc:
            raise InvalidArgument(
                f"webhook url host {target.host!r} does not resolve: {exc}", reason=Reason.INVALID_WEBHOOK_URL
            ) from None
        addresses = []
        for info in infos:
            address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise InvalidArgument(f"webhook url host {target.host!r} has no address", reason=Reason.INVALID_WEBHOOK_URL)
    for address in addresses:
        check_address(address, target.host, allow_private)
    return addresses
