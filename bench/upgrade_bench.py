"""Upgrades from the last five migration-changing commits (docs/operations.md, "Upgrading"):

    python -m bench.upgrade_bench [--states 5] [--hold 0]

For each older state (tests/older_commits.py): its worktree and venv, real documents through its
own ingest-api and worker, then the current migrations while its ingest-api and worker serve an
upload every 0.5 s, the current ingest-api in its place, the old worker finishing a document
through it, the current worker and search. Prints one row per state: documents and chunks after,
rows of the 14 surviving tables lost or changed, how many of the fixed queries' top-10s are
equal, the longest lock wait of the migration and of any other session meanwhile, and the time.
tests/ingest/test_upgrade.py runs one state of it in CI; five take ~15 minutes here."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from older_commits import QUERIES, OldRelease, migration_commits, upgrade_from
from sluice_ingest.migrations import LOCK_TIMEOUT_MS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=int, default=5, help="how many migration-changing commits, newest first")
    parser.add_argument("--hold", type=float, default=0.0, help="hold the version row this long past the first wait")
    args = parser.parse_args()
    print(f"lock_timeout {LOCK_TIMEOUT_MS} ms; {len(QUERIES)} fixed queries; uploads every 0.5 s during the upgrade")
    header = (
        f"{'state':<20} {'documents':>9} {'chunks':>6} {'rows lost':>9} {'top-10 equal':>12} "
        f"{'in flight':>9} {'lock wait max (migration / others)':>34} {'check':>6} {'duration':>8}"
    )
    print(header)
    print("-" * len(header))
    for commit in migration_commits(args.states):
        workdir = Path(tempfile.mkdtemp(prefix="sluice-upgrade-bench-"))
        try:
            with OldRelease(commit) as old:
                r = upgrade_from(old, workdir, hold_lock_seconds=args.hold)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        check = "clean" if r.check_code == 0 and "BROKEN" not in r.check_output else "BROKEN"
        waits = f"{r.migration_lock_wait * 1000:.0f} ms / {r.others_lock_wait * 1000:.0f} ms"
        print(
            f"{r.state:<20} {r.documents:>9} {r.chunks:>6} {r.lost:>9} {f'{r.top10_equal}/{len(QUERIES)}':>12} "
            f"{r.in_flight:>9} {waits:>34} {check:>6} {r.duration:>7.0f}s",
            flush=True,
        )
        if r.top10_equal != len(QUERIES):
            for before, after in zip(r.top10_before, r.top10_after, strict=True):
                if before != after:
                    print(f"    differs: {before} -> {after}")


if __name__ == "__main__":
    main()
