"""Regenerate the state-machine tables of docs/architecture.md from the code's transition tables:
`python docs/gen_state_machines.py` (`--check` exits 1 when the file is stale).

The tables between `<!-- generated: NAME -->` and `<!-- end: NAME -->` come from
DOCUMENT_TRANSITIONS, JOB_TRANSITIONS and GENERATION_TRANSITIONS in
services/ingest-api/src/sluice_ingest/domain.py: every state with its meaning, and every edge
with the reason written beside it in the code (a state's meaning is written beside the state, in
its enum: domain.StateEnum). The prose around them is written by hand;
tests/deploy/test_docs.py checks that every `A → B` it mentions is an edge of these tables.
"""

from __future__ import annotations

import enum
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "architecture.md"


def machines() -> dict[str, tuple[type[enum.Enum], dict[tuple[object, object], str]]]:
    from sluice_ingest import domain

    return {
        "document": (domain.DocumentStatus, domain.DOCUMENT_TRANSITIONS),
        "job": (domain.JobStatus, domain.JOB_TRANSITIONS),
        "generation": (domain.GenerationState, domain.GENERATION_TRANSITIONS),
    }


def render(name: str, states: type[enum.Enum], table: dict[tuple[object, object], str]) -> str:
    missing = [str(s.value) for s in states if not getattr(s, "meaning", "")]
    if missing:
        raise SystemExit(f"gen_state_machines: the {name} states {missing} have no meaning beside them in domain.py")
    searchable = name == "document"
    lines = ["| State | Meaning | Searchable |", "|---|---|---|"] if searchable else ["| State | Meaning |", "|---|---|"]
    for state in states:
        meaning = state.meaning
        search = "**yes**" if getattr(state, "searchable", False) else "no"
        lines.append(f"| `{state.value}` | {meaning} | {search} |" if searchable else f"| `{state.value}` | {meaning} |")
    lines += ["", "| From | To | Why this edge exists |", "|---|---|---|"]
    for (source, target), why in table.items():
        lines.append(f"| `{source}` | `{target}` | {why} |")
    return "\n".join(lines)


def regenerate(text: str) -> str:
    for name, (states, table) in machines().items():
        pattern = re.compile(rf"(<!-- generated: {name} [^\n]*-->\n)(.*?)(<!-- end: {name} -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"gen_state_machines: no '<!-- generated: {name} … -->' block in {TARGET}")
        body = render(name, states, table)
        text = pattern.sub(lambda m, body=body: m.group(1) + body + "\n" + m.group(3), text)
    return text


def main() -> int:
    current = TARGET.read_text()
    wanted = regenerate(current)
    if "--check" in sys.argv[1:]:
        if wanted != current:
            print(f"{TARGET.relative_to(ROOT)} is stale: run `.venv/bin/python docs/gen_state_machines.py`", file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        TARGET.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
