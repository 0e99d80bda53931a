"""ingest-api as a real process: migrations by command, health, graceful SIGTERM, JSON logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from helpers import free_port, wait_serving

from .helpers import Clients


def test_process_serves_and_stops_cleanly_on_sigterm(database_url, tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "SLUICE_DATABASE_URL": database_url,
        "SLUICE_BIND": f"127.0.0.1:{port}",
        "SLUICE_SHUTDOWN_GRACE_SECONDS": "2",
    }
    migrate = subprocess.run([sys.executable, "-m", "sluice_ingest.migrations"], env=env, capture_output=True, text=True)
    assert migrate.returncode == 0, migrate.stderr  # idempotent on an already migrated database
    log = open(tmp_path / "ingest.log", "w+")  # noqa: SIM115 - the subprocess writes to it until the test ends
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
