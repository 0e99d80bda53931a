"""The floor under "gRPC / in-process": what grpc-python itself costs per unary call here.

A server with only grpc's own health service answers Check calls from 16 concurrent clients in
a process of their own (as ingest_bench's gRPC clients are); prints the CPU per call of the
server process and of the client process, and calls/s. A Sluice cycle is 6 calls (ClaimJob,
4 ReportStage, CompleteJob), so 6 x (server + client) is the least gRPC can add to a cycle's
CPU on a machine where both run, before any of Sluice's own work.

    .venv/bin/python -m bench.grpc_floor [--calls 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

CONCURRENCY = 16


async def _client(port: int, calls: int) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)

        async def one() -> None:
            for _ in range(calls // CONCURRENCY):
                await stub.Check(health_pb2.HealthCheckRequest())

        await asyncio.gather(*(one() for _ in range(CONCURRENCY)))


async def measure(calls: int) -> tuple[float, float, float]:
    """(server ms/call, client ms/call, calls/s)."""
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health_aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        cpu, started = time.process_time(), time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        child = await asyncio.create_subprocess_exec(sys.executable, "-m", "bench.grpc_floor", "--client", str(port), str(calls))
        await child.wait()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        client_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        # The client process's start-up (imports) is in its CPU time: measured apart and taken off.
        return cpu / calls * 1000, client_cpu / calls * 1000, calls / elapsed
    finally:
        await server.stop(0)


def main() -> None:
    if sys.argv[1:2] == ["--client"]:
        asyncio.run(_client(int(sys.argv[2]), int(sys.argv[3])))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    _idle_server, idle_client, _ = asyncio.run(measure(CONCURRENCY))  # start-up only
    server, client, rate = asyncio.run(measure(args.calls))
    client -= idle_client * CONCURRENCY / args.calls
    print(f"\ngrpc-python unary calls (health Check), {CONCURRENCY} concurrent clients in another process")
    print(f"server CPU {server:.3f} ms/call, client CPU {client:.3f} ms/call, {rate:,.0f} calls/s")
    print(f"a 6-call Sluice cycle: at least {6 * (server + client):.2f} ms of CPU in gRPC alone")


if __name__ == "__main__":
    main()
