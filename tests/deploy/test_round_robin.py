"""Client channels balance per call over every address of a name (Kubernetes headless
Services, `dns:///…` targets): two servers behind one target each answer calls, for the sync
channel (CLI, Python client) and the asyncio one (worker). A plain host:port keeps pick_first."""

from __future__ import annotations

import asyncio
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from sluice_common.channels import keyed_aio_channel, keyed_channel


class CountingHealth(health.HealthServicer):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def Check(self, request, context):
        self.calls += 1
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


def start_two():
    servers, servicers, ports = [], [], []
    for _ in range(2):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        servicer = CountingHealth()
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        ports.append(server.add_insecure_port("127.0.0.1:0"))
        server.start()
        servers.append(server)
        servicers.append(servicer)
    # What a headless Service's DNS answer gives the resolver: several addresses, one name.
    return servers, servicers, "ipv4:" + ",".join(f"127.0.0.1:{port}" for port in ports)


def test_sync_channel_spreads_calls_over_every_address():
    servers, servicers, target = start_two()
    try:
        with keyed_channel(target, "key") as channel:
            grpc.channel_ready_future(channel).result(timeout=10)
            stub = health_pb2_grpc.HealthStub(channel)
            for _ in range(20):
                stub.Check(health_pb2.HealthCheckRequest(), timeout=10, wait_for_ready=True)
        assert all(s.calls > 0 for s in servicers), [s.calls for s in servicers]
    finally:
        for server in servers:
            server.stop(None)


def test_aio_channel_spreads_calls_over_every_address():
    servers, servicers, target = start_two()

    async def calls():
        channel = keyed_aio_channel(target, "key")
        try:
            stub = health_pb2_grpc.HealthStub(channel)
            for _ in range(20):
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=10, wait_for_ready=True)
        finally:
            await channel.close()

    try:
        asyncio.run(calls())
        assert all(s.calls > 0 for s in servicers), [s.calls for s in servicers]
    finally:
        for server in servers:
            server.stop(None)


def test_plain_host_port_keeps_pick_first_and_a_resolver_scheme_gets_round_robin():
    from sluice_common.channels import ROUND_ROBIN, _balanced

    assert ROUND_ROBIN not in _balanced("localhost:50051", None)
    assert ROUND_ROBIN in _balanced("dns:///ingest-api:50051", None)
    assert _balanced("dns:///x:1", [("grpc.lb_policy_name", "pick_first")]) == [("grpc.lb_policy_name", "pick_first")]
