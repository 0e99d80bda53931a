"""The documents of a chaos run: real fixtures plus generated text, Markdown and HTML variants.

Every generated document is unique (its number and seeded words are in it), so none is
deduplicated against another; sizes range from a few hundred bytes to a few hundred KB so
uploads stream over many messages. Two malformed fixtures are in the mix on purpose: they must
end FAILED with a message, not stay stuck.
"""

from __future__ import annotations

import hashlib
import html
import random
from dataclasses import dataclass, field
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "documents"
# Quick to parse: the mix of a short run. The long run adds PDF, DOCX and PPTX.
TEXT_FIXTURES = [
    "chinese.md",
    "operations.md",
    "retrieval.html",
    "minutes-latin1.txt",
    "minutes-gb18030.txt",
    "notes-utf16.txt",
    "overview-shift_jis.txt",
    "status.eml",
]
OFFICE_FIXTURES = ["report.pdf", "handbook.docx", "architecture.pptx"]
MALFORMED_FIXTURES = ["malformed/blank.txt", "malformed/random.pdf"]
MIME = {
    ".md": "text/markdown",
    ".txt": "text/plain",
    ".html": "text/html",
    ".eml": "message/rfc822",
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}

# Every generated document carries this word, so keyword polls during the run find them.
MARKER = "floodgate"
WORDS = [
    "sluice",
    "gate",
    "tide",
    "lock",
    "keeper",
    "canal",
    "barge",
    "weir",
    "spillway",
    "reservoir",
    "culvert",
    "channel",
    "lever",
    "winch",
    "harbour",
    "ledger",
    "water",
    "level",
    "flow",
    "meter",
    "silt",
    "dredge",
    "towpath",
    "paddle",
    "basin",
    "aqueduct",
    "embankment",
    "pump",
    "station",
    "overflow",
    "inlet",
    "outlet",
    "chamber",
    "valve",
    "sensor",
    "alarm",
    "shift",
    "report",
    "inspection",
]


@dataclass
class Document:
    collection: str
    filename: str
    content: bytes
    mime_type: str
    interrupted: bool = False  # its upload is killed mid-stream on purpose
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        self.sha256 = hashlib.sha256(self.content).hexdigest()

    @property
    def size(self) -> int:
        return len(self.content)


def _paragraphs(rng: random.Random, number: int, count: int) -> list[str]:
    out = []
    for p in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(20, 90))]
        words.insert(rng.randrange(len(words)), f"{MARKER}")
        words.insert(rng.randrange(len(words)), f"doc{number}p{p}")
        out.append(" ".join(words).capitalize() + ".")
    return out


def generated(rng: random.Random, number: int) -> tuple[str, bytes, str]:
    kind = rng.choice(["txt", "md", "html"])
    # Mostly small, some large: a large one streams in many upload messages.
    count = rng.choice([2, 4, 8, 16]) if rng.random() < 0.85 else rng.randint(150, 400)
    paragraphs = _paragraphs(rng, number, count)
    title = f"Lock report {number}"
    if kind == "txt":
        text = title + "\n\n" + "\n\n".join(paragraphs) + "\n"
    elif kind == "md":
        parts = [f"# {title}"]
        for i, paragraph in enumerate(paragraphs):
            if i % 5 == 0:
                parts.append(f"## Section {i // 5 + 1}")
            parts.append(paragraph if i % 7 else "- " + paragraph)
        text = "\n\n".join(parts) + "\n"
    else:
        body = "".join(
            f"<h2>Section {i // 5 + 1}</h2>" * (i % 5 == 0) + f"<p>{html.escape(p)}</p>" for i, p in enumerate(paragraphs)
        )
        text = f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>\n"
    return f"lock-report-{number}.{kind}", text.encode(), MIME["." + kind]


def build(rng: random.Random, count: int, collections: list[str], *, office: bool, interrupted: int) -> list[Document]:
    """`count` documents spread over `collections` (plus `interrupted` ones whose upload is killed)."""
    documents: list[Document] = []
    names = TEXT_FIXTURES + (OFFICE_FIXTURES if office else []) + MALFORMED_FIXTURES
    for i, name in enumerate(names[:count]):
        path = FIXTURES / name
        documents.append(Document(collections[i % len(collections)], path.name, path.read_bytes(), MIME[path.suffix]))
    number = 0
    while len(documents) < count:
        filename, content, mime = generated(rng, number)
        documents.append(Document(collections[number % len(collections)], filename, content, mime))
        number += 1
    for i in range(interrupted):
        # Large enough that half of it is several messages; never fully sent.
        filename, content, mime = generated(rng, 100_000 + i)
        content += ("\n\n".join(_paragraphs(rng, 100_000 + i, 60)) + "\n").encode()
        documents.append(Document(collections[i % len(collections)], "interrupted-" + filename, content, mime, interrupted=True))
    rng.shuffle(documents)
    return documents
