"""Man pages rendered to plain text, each with its NAME summary as a known-item query.

The pages are Debian's, as installed on this machine (/usr/share/man/<lang>/man1 and man8).
`man -l` (man-db, groff) renders each page to text exactly as a reader sees it in a terminal;
`col -bx` removes the overstrikes. The page's NAME section ("ls - list directory contents")
gives the query: the part after the dash, written by the page's authors. The whole NAME
section (its heading included) is removed from the document that is indexed, so the query
is not a copy of the text it should find. Pages are skipped when they are:

* aliases (symlinks, or a source that is only a `.so` include of another page);
* without a "name - summary" NAME line, or whose summary has fewer than MIN_QUERY_WORDS words;
* tiny (fewer than MIN_CHARS characters once the NAME section is gone) or huge (more than
  MAX_CHARS: a few pages like bash(1) or perlfunc would dominate the ingestion time);
* duplicates: same source bytes, same rendered body, or the same summary as a page already
  taken (another version of the same program);
* pages whose body still contains the summary verbatim (case and spacing ignored), since the
  query would then be copied from the text after all.

The order of the candidates is a seeded shuffle of the sorted file names, and pages are taken
in that order until the set is full: the same machine and seed give the same set.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

MIN_CHARS = 800
MAX_CHARS = 60_000
MIN_QUERY_WORDS = 2
# NAME section headings: English and the translations found under /usr/share/man/<lang>.
NAME_HEADINGS = {"NAME", "名称", "名稱", "名字"}
DASHES = (" - ", " — ", " – ", " ‐ ", " -- ")  # noqa: RUF001 - the dashes are the point


@dataclass(frozen=True)
class Page:
    id: str  # e.g. "ls.1"
    filename: str  # e.g. "ls.1.txt", the document's file name in the collection
    query: str  # the NAME summary
    text: str  # the rendered page without its NAME section
    source: str  # the page's path on the machine


def read_source(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def is_alias(source: bytes) -> bool:
    lines = [ln.strip() for ln in source.decode("utf-8", "replace").splitlines()]
    body = [ln for ln in lines if ln and not ln.startswith(('.\\"', "'\\\"", '.\\\\"'))]
    return bool(body) and len(body) <= 2 and body[0].startswith(".so ")


def render(path: Path, width: int = 80) -> str:
    """The page as `man` shows it, without formatting characters."""
    env = {**os.environ, "MANWIDTH": str(width), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "MAN_KEEP_FORMATTING": ""}
    env.pop("MANPAGER", None)
    env.pop("PAGER", None)
    man = subprocess.run(
        ["man", "--no-hyphenation", "--no-justification", "-l", str(path)], env=env, capture_output=True, timeout=60, check=False
    )
    if man.returncode != 0 or not man.stdout:
        return ""
    col = subprocess.run(["col", "-bx"], input=man.stdout, capture_output=True, timeout=60, check=False, env=env)
    return col.stdout.decode("utf-8", "replace")


def split_name(text: str) -> tuple[str, str] | None:
    """(the NAME line's summary, the text without the NAME section), or None."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() in NAME_HEADINGS and not line[:1].isspace():
            end = i + 1
            while end < len(lines) and (not lines[end].strip() or lines[end][:1].isspace()):
                end += 1
            name_line = " ".join(" ".join(lines[i + 1 : end]).split())
            for dash in DASHES:
                if dash in name_line:
                    summary = name_line.split(dash, 1)[1].strip()
                    break
            else:
                return None
            rest = lines[:i] + lines[end:]
            return summary, "\n".join(rest).strip() + "\n"
    return None


CJK = re.compile(r"[\u3400-\u9fff]")


def too_short(summary: str, min_words: int) -> bool:
    """Fewer than `min_words` words (for Chinese, fewer than 2 x `min_words` characters)."""
    if CJK.search(summary):
        return len(CJK.findall(summary)) < 2 * min_words
    return len(summary.split()) < min_words


def normalise(text: str) -> str:
    return " ".join(text.lower().split())


# The Google Cloud CLI installs ~16,000 generated pages (gcloud_*): near-identical alpha, beta and
# GA copies of each command. They would be most of the set, and a known-item label is wrong when
# three copies of the answer exist. Left out.
EXCLUDED_PREFIXES = ("gcloud",)


def candidates(roots: list[Path]) -> list[Path]:
    paths = []
    for root in roots:
        if root.is_dir():
            paths.extend(
                p for p in root.iterdir() if p.is_file() and not p.is_symlink() and not p.name.startswith(EXCLUDED_PREFIXES)
            )
    return sorted(paths)


def page_id(path: Path) -> str:
    return path.name[:-3] if path.name.endswith(".gz") else path.name


def build(roots: list[Path], size: int, seed: int, *, min_query_words: int = MIN_QUERY_WORDS) -> tuple[list[Page], Counter]:
    """Take up to `size` pages in seeded order; returns the pages and the count of each skip reason."""
    order = candidates(roots)
    random.Random(seed).shuffle(order)
    pages: list[Page] = []
    skipped: Counter = Counter()
    seen_sources: set[str] = set()
    seen_bodies: set[str] = set()
    seen_summaries: set[str] = set()
    seen_ids: set[str] = set()
    for path in order:
        if len(pages) >= size:
            break
        try:
            source = read_source(path)
        except (OSError, EOFError, gzip.BadGzipFile):
            skipped["unreadable"] += 1
            continue
        digest = hashlib.sha256(source).hexdigest()
        if digest in seen_sources:
            skipped["duplicate source"] += 1
            continue
        seen_sources.add(digest)
        if is_alias(source):
            skipped["alias (.so)"] += 1
            continue
        pid = page_id(path)
        if pid in seen_ids:
            skipped["duplicate name"] += 1
            continue
        parsed = split_name(render(path))
        if parsed is None:
            skipped["no NAME summary"] += 1
            continue
        summary, text = parsed
        if too_short(summary, min_query_words):
            skipped["summary too short"] += 1
            continue
        if len(text) < MIN_CHARS:
            skipped["tiny"] += 1
            continue
        if len(text) > MAX_CHARS:
            skipped["huge"] += 1
            continue
        key = normalise(summary)
        if key in seen_summaries:
            skipped["duplicate summary"] += 1
            continue
        body = hashlib.sha256(normalise(text).encode()).hexdigest()
        if body in seen_bodies:
            skipped["duplicate body"] += 1
            continue
        if key in normalise(text):
            skipped["summary also in the body"] += 1
            continue
        seen_summaries.add(key)
        seen_bodies.add(body)
        seen_ids.add(pid)
        pages.append(Page(pid, f"{pid}.txt", summary, text, str(path)))
    return pages, skipped
