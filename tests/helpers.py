"""What many tests need, written once: free ports, waiting for an outcome, checking a gRPC error.

Import them as `from helpers import free_port, wait_for, expect_error` (tests/ is on the path
of every test; see docs/contributing.md, "Test helpers"). Keep this module small and free of
fixtures: fixtures live in the conftest.py files.

- `free_port()` / `free_ports(n)`: ports nobody listens on, for anything a test starts that
  cannot bind port 0 itself (a subprocess told its port, sluice-dev). Never a fixed port: the
  suite must pass beside `make run` on its default ports.
- `wait_for(condition)`: poll until `condition()` is truthy and return that value, or fail
  with `what` after `timeout`. The timeout is a safety net, never an assertion on speed.
  `wait_for_async` is the same inside an event loop (the condition may be a coroutine function).
- `wait_serving(address)`: until a gRPC server's health service answers SERVING.
- `expect_error(call, code, reason)`: the call fails with that status code (and ErrorInfo
  reason), and its message carries no traceback.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

# Below Linux's ephemeral range (32768-60999 by default): the kernel never hands these out to an
# outgoing connection or to a bind on port 0, so a port found free here stays free until someone
# binds it on purpose. Each pytest-xdist process takes its own slice, so two never pick one port.
QUIET_PORTS = range(20000, 32000)
_SLICES = 16
_lock = threading.Lock()
_next: list[int] = []


def _slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) % _SLICES if worker.isdigit() else 0
    size = len(QUIET_PORTS) // _SLICES
    return range(QUIET_PORTS.start + index * size, QUIET_PORTS.start + (index + 1) * size)


def _is_free(ports: range) -> bool:
    sockets: list[socket.socket] = []
    try:
        for port in ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for sock in sockets:
            sock.close()


def quiet_port_block(count: int) -> int:
    """The first of `count` consecutive ports free on 127.0.0.1, below the ephemeral range.

    Handed out in turn from this process's slice (and never twice while the slice lasts), so a
    port chosen here cannot be taken between the choice and the bind by an outgoing connection,
    by a server binding port 0, or by another xdist process: all three were seen taking a port
    from the ephemeral range ("Address already in use" for sluice-dev's metrics and sources ports)."""
    ports = _slice()
    with _lock:
        if not _next:
            _next.append(random.randrange(ports.start, ports.stop))
        for _ in range(len(ports)):
            first = _next[0]
            if first + count > ports.stop:
                first = ports.start
            _next[0] = first + count
            if _is_free(range(first, first + count)):
                return first
    raise RuntimeError(f"no {count} consecutive free ports in {ports}")


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 (see quiet_port_block), for a process told its ports."""
    return [quiet_port_block(1) for _ in range(count)]


def free_port() -> int:
    """A port free on 127.0.0.1, never one `make run` holds and never one the kernel hands out."""
    return quiet_port_block(1)


def wait_for(condition: Callable[[], Any], timeout: float = 60.0, *, interval: float = 0.05, what: str = "") -> Any:
    """Poll `condition()` until it returns something truthy, and return it; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:g} s waiting for {what or _describe(condition)}")
        time.sleep(interval)


async def wait_for_async(condition: Callable[[], Any], timeout: float = 60.0, *, interval: float = 0.05, what: str = "") -> Any:
    """`wait_for` inside an event loop: `condition` may be a plain or a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:g} s waiting for {what or _describe(condition)}")
        await asyncio.sleep(interval)


def _describe(condition: Callable[[], Any]) -> str:
    try:
        return inspect.getsource(condition).strip()
    except (OSError, TypeError):
        return repr(condition)


def wait_serving(address: str, timeout: float = 90.0, credentials: grpc.ChannelCredentials | None = None) -> None:
    """Until the gRPC health service at `address` answers SERVING (plaintext unless `credentials`)."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    serving = health_pb2.HealthCheckResponse.SERVING
    channel = grpc.secure_channel(address, credentials) if credentials else grpc.insecure_channel(address)
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)

        def answers_serving() -> bool:
            try:
                return stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status == serving
            except grpc.RpcError:
                return False  # not listening yet, or still starting

        wait_for(answers_serving, timeout, interval=0.1, what=f"{address} to report SERVING")


def expect_error(call: Callable[[], Any], code: grpc.StatusCode, reason: str | None = None) -> grpc.RpcError:
    """`call()` fails with status `code` (and ErrorInfo `reason` when given); the error is returned.

    Whatever the code, the message is one a client may see: no Python traceback in it."""
    from sluice_common.errors import reason_of

    with pytest.raises(grpc.RpcError) as raised:
        call()
    error = raised.value
    assert error.code() == code, f"{error.code()}: {error.details()}"
    if reason:
        assert reason_of(error) == reason, f"{reason_of(error)}: {error.details()}"
    assert "Traceback" not in (error.details() or ""), error.details()
    return error


def reads_beside(changes: list[int], reads: int, *, seconds: float = 120.0) -> Iterator[int]:
    """The reads of a race against a thread that counts its commits in `changes[0]`: `reads` of
    them, and on while that count has not passed reads // 4 (a loaded machine starves the
    changing thread, and the race needs it to run beside the reads), for `seconds` at most."""
    deadline = time.monotonic() + seconds
    done = 0
    while done < reads or (changes[0] <= reads // 4 and time.monotonic() < deadline):
        yield done
        done += 1
