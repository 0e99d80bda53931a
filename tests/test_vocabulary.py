"""One vocabulary: error reasons come from one registry, resource names from one module."""

from __future__ import annotations

import re
from pathlib import Path

from sluice_common.names import document_id_of, document_name, parse_document_name
from sluice_common.reasons import Reason

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [
    p
    for p in [*ROOT.glob("services/*/src/**/*.py"), *ROOT.glob("libs/common/src/**/*.py"), *ROOT.glob("cli/src/**/*.py")]
    if "migrations" not in p.parts
]


def test_no_error_reason_is_written_as_a_string_literal():
    literal = re.compile(r'(?:reason=|reason ==|default_reason =)\s*"[A-Z][A-Z0-9_]*"')
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in SOURCES for m in literal.finditer(p.read_text())]
    assert found == [], "use sluice_common.reasons.Reason:\n" + "\n".join(found)


def test_every_reason_used_is_registered_and_upper_snake_case():
    used = set()
    for path in SOURCES:
        used |= set(re.findall(r"Reason\.([A-Z][A-Z0-9_]+)", path.read_text()))
    assert used, "the scan found nothing"
    assert used <= set(Reason.__members__), sorted(used - set(Reason.__members__))
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", r.value) for r in Reason)


def test_document_names_are_built_and_parsed_in_one_module():
    name = document_name("docs", "0b6c0e9a-1c8b-4d7e-9a59-3f1f2f0a9e11")
    assert parse_document_name(name) == ("docs", "0b6c0e9a-1c8b-4d7e-9a59-3f1f2f0a9e11")
    assert document_id_of(name) == document_id_of("0b6c0e9a-1c8b-4d7e-9a59-3f1f2f0a9e11")
    assert parse_document_name("collections/docs/other/x") is None
    builders = [p for p in SOURCES if re.search(r'f"collections/\{', p.read_text()) and p.name != "names.py"]
    assert builders == []
