"""The repository stands on its own: no tracked file refers to a document outside it, and every
reference to a page of docs/ (and every relative link in a Markdown file) reaches a file, and a
heading, that exist. docs/architecture.md and docs/contributing.md are the authority that code
and tests cite."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Team briefs that lived beside the repository, never in it (spelt in pieces so that this file
# does not match itself). Whatever they said that binds us is in docs/ now.
OUTSIDE = re.compile(
    r"\b(?:" + "DESIGN" + r"|" + "STYLE" + r")\.md\b"
    r"|\b" + "DESIGN" + r"\s*§"
    r"|" + "document-state-" + r"machine"
    r"|" + "NOTES-" + r"ENVIRONMENT"
    r"|/work/" + r"(?:shared|main)\b"
)
DOCS_REFERENCE = re.compile(r"(?<![\w/.-])docs/([\w.-]+\.md)(?:#([\w-]+))?")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def tracked_text_files() -> dict[str, str]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    texts = {}
    for name in filter(None, names):
        path = ROOT / name
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        try:
            texts[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary fixtures
    return texts


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    texts = tracked_text_files()
    assert "README.md" in texts and "docs/architecture.md" in texts, "git ls-files found no tracked files"
    return texts


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    found: set[str] = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (match := re.match(r"#{1,6}\s+(.*)", line)):
            base = slug(match.group(1))
            name, n = base, 0
            while name in found:  # GitHub numbers repeated headings
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def test_slug_follows_github():
    assert slug("Why `make run` and Ctrl-C lose nothing") == "why-make-run-and-ctrl-c-lose-nothing"
    assert slug("Keyword ranking: BM25 inside PostgreSQL") == "keyword-ranking-bm25-inside-postgresql"
    assert anchors("# A\n## B\n## B\n```\n# not a heading\n```\n") == {"a", "b", "b-1"}


def test_no_tracked_file_refers_to_a_document_outside_the_repository(files):
    found = [
        f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for name, text in files.items()
        for m in OUTSIDE.finditer(text)
    ]
    assert not found, "references to documents outside the repository (cite docs/ instead):\n" + "\n".join(found)


def test_every_reference_to_a_docs_page_reaches_a_page_and_a_heading(files):
    pages = {page.name: anchors(page.read_text()) for page in (ROOT / "docs").glob("*.md")}
    broken = []
    for name, text in files.items():
        for m in DOCS_REFERENCE.finditer(text):
            page, anchor = m.groups()
            if page not in pages or (anchor and anchor not in pages[page]):
                broken.append(f"{name}: {m.group(0)}")
    assert not broken, "references to a docs/ page or heading that does not exist:\n" + "\n".join(broken)


def test_markdown_links_stay_inside_the_repository_and_resolve(files):
    broken = []
    for name, text in files.items():
        if not name.endswith(".md") or name.startswith(("tests/fixtures/", "examples/docs/")):
            continue
        for target in MARKDOWN_LINK.findall(text):
            if "://" in target or target.startswith(("mailto:", "<")):
                continue
            path_part, _, anchor = target.partition("#")
            resolved = (ROOT / name).parent / path_part if path_part else ROOT / name
            resolved = resolved.resolve()
            if not resolved.is_relative_to(ROOT):
                broken.append(f"{name}: ({target}) leaves the repository")
            elif not resolved.exists():
                broken.append(f"{name}: ({target}) does not exist")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
                broken.append(f"{name}: ({target}) names no heading of {resolved.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


# Generated code, typed by its stubs (docs/contributing.md#typed-protos), is the one exception.
GENERATED_PACKAGES = {"libs/protos"}


def test_make_mypy_covers_every_package():
    """`make lint` runs mypy --strict over MYPY_STRICT (the Makefile): every importable package of
    every distribution here (services/*, libs/*, cli, clients/python) must be in it, whole."""
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^MYPY_STRICT :=((?:.*\\\n)*.*)$", makefile, re.M)
    assert listed, "no MYPY_STRICT in the Makefile"
    covered = set()
    for entry in re.sub(r"\$\(wildcard ([^)]*)\)", r"\1", listed.group(1).replace("\\\n", " ")).split():
        covered |= {p.parent if p.is_file() else p for p in ROOT.glob(entry)}  # a file: its package
    distributions = sorted({p.parent for p in ROOT.glob("*/*/pyproject.toml")} | {ROOT / "cli"})
    missing = []
    for distribution in distributions:
        if distribution.relative_to(ROOT).as_posix() in GENERATED_PACKAGES:
            continue
        packages = [p.parent for p in distribution.glob("*/__init__.py")] + [
            p.parent for p in distribution.glob("src/*/__init__.py")
        ]
        assert packages, f"{distribution.relative_to(ROOT)} has no package"
        missing += [p.relative_to(ROOT).as_posix() for p in packages if not any(p == c or c in p.parents for c in covered)]
    assert not missing, f"packages outside MYPY_STRICT (make lint): {missing}"
