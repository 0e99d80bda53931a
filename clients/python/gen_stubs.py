"""Generate the Python code of the public Sluice services into sluice_client/protos.

The SDK carries its own copy of the generated code (so `pip install ./clients/python` needs
nothing else of this repository), made from protos/sluice/v1 with the imports pointed at
`sluice_client.protos`. Only the public services: JobService is for workers.
Its message classes are the same classes as `sluice.v1`'s when both are loaded (one descriptor
pool), so messages pass freely between them. The type stubs (`*.pyi`) come from mypy-protobuf.

`python clients/python/gen_stubs.py` writes the files; `--check` regenerates into a temporary
directory and exits 1 when the committed code differs (tests/clients runs it).
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTOS = HERE.parent.parent / "protos"
OUT = HERE / "src" / "sluice_client" / "protos"
SOURCES = ["collection", "document", "document_service", "search_service", "admin_service", "webhook_service", "source_service"]
_IMPORT = re.compile(r"^from sluice\.v1 import ", re.MULTILINE)


def plugin(name: str) -> str:
    """protoc's --plugin option for mypy-protobuf's `name`, the one beside this interpreter first
    (protoc looks plugins up on PATH, which need not hold the venv's bin)."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found: install mypy-protobuf (the repository's requirements.lock pins it)")
    return f"--plugin={name}={found}"


def generate(out: Path) -> None:
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp)
        well_known = Path(protoc.__file__).parent / "_proto"
        args = [
            "grpc_tools.protoc",
            f"-I{PROTOS}",
            f"-I{well_known}",
            f"--python_out={raw}",
            f"--grpc_python_out={raw}",
            plugin("protoc-gen-mypy"),
            f"--mypy_out=quiet:{raw}",
            plugin("protoc-gen-mypy_grpc"),
            f"--mypy_grpc_out=quiet:{raw}",
            *(f"sluice/v1/{name}.proto" for name in SOURCES),
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        out.mkdir(parents=True, exist_ok=True)
        for path in sorted((raw / "sluice" / "v1").iterdir()):
            if path.suffix in (".py", ".pyi"):
                (out / path.name).write_text(_IMPORT.sub("from sluice_client.protos import ", path.read_text()))
    (out / "__init__.py").write_text('"""Generated from protos/sluice/v1 by clients/python/gen_stubs.py; do not edit."""\n')


def generated_files(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_file() and p.suffix in (".py", ".pyi")} if root.is_dir() else set()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail when the committed code is stale")
    args = parser.parse_args()
    if not args.check:
        for stale in generated_files(OUT):
            (OUT / stale).unlink()
        generate(OUT)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(fresh)
        want, have = generated_files(fresh), generated_files(OUT)
        stale = sorted(want ^ have) + sorted(f for f in want & have if not filecmp.cmp(fresh / f, OUT / f, shallow=False))
    if stale:
        print("the SDK's generated code is stale; run `python clients/python/gen_stubs.py`:", *stale, sep="\n  ", file=sys.stderr)
        return 1
    print("the SDK's generated code is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
