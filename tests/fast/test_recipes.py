"""The site recipes whose source is a file beside them (onestack-dispatch,
onestack-mkl-cpu-path): Spack fetches it by a file: URL and refuses it if
its sha256 differs from the recipe's, so a changed file needs its new
checksum in package.py (which also changes the spec's hash: the site
rebuilds it)."""

import ast
import hashlib
import subprocess
from pathlib import Path

import pytest

from onestack import host, paths

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


# The MKL library's cache reading, compiled with a probe of its two readings.
CACHE_PROBE = """
#include "{source}"
#include <stdio.h>
int main(void) {{
    long leaf_1d[MAX_LEVELS + 1] = {{0}}, legacy[MAX_LEVELS + 1] = {{0}};
    amd_data_caches(leaf_1d);
    amd_legacy_caches(legacy);
    printf("%ld %ld\\n", leaf_1d[0] ? leaf_1d[1] : -1, legacy[0] ? legacy[1] : -1);
    return 0;
}}
"""


def test_the_mkl_library_reads_the_first_data_cache_where_a_guest_hides_leaf_0x8000001d(tmp_path):
    """Where a hypervisor hides CPUID leaf 0x8000001D (no topoext), the
    library read no cache, and MKL's kernels that need one computed QE's
    lda+U case wrong on an AMD CPU: it reads AMD's older leaf 0x80000005
    then, which must give what leaf 0x8000001D gives, and glibc."""
    source = RECIPES / "onestack_mkl_cpu_path" / "onestack-mkl-cpu-path.c"
    (tmp_path / "probe.c").write_text(CACHE_PROBE.format(source=source))
    build = subprocess.run(
        ["gcc", "-O1", "-Wall", "-Werror", "-o", tmp_path / "probe", tmp_path / "probe.c", "-ldl"],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    leaf_1d, legacy = map(
        int, subprocess.run([tmp_path / "probe"], capture_output=True, text=True, check=True).stdout.split()
    )
    if host.vendor() != "AuthenticAMD":
        pytest.skip(
            f"this host's CPU is {host.vendor()}'s: AMD's cache leaves are not its to read "
            f"(leaf 0x8000001D: {leaf_1d}, 0x80000005: {legacy})"
        )
    l1 = int(subprocess.run(["getconf", "LEVEL1_DCACHE_SIZE"], capture_output=True, text=True, check=True).stdout)
    assert legacy == l1, f"leaf 0x80000005's first data cache {legacy} bytes, glibc's {l1}"
    assert leaf_1d in (legacy, -1), f"leaf 0x8000001D's first data cache {leaf_1d} bytes, 0x80000005's {legacy}"
