"""The published Lmod tree as users meet it: it passes Lmod's own linter and
every flavor loads in a clean shell with no prior loads."""

import subprocess

import pytest

from onestack import lmod, publish


def test_tree_passes_check_module_tree_syntax(live_release):
    dirs = [live_release / "flavors", *sorted((live_release / "spack").glob("*/Core"))]
    for directory in dirs:
        proc = subprocess.run([str(lmod.root() / "libexec" / "check_module_tree_syntax"), str(directory)],
                              text=True, capture_output=True)
        assert proc.returncode == 0 and "No errors found" in proc.stdout, proc.stdout + proc.stderr


def test_every_published_flavor_loads_in_a_clean_shell(init_script, published_flavors):
    assert published_flavors, "the live release lists no flavors"
    for module in published_flavors:
        proc = lmod.clean_shell(init_script, f"module load {module}\nmodule -t list 2>&1\ncommand -v pw.x")
        assert proc.returncode == 0, proc.stderr
        assert module in proc.stdout + proc.stderr
        assert "/quantum-espresso-" in proc.stdout, proc.stdout


def test_where_prints_the_init_script(init_script):
    assert publish.init_script().resolve() == init_script.resolve()
