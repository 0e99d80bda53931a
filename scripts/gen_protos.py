"""Generate the Python code of protos/sluice/v1 into libs/protos/src.

The type stubs (`*_pb2.pyi`, `*_pb2_grpc.pyi`) come from mypy-protobuf, and `sluice/py.typed`
marks the package as typed, so mypy --strict checks every use of a message, an enum and a
servicer (docs/contributing.md#typed-protos).

`python scripts/gen_protos.py` writes the files; `--check` regenerates into a temporary
directory and exits 1 when the committed code differs (stale), so CI catches a proto change
that was not regenerated.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
OUT = ROOT / "libs" / "protos" / "src"
PACKAGE = Path("sluice") / "v1"


def plugin(name: str) -> str:
    """protoc's --plugin option for mypy-protobuf's `name`: protoc looks plugins up on PATH, which
    need not hold the venv's bin (`make protos` calls .venv/bin/python), so take the one beside
    this interpreter first."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found: install mypy-protobuf (requirements.lock pins it)")
    return f"--plugin={name}={found}"


def generate(out: Path) -> None:
    sources = sorted(str(p.relative_to(PROTOS)) for p in (PROTOS / PACKAGE).glob("*.proto"))
    well_known = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTOS}",
        f"-I{well_known}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        plugin("protoc-gen-mypy"),
        f"--mypy_out=quiet:{out}",
        plugin("protoc-gen-mypy_grpc"),
        f"--mypy_grpc_out=quiet:{out}",
        *sources,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    (out / "sluice" / "__init__.py").write_text('"""Generated gRPC code of the Sluice contract."""\n')
    (out / PACKAGE / "__init__.py").write_text('"""Generated from protos/sluice/v1; do not edit."""\n')
    (out / "sluice" / "py.typed").write_text("")  # PEP 561: mypy reads the stubs above


def generated_files(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in (root / "sluice").rglob("*")
        if p.is_file() and (p.suffix in {".py", ".pyi"} or p.name == "py.typed")
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail when the committed code is stale")
    args = parser.parse_args()
    if not args.check:
        shutil.rmtree(OUT / "sluice", ignore_errors=True)
        generate(OUT)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(fresh)
        want, have = generated_files(fresh), generated_files(OUT)
        stale = sorted(want ^ have) + sorted(f for f in want & have if not filecmp.cmp(fresh / f, OUT / f, shallow=False))
    if stale:
        print("generated protos are stale; run `make protos`:", *stale, sep="\n  ", file=sys.stderr)
        return 1
    print("generated protos are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
