"""Known-item evaluation sets built from real documents found on this machine.

    .venv/bin/python -m bench.evalsets build en|zh|readme|refman|all [--force]   # into .sluice/evalsets/<name>/
    .venv/bin/python -m bench.evalsets fixture                      # refresh tests/fixtures/evalsets/

A built set is a folder: `docs/` (the documents, as uploaded), `queries.jsonl` (the format of
sluice_common.evaluation) and `manifest.json` (source, seed, sizes, skip counts). It is built
once, then read as it is: the bench runs offline and gives the same set every time. The sets,
their sources and why their queries are not copied from the documents: docs/evaluation.md.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from sluice_common.evaluation import Query, load_queries

REPO = Path(__file__).resolve().parents[2]
# Where built sets live (SLUICE_EVALSETS_DIR overrides it, e.g. to share them between checkouts).
CACHE = Path(os.environ.get("SLUICE_EVALSETS_DIR") or REPO / ".sluice" / "evalsets")
FIXTURES = REPO / "tests" / "fixtures" / "evalsets"
SEED = 18
SETS = ("en", "zh", "readme", "refman")


@dataclass(frozen=True)
class EvalSet:
    name: str
    root: Path
    queries: list[Query]

    @property
    def docs(self) -> Path:
        return self.root / "docs"

    def documents(self) -> list[Path]:
        return sorted(p for p in self.docs.iterdir() if p.is_file())

    def limited(self, limit: int | None) -> EvalSet:
        """The first `limit` queries (they are stored in the seeded order) with only their documents."""
        if not limit:
            return self
        return EvalSet(self.name, self.root, self.queries[:limit])

    def wanted_documents(self) -> list[Path]:
        """The documents the queries need (all of them when every query is kept)."""
        names = {r for q in self.queries for r in q.relevant}
        every = self.documents()
        if len(names) >= len(every):
            return every
        return [p for p in every if p.name in names]


def write_set(root: Path, name: str, documents: list[tuple[str, str]], queries: list[dict], manifest: dict) -> None:
    """Write a set atomically enough: into root.tmp, then renamed."""
    tmp = root.with_name(root.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "docs").mkdir(parents=True)
    for filename, text in documents:
        (tmp / "docs" / filename).write_text(text, encoding="utf-8")
    with (tmp / "queries.jsonl").open("w", encoding="utf-8") as out:
        for query in queries:
            out.write(json.dumps(query, ensure_ascii=False) + "\n")
    (tmp / "manifest.json").write_text(json.dumps({"name": name, **manifest}, ensure_ascii=False, indent=2) + "\n")
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)


def build(name: str, root: Path) -> None:
    if name == "en":
        from .english import build_english

        build_english(root)
    elif name == "zh":
        from .chinese import build_chinese

        build_chinese(root)
    elif name == "refman":
        from .english import build_reference

        build_reference(root)
    elif name == "readme":
        from .readmes import build_readmes

        build_readmes(root)
    else:
        raise ValueError(f"unknown eval set {name!r} (known: {', '.join(SETS)})")


def ensure(name: str, cache: Path = CACHE, *, force: bool = False) -> EvalSet:
    """The set `name`, built into `cache/name` first if it is not there."""
    root = cache / name
    if force or not (root / "queries.jsonl").is_file():
        print(f"building eval set {name} into {root} (once) …", flush=True)
        build(name, root)
    return open_set(root, name)


def open_set(root: Path, name: str | None = None) -> EvalSet:
    return EvalSet(name or root.name, root, load_queries(root / "queries.jsonl"))
