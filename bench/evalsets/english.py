"""The English sets from Debian man pages of this machine (see manpages.py): `en`, the commands
(sections 1 and 8), and `refman`, the reference pages (3: library functions, 5: file formats,
7: overviews and conventions), a larger set of documents no ranking was tuned on."""

from __future__ import annotations

import datetime
from pathlib import Path

from . import SEED, write_set
from .manpages import EXCLUDED_PREFIXES, MAX_CHARS, MIN_CHARS, build

ROOTS = [Path("/usr/share/man/man1"), Path("/usr/share/man/man8")]
SIZE = 500
REFERENCE_ROOTS = [Path("/usr/share/man/man3"), Path("/usr/share/man/man5"), Path("/usr/share/man/man7")]
REFERENCE_SIZE = 1000


def build_english(root: Path, size: int = SIZE, seed: int = SEED) -> None:
    build_from(root, "en", ROOTS, size, seed)


def build_reference(root: Path, size: int = REFERENCE_SIZE, seed: int = SEED) -> None:
    build_from(root, "refman", REFERENCE_ROOTS, size, seed)


def build_from(root: Path, name: str, roots: list[Path], size: int, seed: int) -> None:
    pages, skipped = build(roots, size, seed)
    if len(pages) < 50:
        raise SystemExit(f"only {len(pages)} usable man pages under {', '.join(map(str, roots))}: is man-db installed?")
    documents = [(p.filename, p.text) for p in pages]
    queries = [{"id": p.id, "query": p.query, "relevant": [p.filename], "lang": "en", "source": p.source} for p in pages]
    write_set(
        root,
        name,
        documents,
        queries,
        {
            "source": "Debian man pages on this machine: " + ", ".join(map(str, roots)),
            "rendered_with": "man -l (man-db, groff) | col -bx, MANWIDTH=80",
            "query": "the NAME line's summary (after the dash); the NAME section is removed from the document",
            "seed": seed,
            "documents": len(documents),
            "queries": len(queries),
            "min_chars": MIN_CHARS,
            "max_chars": MAX_CHARS,
            "excluded_prefixes": list(EXCLUDED_PREFIXES),
            "skipped": dict(skipped),
            "built": datetime.date.today().isoformat(),
        },
    )
