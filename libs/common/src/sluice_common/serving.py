"""gRPC server plumbing shared by the services: health, reflection, graceful shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Iterable, Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from . import tracing
from .tls import ServerTLS, check_plaintext_allowed

log = logging.getLogger("sluice.serving")

MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def create_server(
    service_names: Iterable[str],
    bind: str,
    *,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tls: ServerTLS | None = None,
    allow_plaintext: bool = False,
) -> tuple[grpc.aio.Server, health.aio.HealthServicer, int]:
    """A grpc.aio server with health and reflection, bound to `bind`; returns the bound port.

    TLS when `tls` has a certificate; plaintext only on loopback unless `allow_plaintext`.
    """
    tls = tls or ServerTLS()
    check_plaintext_allowed(bind, tls, allow_plaintext)
    server = grpc.aio.server(
        # Tracing first, so that a call refused by auth is traced too (nothing when tracing is off).
        interceptors=[*tracing.server_interceptors(), *interceptors],
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ],
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = list(service_names)
    reflection.enable_server_reflection([*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    port = server.add_secure_port(bind, tls.credentials()) if tls.enabled else server.add_insecure_port(bind)
    if port == 0:
        raise RuntimeError(f"cannot bind {bind}")
    return server, health_servicer, port


async def set_serving(health_servicer: health.aio.HealthServicer, names: Iterable[str], serving: bool) -> None:
    status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
    for name in ["", *names]:
        await health_servicer.set(name, status)


async def run_until_signal(
    server: grpc.aio.Server,
    health_servicer: health.aio.HealthServicer,
    names: Iterable[str],
    grace: float,
    on_stop: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve until SIGTERM or SIGINT, then stop taking calls and drain for `grace` seconds."""
    names = list(names)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    await set_serving(health_servicer, names, True)
    await stop.wait()
    log.info("shutting down", extra={"grace_seconds": grace})
    await set_serving(health_servicer, names, False)
    if on_stop is not None:
        await on_stop()
    await server.stop(grace)
