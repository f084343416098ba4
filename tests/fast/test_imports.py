"""Imports run one way with the data (environments, then Spack, installs,
modules and images, the tests and the report): the import graph of
onestack/, function-level imports included (one that only hides a cycle is
still a cycle), has no cycle."""

import ast
from pathlib import Path
from typing import Dict, List, Set

from onestack import paths

PACKAGE = paths.REPO / "onestack"


def _modules() -> Dict[str, Path]:
    found = {}
    for file in PACKAGE.rglob("*.py"):
        parts = file.relative_to(paths.REPO).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return found


def _imports(file: Path, modules: Dict[str, Path]) -> Set[str]:
    """The onestack modules a file imports, anywhere in it."""
    named = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            named |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named |= {
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names
            }
    return {n for n in named if n in modules}


def _cycle(graph: Dict[str, Set[str]]) -> List[str]:
    """One cycle of the graph as the modules along it, or []."""
    done, path = set(), []

    def visit(name: str) -> List[str]:
        if name in path:
            return path[path.index(name) :] + [name]
        if name in done:
            return []
        path.append(name)
        for dep in sorted(graph[name]):
            found = visit(dep)
            if found:
                return found
        path.pop()
        done.add(name)
        return []

    for name in sorted(graph):
        found = visit(name)
        if found:
            return found
    return []


def test_onestack_imports_have_no_cycle():
    modules = _modules()
    graph = {name: _imports(file, modules) - {name} for name, file in modules.items()}
    cycle = _cycle(graph)
    assert not cycle, "an import cycle: " + " -> ".join(cycle)
