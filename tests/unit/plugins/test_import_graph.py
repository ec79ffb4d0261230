"""The shared code's imports form layers: no module of module_utils or plugin_utils imports,
directly or through others, a module that imports it back.

The graph is read from the source with `ast` (every import statement, at module level, inside
functions and under `if TYPE_CHECKING:` alike: a cycle there still ties the layers together),
so it needs nothing importable and catches the imports AnsiballZ would follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
COLLECTION = "ansible_collections.berth.fleet"
ROOTS = ("plugins/module_utils", "plugins/plugin_utils")


def module_name(path: Path, repo: Path = REPO) -> str:
    parts = list(path.relative_to(repo).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([COLLECTION, *parts])


def collection_modules() -> dict[str, Path]:
    """Every module under ROOTS, by its dotted name; a package's name stands for its __init__."""
    return {module_name(path): path
            for root in ROOTS for path in sorted((REPO / root).rglob("*.py"))}


def imported_modules(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The collection modules under ROOTS that `path` imports anywhere in its body.

    `from package import name` counts as an import of package.name when that is a module,
    of the package otherwise.
    """
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # A relative import counts from the importing module's own package.
                package = name.split(".")
                drop = node.level - 1 if is_package else node.level
                base = ".".join(package[:len(package) - drop] if drop else package)
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                targets.add(candidate if candidate in known else source)
    return {target for target in targets if target in known and target != name}


def import_graph() -> dict[str, set[str]]:
    known = collection_modules()
    return {name: imported_modules(name, path, known) for name, path in known.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None when the graph is acyclic."""
    unvisited, in_progress, done = 0, 1, 2
    state = dict.fromkeys(graph, unvisited)
    for start in sorted(graph):
        if state[start] != unvisited:
            continue
        # An explicit stack (node, its remaining successors): the graph may be deep.
        path = [start]
        stack = [iter(sorted(graph[start]))]
        state[start] = in_progress
        while stack:
            successor = next(stack[-1], None)
            if successor is None:
                state[path.pop()] = done
                stack.pop()
            elif state[successor] == in_progress:
                return path[path.index(successor):] + [successor]
            elif state[successor] == unvisited:
                state[successor] = in_progress
                path.append(successor)
                stack.append(iter(sorted(graph[successor])))
    return None


def short(name: str) -> str:
    return name.removeprefix(COLLECTION + ".plugins.")


def test_graph_sees_the_scheduler():
    """The reader finds imports at all (an empty graph would be trivially acyclic)."""
    graph = import_graph()
    driver = f"{COLLECTION}.plugins.module_utils.scheduler.driver"
    assert f"{COLLECTION}.plugins.module_utils.scheduler.registry" in graph[driver]
    assert sum(len(targets) for targets in graph.values()) > 100


@pytest.mark.parametrize("graph, cycle", [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"d2"}, "d2": {"d"}}, ["d", "d2", "d"]),
], ids=["chain", "triangle", "diamond-then-loop"])
def test_find_cycle(graph, cycle):
    assert find_cycle(graph) == cycle


def test_relative_imports_resolve(tmp_path):
    """`from . import x` and `from ..top import y` name the modules they reach."""
    package = tmp_path / "plugins" / "module_utils" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from .a import thing\n")
    (package / "a.py").write_text("from . import b\nfrom ..top import value\n")
    (package / "b.py").write_text("")
    (tmp_path / "plugins" / "module_utils" / "top.py").write_text("")
    known = {module_name(path, tmp_path): path
             for path in (tmp_path / "plugins" / "module_utils").rglob("*.py")}
    prefix = f"{COLLECTION}.plugins.module_utils"
    assert imported_modules(f"{prefix}.pkg.a", package / "a.py", known) == {
        f"{prefix}.pkg.b", f"{prefix}.top"}
    assert imported_modules(f"{prefix}.pkg", package / "__init__.py", known) == {
        f"{prefix}.pkg.a"}


def test_shared_code_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(short(name) for name in cycle)
