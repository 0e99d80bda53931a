"""The short chaos run (`python -m chaos --short`) as part of `make test`: workers, ingest-api
and search SIGKILLed, PostgreSQL restarted, uploads killed mid-stream, a 20% failing embedding
server; then every invariant checked with SQL and search (see chaos/driver.py). `make chaos`
runs the long version.

Not a package (no __init__.py): as `chaos.test_chaos` it would shadow the top-level `chaos`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.chaos, pytest.mark.timeout(900)]


def test_short_chaos_run_finds_no_violation():
    try:
        result = subprocess.run(
            [sys.executable, "-m", "chaos", "--short"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=840,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    except subprocess.TimeoutExpired as timeout:  # say how far it got, not just that it ran out of time

        def text(part: bytes | str | None) -> str:
            return part.decode(errors="replace") if isinstance(part, bytes) else part or ""

        pytest.fail(
            f"the chaos run did not end within {timeout.timeout:g} s:\n{(text(timeout.stdout) + text(timeout.stderr))[-6000:]}"
        )
    output = result.stdout + result.stderr
    summaries = [line for line in result.stdout.splitlines() if line.startswith("CHAOS-SUMMARY ")]
    assert summaries, output[-6000:]
    figures = json.loads(summaries[-1].removeprefix("CHAOS-SUMMARY "))
    assert figures["violations"] == 0 and result.returncode == 0, output[-8000:]
    # The run did what it claims: every kind of disruption happened at least once.
    assert figures["documents"] >= 30 and figures["ready"] > 0, figures
    assert figures["worker_kills"] >= 1 and figures["ingest_api_kills"] >= 1, figures
    assert figures["postgres_restarts"] >= 1 and figures["interrupted_uploads"] >= 1, figures
    assert figures["ready"] + figures["failed"] == figures["documents"], figures
