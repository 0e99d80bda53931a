"""The Chinese set: Debian's Chinese package descriptions and the Chinese man pages of this machine.

1. Debian's translations of package descriptions into Simplified Chinese (DDTP: the file
   `Translation-zh_CN` of bookworm main, which apt fetches with
   `apt-get update -o Acquire::Languages=zh_CN,en`). Each package has a one-line summary and a
   long description, both written by Debian's Chinese translators. The long description is the
   document; the summary is the query (it is not part of the long description; a package whose
   long description contains its summary verbatim is skipped). Packages of one family share
   their long description (`0ad`, `0ad-data`, …): only the first in the seeded order is taken,
   as is a summary that repeats. Descriptions shorter than MIN_DESCRIPTION characters are
   skipped, and those that are not mostly Chinese.
2. The man pages under /usr/share/man/zh_CN and zh_TW, as for the English set (manpages.py):
   the NAME summary is the query and the NAME section is removed from the page. Many of them
   are translated only in part (shadow's pages keep English bodies): a page whose letters are
   less than MIN_MAN_CHINESE Chinese characters is skipped.
3. systemd's message catalog in Simplified Chinese (/usr/lib/systemd/catalog/systemd.zh_CN.catalog):
   each entry's `Subject:` is the query, its explanation (the header fields removed) the
   document.
"""

from __future__ import annotations

import datetime
import glob
import hashlib
import random
import re
import subprocess
from collections import Counter
from pathlib import Path

from . import SEED, manpages, write_set

TRANSLATIONS = "/var/lib/apt/lists/*_debian_dists_*_main_i18n_Translation-zh%5fCN*"
MAN_ROOTS = [Path(f"/usr/share/man/{lang}/man{section}") for lang in ("zh_CN", "zh_TW") for section in (1, 5, 8)]
DEBIAN_SIZE = 500
MIN_DESCRIPTION = 60
MIN_MAN_CHARS = 300
MIN_MAN_CHINESE = 0.25
# zh_CN only: the zh_TW catalog translates the same messages (a twin of each document).
CATALOGS = [Path("/usr/lib/systemd/catalog/systemd.zh_CN.catalog")]
CJK = re.compile(r"[\u3400-\u9fff]")


def translation_file() -> Path:
    found = sorted(p for p in glob.glob(TRANSLATIONS) if "-updates_" not in p and "-security_" not in p)
    if not found:
        raise SystemExit(
            "Debian's Chinese package descriptions are not on this machine. Fetch them once (as root) with\n"
            "  apt-get update -o Acquire::Languages=zh_CN,en\nthen build again."
        )
    return Path(found[0])


def read_translations(path: Path) -> str:
    """The file's text (apt keeps it compressed: apt-helper reads every format apt uses)."""
    if path.suffix in (".lz4", ".gz", ".xz", ".zst", ".bz2"):
        out = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", str(path)], capture_output=True, check=True, timeout=120)
        return out.stdout.decode("utf-8")
    return path.read_text(encoding="utf-8")


def parse_translations(text: str) -> list[tuple[str, str, str]]:
    """(package, summary, long description) of each record."""
    records = []
    for block in text.split("\n\n"):
        package, summary, body = "", "", []
        in_description = False
        for line in block.splitlines():
            if line.startswith("Package:"):
                package = line.split(":", 1)[1].strip()
            elif line.startswith("Description-zh_CN:"):
                summary = line.split(":", 1)[1].strip()
                in_description = True
            elif in_description and line.startswith(" "):
                body.append("" if line.strip() == "." else line[1:])
            else:
                in_description = False
        if package and summary and body:
            records.append((package, summary, description_text(body)))
    return records


def description_text(lines: list[str]) -> str:
    """Debian's folded description as paragraphs: lines of a paragraph are joined (without a
    space between two Chinese characters, as the translators folded them), blank lines part them."""
    paragraphs, current = [], ""
    for line in lines:
        if not line.strip():
            if current:
                paragraphs.append(current)
            current = ""
            continue
        piece = line.strip()
        if line.startswith(" "):  # a verbatim (indented) line, e.g. a list item
            current = f"{current}\n{piece}" if current else piece
        elif current and CJK.match(piece[:1]) and CJK.match(current[-1:]):
            current += piece
        else:
            current = f"{current} {piece}" if current else piece
    if current:
        paragraphs.append(current)
    return "\n\n".join(paragraphs) + "\n"


def chinese_share(text: str) -> float:
    """The share of Chinese characters among the letters (an English word counts for its letters)."""
    letters = [c for c in text if c.isalpha()]
    return sum(bool(CJK.match(c)) for c in letters) / len(letters) if letters else 0.0


def mostly_chinese(text: str) -> bool:
    return chinese_share(text) >= 0.5


def catalog_entries(path: Path) -> list[tuple[str, str, str]]:
    """(message id, Subject, explanation) of each entry of a systemd message catalog."""
    if not path.is_file():
        return []
    entries = []
    for block in re.split(r"^-- ", path.read_text(encoding="utf-8"), flags=re.M)[1:]:
        head, _, body = block.partition("\n\n")
        lines = head.splitlines()
        subject = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Subject:")), "")
        if lines and subject and body.strip():
            entries.append((lines[0].strip(), subject, body.strip() + "\n"))
    return entries


def debian_descriptions(size: int, seed: int) -> tuple[list[dict], Counter, str]:
    path = translation_file()
    raw = read_translations(path)
    records = sorted(parse_translations(raw))
    random.Random(seed).shuffle(records)
    taken, skipped = [], Counter()
    summaries, bodies = set(), set()
    for package, summary, body in records:
        if len(taken) >= size:
            break
        first = manpages.normalise(body.split("\n\n")[0])
        key = manpages.normalise(summary)
        if len(body) < MIN_DESCRIPTION:
            skipped["tiny"] += 1
        elif not mostly_chinese(body) or not CJK.search(summary):
            skipped["not mostly Chinese"] += 1
        elif manpages.too_short(summary, manpages.MIN_QUERY_WORDS):
            skipped["summary too short"] += 1
        elif key in summaries:
            skipped["duplicate summary"] += 1
        elif first in bodies:
            skipped["same description as a package taken (one family)"] += 1
        elif key in manpages.normalise(body):
            skipped["summary also in the body"] += 1
        else:
            summaries.add(key)
            bodies.add(first)
            taken.append(
                {
                    "id": f"debian:{package}",
                    "filename": f"{package}.txt",
                    "query": summary,
                    "text": body,
                    "source": f"Debian package description of {package} (Translation-zh_CN)",
                }
            )
    return taken, skipped, f"{path.name} (sha256 {hashlib.sha256(raw.encode()).hexdigest()[:16]})"


def build_chinese(root: Path, size: int = DEBIAN_SIZE, seed: int = SEED) -> None:
    debian, debian_skipped, translation = debian_descriptions(size, seed)
    saved_min = manpages.MIN_CHARS
    manpages.MIN_CHARS = MIN_MAN_CHARS  # Chinese text is denser: a page of 300 characters is not tiny
    try:
        pages, man_skipped = manpages.build(MAN_ROOTS, 1000, seed)
    finally:
        manpages.MIN_CHARS = saved_min
    items = [*debian]
    for page in pages:
        if chinese_share(page.text) < MIN_MAN_CHINESE:
            man_skipped["mostly untranslated"] += 1
            continue
        lang = "zh_TW" if "/zh_TW/" in page.source else "zh_CN"
        items.append(
            {
                "id": f"man:{lang}:{page.id}",
                "filename": f"man-{lang}-{page.filename}",
                "query": page.query,
                "text": page.text,
                "source": page.source,
            }
        )
    catalog_skipped: Counter = Counter()
    subjects: set[str] = set()
    for path in CATALOGS:
        lang = path.suffixes[-2].lstrip(".")
        for message_id, subject, body in catalog_entries(path):
            key = manpages.normalise(subject)
            if key in subjects:
                catalog_skipped["duplicate subject"] += 1
            elif key in manpages.normalise(body):
                catalog_skipped["subject also in the body"] += 1
            elif not mostly_chinese(body):
                catalog_skipped["not mostly Chinese"] += 1
            else:
                subjects.add(key)
                items.append(
                    {
                        "id": f"systemd:{lang}:{message_id}",
                        "filename": f"systemd-{lang}-{message_id}.txt",
                        "query": subject,
                        "text": body,
                        "source": f"{path} {message_id}",
                    }
                )
    random.Random(seed).shuffle(items)  # the committed fixture and --limit take the first ones: a mix
    if len(items) < 50:
        raise SystemExit(f"only {len(items)} usable Chinese documents")
    documents = [(i["filename"], i["text"]) for i in items]
    queries = [
        {"id": i["id"], "query": i["query"], "relevant": [i["filename"]], "lang": "zh", "source": i["source"]} for i in items
    ]
    write_set(
        root,
        "zh",
        documents,
        queries,
        {
            "source": {
                "debian": f"Debian bookworm main, {translation}",
                "man": [str(r) for r in MAN_ROOTS],
                "systemd": [str(p) for p in CATALOGS],
            },
            "query": "Debian: the package's Chinese one-line summary (the document is its long description);"
            " man pages: the NAME summary, the NAME section removed; systemd: the entry's Subject",
            "seed": seed,
            "documents": len(documents),
            "queries": len(queries),
            "debian_documents": len(debian),
            "man_documents": sum(i["id"].startswith("man:") for i in items),
            "systemd_documents": sum(i["id"].startswith("systemd:") for i in items),
            "skipped": {"debian": dict(debian_skipped), "man": dict(man_skipped), "systemd": dict(catalog_skipped)},
            "built": datetime.date.today().isoformat(),
        },
    )
