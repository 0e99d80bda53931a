"""Reindex figures: change a collection's embedder under continuous search.

    .venv/bin/python -m bench.reindex_bench [--notes 24]

Runs tests/worker/test_reindex_e2e.py's main test (its real stack: embedded PostgreSQL, an
in-process ingest-api, a real search server, two worker processes, one of them SIGKILLed in the
middle of an EMBED job) with `--notes` generated documents beside tests/fixtures/documents,
and prints its figures line: documents, chunks per generation, reindex duration (from
ReindexCollection to the switch, hashing-v1/64 → all-MiniLM-L6-v2/384), and the queries answered
during the reindex by each generation with their latency. The test's assertions hold for every
run: every query OK, none empty, none mixing generations, no return to the old generation.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/worker/test_reindex_e2e.py::test_reindex_to_the_local_model_with_no_downtime"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=24, help="generated documents beside the fixtures")
    args = parser.parse_args()
    env = {**os.environ, "SLUICE_REINDEX_TEST_NOTES": str(args.notes)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", TEST],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    figures = [line for line in result.stdout.splitlines() if line.startswith("REINDEX FIGURES")]
    if result.returncode != 0 or not figures:
        sys.stdout.write(result.stdout[-4000:] + result.stderr[-2000:])
        raise SystemExit(f"the reindex run failed (exit {result.returncode})")
    print(figures[0].removeprefix("REINDEX FIGURES: "))


if __name__ == "__main__":
    main()
