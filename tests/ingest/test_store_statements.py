"""Every SQL statement of a store is named in one place per area, and its status and kind values
come from the enums (issue 37; store/literals.py): no store function carries SQL of its own, no
store module types a status, state, kind, role or outcome literal by hand, and each literal
table (the store's, the sources' runs', the webhooks') holds exactly its enums' members."""

from __future__ import annotations

import ast
import enum
import re
from pathlib import Path

from psycopg import sql
from sluice_ingest import domain, store
from sluice_ingest.sources import domain as sources_domain
from sluice_ingest.sources import store as sources_store
from sluice_ingest.store import literals, queue_sql
from sluice_ingest.webhooks import domain as webhooks_domain
from sluice_ingest.webhooks import store as webhooks_store

STORE_DIR = Path(store.__file__).parent
# The stores of every area: the documents' and jobs' (store/), the sources' and the webhooks'.
AREA_STORES = [Path(sources_store.__file__), Path(webhooks_store.__file__)]
MODULES = sorted(STORE_DIR.glob("*.py")) + AREA_STORES
# Each area store's own literal table, and the enums it must hold: every state the area's
# statements name.
AREA_TABLES = {
    "sources": (sources_store.RUN_LITERAL_ENUMS, sources_store.RUN_LITERALS, {sources_domain.RunState, sources_domain.RunEvent}),
    "webhooks": (
        webhooks_store.WEBHOOK_LITERAL_ENUMS,
        webhooks_store.WEBHOOK_LITERALS,
        {webhooks_domain.DeliveryState, webhooks_domain.SubscriptionState},
    ),
}
LITERAL_TABLE = Path(literals.__file__)

# A statement, as opposed to a message or a fragment: its keyword first, or its shape anywhere.
STATEMENT = re.compile(
    r"^\s*(?:SELECT|INSERT|UPDATE|DELETE|WITH|SET|RESET|COPY)\b"
    r"|\bSELECT\b.*\bFROM\b|\bINSERT\s+INTO\b|\bDELETE\s+FROM\b|\bUPDATE\s+\w+(?:\s+\w+)?\s+SET\b",
    re.S,
)
# A query parameter: a string that carries one is SQL.
PARAMETER = re.compile(r"%s|%\(\w+\)s")

DOMAIN_ENUMS = [
    value
    for value in vars(domain).values()
    if isinstance(value, type) and issubclass(value, enum.StrEnum) and value.__module__ == domain.__name__ and len(value)
]
AREA_ENUMS = [kind for _, _, kinds in AREA_TABLES.values() for kind in kinds]
ENUM_VALUES = {member.value for kind in [*DOMAIN_ENUMS, *AREA_ENUMS] for member in kind}
QUOTED = re.compile(r"'([A-Z_]+)'")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstrings' nodes (a module's, a class's, a function's)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def _strings_in_functions(path: Path) -> list[tuple[int, str]]:
    """Every string constant inside a function body of the module (f-strings' parts too), but docstrings."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = _docstrings(tree)
    found = []
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for statement in function.body:
                for node in ast.walk(statement):
                    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                        found.append((node.lineno, node.value))
    return found


def _all_strings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_the_scans_see_the_store():
    assert len(MODULES) >= 17 and LITERAL_TABLE in MODULES and all(path in MODULES for path in AREA_STORES)
    assert STATEMENT.search("SELECT 1 FROM documents") and STATEMENT.search(" UPDATE chunks n SET text = %s")
    assert not STATEMENT.search("the document was deleted while its content was being read")
    assert QUOTED.findall("WHERE status = 'READY' AND kind = 'EMBED'") == ["READY", "EMBED"]
    assert {"READY", "RUNNING", "ACTIVE", "EMBED", "CURRENT", "DELETED", "ONLY"} <= ENUM_VALUES
    assert {"BLOCKED_MASS_DELETE", "PROGRESS", "DELIVERED", "DISABLED"} <= ENUM_VALUES


def test_no_store_function_carries_sql():
    """SQL lives in module-level named statements (or named fragments and the named functions
    that build a statement from them), never in a string inside a function."""
    inline = [
        f"{path.relative_to(STORE_DIR.parent)}:{line}: {text.strip()[:80]!r}"
        for path in MODULES
        for line, text in _strings_in_functions(path)
        if STATEMENT.search(text) or PARAMETER.search(text)
    ]
    assert inline == [], "SQL written inside a store function; name it at the top of its module:\n" + "\n".join(inline)


def test_no_store_module_types_an_enum_literal():
    """A status, state, kind, role or outcome is named by the literal table (`{doc_ready}`,
    `{kind_embed}`…), never typed as `'READY'`; only the table's own module may spell one."""
    typed = [
        f"{path.relative_to(STORE_DIR.parent)}:{line}: '{value}'"
        for path in MODULES
        if path != LITERAL_TABLE
        for line, text in _all_strings(path)
        for value in QUOTED.findall(text)
        if value in ENUM_VALUES
    ]
    assert typed == [], "an enum's value typed by hand in a store module; use store/literals.py:\n" + "\n".join(typed)


def test_the_literal_table_is_the_enums():
    # Every enum of the domain has its entries, under one prefix each.
    assert set(literals.LITERAL_ENUMS.values()) == set(DOMAIN_ENUMS)
    _check_table(literals.LITERAL_ENUMS, literals.LITERALS)


def test_each_area_table_is_its_enums():
    """The sources' and the webhooks' stores name their states from tables of their own, built
    the same way (`literal_table`); composed with the store's table, no name may clash."""
    for area, (enums, table, kinds) in AREA_TABLES.items():
        assert set(enums.values()) == kinds, area
        _check_table(enums, table)
        assert not set(table) & set(literals.LITERALS), area
    first, second = (set(table) for _, table, _ in AREA_TABLES.values())
    assert not first & second


def _check_table(enums: dict[str, type[enum.StrEnum]], table: dict[str, sql.Composable]) -> None:
    assert len(set(enums)) == len(enums)
    expected = {}
    for prefix, kind in enums.items():
        for member in kind:
            expected[f"{prefix}_{member.value.lower()}"] = (kind, member)
    # Every member has an entry, and every entry is a member of its enum, as a SQL literal of its value.
    assert set(table) == set(expected)
    for name, value in table.items():
        kind, member = expected[name]
        assert value == sql.Literal(str(member)), name
        assert kind(value.as_string(None).strip("'")) is member, name


def test_the_queue_reads_the_same_table():
    for name, value in literals.LITERALS.items():
        assert queue_sql.QUEUE_LITERALS[name] is value, name
    # The claim statements' short names are entries of the table, not values of their own.
    for short, entry in {"pending": "job_pending", "running": "job_running", "active": "gen_active"}.items():
        assert queue_sql.QUEUE_LITERALS[short] is literals.LITERALS[entry]
    extra = set(queue_sql.QUEUE_LITERALS) - set(literals.LITERALS)
    assert extra == {"pending", "running", "active", "kind_policy", "held_by_lease", "lazy_renewal"}
