"""Imports run one way with the data (environments, then Spack, installs,
modules and images, the tests and the report): each package of onestack/
imports only from its own layer or lower ones (LAYERS), and the import
graph, function-level imports included (one that only hides a cycle is
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


# Lowest first. The test problems sit above the modules they run through
# and below images (an image carries one as its %test), the virtual cluster
# beside them (the report measures on it); the command line above everything.
LAYERS = [
    {"errors", "paths", "files", "commands", "data", "render", "host", "apt_sources"},
    {"stack"},
    {"spack"},
    {"modules"},
    {"problems", "cluster"},
    {"images"},
    {"status", "community", "report", "ci"},
    {"validate", "cli", "__main__"},
]


def _package(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def test_onestack_imports_run_one_way():
    modules = _modules()
    rank = {package: i for i, layer in enumerate(LAYERS) for package in layer}
    packages = {_package(name) for name in modules if name != "onestack"}
    assert packages <= set(rank), f"packages in no layer of LAYERS: {sorted(packages - set(rank))}"
    upward = [
        f"{name} imports {dep}"
        for name, file in modules.items()
        if name != "onestack"
        for dep in _imports(file, modules)
        if dep != "onestack" and rank[_package(dep)] > rank[_package(name)]
    ]
    assert not upward, "imports against the data's direction: " + "; ".join(sorted(upward))
