"""The ports and addresses of `sluice-dev`: which are free, which metrics ports to hand out,
and what address a local client dials for the interface the services listen on."""

from __future__ import annotations

import socket

ALL_INTERFACES = {"", "0.0.0.0", "::", "[::]"}


def connect_host(listen_host: str) -> str:
    """The host a client on this machine dials: the listen host, or localhost for a wildcard
    (whose certificate names localhost rather than 0.0.0.0)."""
    return "localhost" if listen_host in ALL_INTERFACES else listen_host


def dial_address(listen_address: str) -> str:
    """`connect_host` of a host:port."""
    host, _, port = listen_address.rpartition(":")
    return f"{connect_host(host)}:{port}"


def port_in_use(host: str, port: int) -> bool:
    dial = "127.0.0.1" if host in ALL_INTERFACES or host == "localhost" else host
    with socket.socket(socket.AF_INET6 if ":" in dial else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((dial.strip("[]"), port)) == 0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def pick_metrics_ports(first: int, count: int, host: str) -> list[int]:
    """`count` ports from `first` upwards, skipping busy ones; all zero when metrics are off."""
    if first <= 0:
        return [0] * count
    ports: list[int] = []
    candidate = first
    while len(ports) < count:
        if candidate > 65535:
            ports.append(free_port())
            continue
        if not port_in_use(host, candidate):
            ports.append(candidate)
        candidate += 1
    return ports
