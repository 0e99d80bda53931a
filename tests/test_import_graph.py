"""No import cycle among Sluice's own modules, counting what import-linter does not see: imports
made inside functions and modules loaded by name with `importlib.import_module("...")`
(docs/contributing.md, "Layout"). A cycle hidden behind a deferred import is two modules that
want a third: the protocol and its errors in one, each backend in its own, the registry on top.

Imports under `if TYPE_CHECKING:` are not counted: they never run, and annotations between
modules that use each other's types are no cycle of behaviour.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Every package of ours with a src/ layout; generated code and migrations (run by Alembic, never
# imported by module name) are left out.
SOURCE_ROOTS = [
    "services/ingest-api/src",
    "services/worker/src",
    "services/search/src",
    "services/gateway/src",
    "libs/common/src",
    "cli/src",
    "clients/python/src",
    "clients/langchain/src",
    "clients/llamaindex/src",
]
SKIPPED_PARTS = {"protos", "migrations", "node_modules"}


def modules(root: Path) -> Iterator[tuple[str, Path, bool]]:
    """(dotted name, file, is a package's __init__) for every module under `root`."""
    for path in sorted(root.rglob("*.py")):
        if SKIPPED_PARTS.intersection(path.relative_to(root).parts) or path.name.endswith("_pb2.py"):
            continue
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path, path.name == "__init__.py"


def _absolute(importer: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute name of `from {'.' * level}{module} import …` written in `importer`."""
    if not level:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def _type_checking_only(tree: ast.AST) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                for inner in node.body:
                    hidden.update(id(n) for n in ast.walk(inner))
    return hidden


def imported_names(name: str, source: str, is_package: bool) -> Iterator[str]:
    """Every module name `source` may import, wherever the import statement stands."""
    tree = ast.parse(source)
    hidden = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, is_package, node.level, node.module)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            target = node.args[0].value
            if called == "import_module" and isinstance(target, str):
                level = len(target) - len(target.lstrip("."))
                yield _absolute(name, is_package, level, target.lstrip(".") or None)


def import_graph(roots: Iterable[Path]) -> dict[str, set[str]]:
    """Module → the modules of ours it imports. An import of a module's own ancestor package is
    left out: Python has run that package's __init__ before the module anyway."""
    found = {name: (path, is_package) for root in roots for name, path, is_package in modules(root)}
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in found.items():
        graph[name] = {
            target
            for target in imported_names(name, path.read_text(encoding="utf-8"), is_package)
            if target in found and target != name and not name.startswith(target + ".")
        }
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def describe(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    return "\n".join(f"  {m} -> {', '.join(sorted(graph[m] & members))}" for m in component)


def test_no_module_of_ours_is_in_an_import_cycle():
    graph = import_graph(ROOT / root for root in SOURCE_ROOTS)
    assert len(graph) > 200, "the walk found too few modules: has the layout changed?"
    found = cycles(graph)
    assert not found, "import cycles (deferred and importlib imports count):\n" + "\n\n".join(describe(graph, c) for c in found)


def test_the_check_sees_cycles_hidden_in_functions_and_behind_importlib(tmp_path):
    """The check itself: a cycle made by a function-level import, one made by import_module, and
    none made by a TYPE_CHECKING import."""
    package = tmp_path / "pkg"
    (package / "sources").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sources" / "__init__.py").write_text("")
    (package / "sources" / "kinds.py").write_text("def reader():\n    from .s3 import S3Reader\n    return S3Reader\n")
    (package / "sources" / "s3.py").write_text("from .kinds import reader\nclass S3Reader: ...\n")
    (package / "local.py").write_text("import importlib\ndef load():\n    return importlib.import_module('pkg.onnx')\n")
    (package / "onnx.py").write_text("from pkg import local\n")
    (package / "types.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .client import Client\n")
    (package / "client.py").write_text("from .types import *\n")
    found = cycles(import_graph([tmp_path]))
    assert sorted(found) == [["pkg.local", "pkg.onnx"], ["pkg.sources.kinds", "pkg.sources.s3"]]
