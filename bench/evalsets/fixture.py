"""The small committed subset of the eval sets (tests/fixtures/evalsets), for the CI test.

The first `per_set` queries of each built set whose document is at most MAX_BYTES (the queries
are stored in the seeded order, so this is a seeded sample of the shorter pages: the CI test
ingests them through the real worker and must stay quick), and their documents, copied as they
are, with a manifest naming the source of each document.
"""

from __future__ import annotations

import json
import shutil

from . import CACHE, FIXTURES, ensure

MAX_BYTES = 8000

README = """# Eval set fixtures (generated: do not edit)

A seeded sample of the eval sets of bench/evalsets, written by
`.venv/bin/python -m bench.evalsets fixture`; used by tests/worker/test_search_eval_quality.py.
How the sets are built and why their queries are not copied from the documents:
docs/evaluation.md.

- `en/`: Debian man pages (sections 1 and 8), rendered to text by man-db/groff, the NAME section
  removed; the query is the NAME summary.
- `zh/`: Debian's Simplified Chinese package descriptions (DDTP, Translation-zh_CN; the query is
  the package's one-line summary, the document its long description), Chinese man pages and
  systemd's Chinese message catalog entries (query: the entry's Subject).

Each query's `source` names where its document came from. The texts are the work of their
authors and translators and are distributed under the free licences of their Debian packages
(see /usr/share/doc/PACKAGE/copyright on a Debian system).
"""


# The committed sample covers en and zh; the readme set depends on the venv's packages and their
# README licences vary, so it is built where it runs and never committed.
FIXTURE_SETS = ("en", "zh")


def write_fixture(per_set: int = 40) -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    (FIXTURES / "README.md").write_text(README)
    for name in FIXTURE_SETS:
        evalset = ensure(name)
        target = FIXTURES / name
        shutil.rmtree(target, ignore_errors=True)
        (target / "docs").mkdir(parents=True)
        lines = []
        for line in (CACHE / name / "queries.jsonl").read_text(encoding="utf-8").splitlines():
            relevant = [evalset.docs / r for r in json.loads(line)["relevant"]]
            if all(p.stat().st_size <= MAX_BYTES for p in relevant):
                lines.append(line)
                for path in relevant:
                    shutil.copyfile(path, target / "docs" / path.name)
            if len(lines) == per_set:
                break
        (target / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        manifest = json.loads((CACHE / name / "manifest.json").read_text())
        documents = len(list((target / "docs").iterdir()))
        manifest.update(
            {
                "sample_of": manifest.get("documents"),
                "documents": documents,
                "queries": len(lines),
                "sample": f"the first {per_set} queries whose documents are at most {MAX_BYTES} bytes",
            }
        )
        (target / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")
        size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
        print(f"{name}: {len(lines)} queries, {documents} documents, {size / 1024:.0f} KiB in {target}")
