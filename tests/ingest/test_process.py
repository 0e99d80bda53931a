"""ingest-api as a real process: migrations by command, health, graceful SIGTERM, JSON logs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .helpers import Clients


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_serving(address: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                if stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{address} never became SERVING")
            time.sleep(0.1)


def test_process_serves_and_stops_cleanly_on_sigterm(database_url, tmp_path):
    port = free_port()
    env = {**os.environ, "SLUICE_DATABASE_URL": database_url, "SLUICE_BIND": f"127.0.0.1:{port}",
           "SLUICE_SHUTDOWN_GRACE_SECONDS": "2"}
    migrate = subprocess.run([sys.executable, "-m", "sluice_ingest.migrations"], env=env, capture_output=True, text=True)
    assert migrate.returncode == 0, migrate.stderr  # idempotent on an already migrated database
    log = open(tmp_path / "ingest.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "sluice_ingest.main"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_serving(f"127.0.0.1:{port}")
        c = Clients(f"127.0.0.1:{port}")
        c.create_collection()
        doc = c.upload()
        c.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    log.seek(0)
    events = [json.loads(line) for line in log if line.startswith("{")]
    uploaded = [e for e in events if e.get("event") == "document uploaded"]
    assert uploaded and uploaded[0]["document_id"] == doc.id and uploaded[0]["service"] == "ingest-api"
    assert any(e.get("event") == "shutting down" for e in events)
