"""The English set: Debian man pages (sections 1 and 8) of this machine; see manpages.py."""

from __future__ import annotations

import datetime
from pathlib import Path

from . import SEED, write_set
from .manpages import EXCLUDED_PREFIXES, MAX_CHARS, MIN_CHARS, build

ROOTS = [Path("/usr/share/man/man1"), Path("/usr/share/man/man8")]
SIZE = 500


def build_english(root: Path, size: int = SIZE, seed: int = SEED) -> None:
    pages, skipped = build(ROOTS, size, seed)
    if len(pages) < 50:
        raise SystemExit(f"only {len(pages)} usable man pages under {', '.join(map(str, ROOTS))}: is man-db installed?")
    documents = [(p.filename, p.text) for p in pages]
    queries = [{"id": p.id, "query": p.query, "relevant": [p.filename], "lang": "en", "source": p.source} for p in pages]
    write_set(
        root,
        "en",
        documents,
        queries,
        {
            "source": "Debian man pages on this machine: " + ", ".join(map(str, ROOTS)),
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
