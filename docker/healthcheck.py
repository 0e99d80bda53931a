#!/usr/bin/env python3
"""Container health check, shipped in every Sluice image (grpc_health_probe is not needed).

    sluice-healthcheck grpc HOST:PORT [SERVICE]   # grpc.health.v1 Check must say SERVING
    sluice-healthcheck http URL                    # GET must answer 2xx (e.g. /metrics)

Exit code 0 when healthy, 1 otherwise, with one line on stderr saying why.
"""

from __future__ import annotations

import sys
import urllib.request

TIMEOUT_SECONDS = 3.0


def check_grpc(address: str, service: str = "") -> str:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT_SECONDS)
        except grpc.RpcError as error:
            return f"{address}: {error.code().name}"
    if response.status != health_pb2.HealthCheckResponse.SERVING:
        return f"{address}: {health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)}"
    return ""


def check_http(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310 - local URL from the image
            if 200 <= response.status < 300:
                return ""
            return f"{url}: HTTP {response.status}"
    except OSError as error:
        return f"{url}: {error}"


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "grpc":
        problem = check_grpc(argv[1], argv[2] if len(argv) > 2 else "")
    elif len(argv) == 2 and argv[0] == "http":
        problem = check_http(argv[1])
    else:
        print("usage:\n" + "\n".join(__doc__.strip().splitlines()[2:4]), file=sys.stderr)
        return 2
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
