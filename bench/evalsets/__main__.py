"""`python -m bench.evalsets build en|zh|all [--force]` and `python -m bench.evalsets fixture`."""

from __future__ import annotations

import argparse

from . import CACHE, SETS, ensure


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench.evalsets", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help=f"build sets into {CACHE}")
    build.add_argument("name", choices=[*SETS, "all"])
    build.add_argument("--force", action="store_true", help="rebuild even if already built")
    fixture = sub.add_parser("fixture", help="write the small committed subset (tests/fixtures/evalsets)")
    fixture.add_argument("--per-set", type=int, default=40)
    args = parser.parse_args()
    if args.command == "build":
        for name in SETS if args.name == "all" else [args.name]:
            evalset = ensure(name, force=args.force)
            print(f"{name}: {len(evalset.queries)} queries, {len(evalset.documents())} documents in {evalset.root}")
    else:
        from .fixture import write_fixture

        write_fixture(args.per_set)


if __name__ == "__main__":
    main()
