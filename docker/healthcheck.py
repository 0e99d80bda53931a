#!/usr/bin/env python3
"""Container health check, shipped in every Sluice image (grpc_health_probe is not needed).

    sluice-healthcheck grpc HOST:PORT [SERVICE]   # grpc.health.v1 Check must say SERVING
    sluice-healthcheck http URL                    # GET must answer 2xx (e.g. /metrics)

Exit code 0 when healthy, 1 otherwise, with one line on stderr saying why; 2 on a usage error.

The probe reaches the service as its clients do (docs/operations.md, "Health"): over TLS when
it is given a CA (`--ca-file`, default $SLUICE_TLS_CA_FILE), presenting a client certificate
when the service requires mutual TLS (`--cert`/`--key`, default $SLUICE_TLS_CLIENT_CERT_FILE
and $SLUICE_TLS_CLIENT_KEY_FILE). `--server-name` is the name to check the server's
certificate against when it does not cover HOST (gRPC only).
"""

from __future__ import annotations

import argparse
import os
import sys

from sluice_common.health_probe import check_grpc, check_http
from sluice_common.tls import ClientTLS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice-healthcheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=("grpc", "http"))
    parser.add_argument("target", help="HOST:PORT (grpc) or URL (http)")
    parser.add_argument("service", nargs="?", default="", help="grpc: the service name to ask about (default: the whole server)")
    parser.add_argument(
        "--ca-file", default=os.environ.get("SLUICE_TLS_CA_FILE", ""), help="CA of the server's certificate; TLS when set"
    )
    parser.add_argument(
        "--cert", default=os.environ.get("SLUICE_TLS_CLIENT_CERT_FILE", ""), help="client certificate (mutual TLS)"
    )
    parser.add_argument("--key", default=os.environ.get("SLUICE_TLS_CLIENT_KEY_FILE", ""), help="its private key")
    parser.add_argument("--server-name", default="", help="grpc: name the server's certificate must carry, if not HOST")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    tls = ClientTLS(args.ca_file, args.cert, args.key)
    if args.kind == "grpc":
        problem = check_grpc(args.target, tls, args.service, server_name=args.server_name)
    elif args.service:
        print("sluice-healthcheck: http takes one URL", file=sys.stderr)
        return 2
    else:
        problem = check_http(args.target, tls)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
