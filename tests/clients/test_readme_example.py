"""The README's Python example, run as written (at most 10 lines), against the real services.

The example's `Client()` takes its addresses and key from the environment, as `make run`'s
users get them from the defaults and .sluice/credentials; here they point at this test's
ingest-api, search and credentials. Its documents are processed by the ScriptedWorker with the
local embedder the example's collection gets by default."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import auth_keys
from sluice_client import Client

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- run as written by tests/clients/test_readme_example.py -->"


def readme_example() -> str:
    readme = (ROOT / "README.md").read_text()
    assert MARKER in readme, "the README lost its tested Python example"
    return re.search(r"```python\n(.*?)```", readme.split(MARKER, 1)[1], flags=re.S).group(1)


def test_the_readme_python_example_is_short_and_runs_as_written(services, tmp_path):
    code = readme_example()
    assert len([line for line in code.splitlines() if line.strip()]) <= 10, code
    # Search loads the local model at its first query: seconds, more on a busy machine. Here,
    # not within the example's 30 s deadline.
    with Client(services.ingest, search_address=services.search, api_key=auth_keys.KEYS["client"]) as client:
        client.collections.create("warm-up")
        client.search("warm-up", "load the model", timeout=300)
    credentials = tmp_path / "credentials"
    credentials.write_text(json.dumps({"tenant": "default", "keys": auth_keys.KEYS}))
    env = {
        **os.environ,
        "SLUICE_INGEST_ADDRESS": services.ingest,
        "SLUICE_SEARCH_ADDRESS": services.search,
        "SLUICE_CREDENTIALS": str(credentials),
    }
    env.pop("SLUICE_API_KEY", None)
    script = tmp_path / "readme_example.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    hits = result.stdout.splitlines()
    assert hits and all(re.match(r"\d\.\d{3} \S+: ", line) for line in hits), result.stdout
    assert "scaling-workers.md" in hits[0]
