"""The site recipes whose source is a file beside them (onestack-dispatch,
onestack-mkl-cpu-path): Spack fetches it by a file: URL and refuses it if
its sha256 differs from the recipe's, so a changed file needs its new
checksum in package.py (which also changes the spec's hash: the site
rebuilds it)."""

import ast
import hashlib
from pathlib import Path

import pytest

from onestack import paths

RECIPES = paths.REPO / "packages" / "spack_repo" / "onestack" / "packages"


def _constant(tree: ast.Module, name: str):
    return next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    )


def _declared_sha256(tree: ast.Module) -> str:
    calls = [
        node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "version"
    ]
    return next(ast.literal_eval(k.value) for call in calls for k in call.keywords if k.arg == "sha256")


def _recipes_with_a_local_source():
    for recipe in sorted(RECIPES.glob("*/package.py")):
        if "as_uri()" in recipe.read_text():
            yield recipe


@pytest.mark.parametrize("recipe", list(_recipes_with_a_local_source()), ids=lambda p: p.parent.name)
def test_the_recipe_checksum_is_its_source_files(recipe: Path):
    tree = ast.parse(recipe.read_text())
    source = recipe.parent / _constant(tree, "SOURCE")
    actual = hashlib.sha256(source.read_bytes()).hexdigest()
    assert _declared_sha256(tree) == actual, f'{recipe}: set sha256="{actual}" ({source.name} changed)'


def test_both_recipes_with_a_local_source_are_checked():
    assert {p.parent.name for p in _recipes_with_a_local_source()} == {"onestack_dispatch", "onestack_mkl_cpu_path"}
