"""Write the SDKs' copies of the one media-type table (libs/common/src/sluice_common/media_types.py):
`clients/python/src/sluice_client/media_types.py` and `clients/typescript/src/media_types.ts`.

`python scripts/gen_media_types.py` writes them; `--check` exits 1 when either differs from what
it would write (tests/test_media_types.py runs it), so the SDKs and ingest-api cannot drift.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "libs" / "common" / "src"))

from sluice_common.media_types import MEDIA_TYPES  # noqa: E402  (the path above first)

SOURCE = "libs/common/src/sluice_common/media_types.py"
PYTHON = ROOT / "clients/python/src/sluice_client/media_types.py"
TYPESCRIPT = ROOT / "clients/typescript/src/media_types.ts"


def python_copy() -> str:
    entries = "".join(f'    "{ext}": "{media}",\n' for ext, media in sorted(MEDIA_TYPES.items()))
    return (
        f'"""Generated from {SOURCE} by scripts/gen_media_types.py: do not edit.\n\n'
        "The media type this SDK sends for a file's extension; an extension not here is sent without\n"
        'one, and the server detects it."""\n\n'
        "from __future__ import annotations\n\n"
        f"MEDIA_TYPES: dict[str, str] = {{\n{entries}}}\n"
    )


def typescript_copy() -> str:
    entries = "".join(f'  "{ext}": "{media}",\n' for ext, media in sorted(MEDIA_TYPES.items()))
    return (
        f"// Generated from {SOURCE} by scripts/gen_media_types.py: do not edit.\n"
        "// The media type this SDK sends for a file's extension; an extension not here is sent without\n"
        "// one, and the server detects it.\n"
        f"export const MEDIA_TYPES: Readonly<Record<string, string>> = {{\n{entries}}};\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a copy is stale, writing nothing")
    args = parser.parse_args()
    stale = []
    for path, text in ((PYTHON, python_copy()), (TYPESCRIPT, typescript_copy())):
        if not path.exists() or path.read_text() != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(text)
    if args.check and stale:
        print(f"stale: {', '.join(map(str, stale))}; run `python scripts/gen_media_types.py`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
