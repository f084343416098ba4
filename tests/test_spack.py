"""The Spack side: site recipes pass Spack's audit, every flavor concretizes,
and the recipes' rules hold (Netlib reference BLAS refused)."""

import ast
import json
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, onestack

from onestack import data, paths, spack, stack, status

SITE_PACKAGES = sorted(
    p.name.replace("_", "-")
    for p in (REPO / "packages" / "spack_repo" / "onestack" / "packages").iterdir()
    if (p / "package.py").is_file()
)


def test_site_recipes_pass_spack_audit():
    proc = subprocess.run(
        spack.command("audit", "packages", *SITE_PACKAGES),
        text=True,
        capture_output=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "issues found" not in proc.stdout, proc.stdout


def _classes(tree) -> set:
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


# What the stack takes from the OS, never builds (setup/externals.yaml): its
# site recipes add detection only.
EXTERNAL = set(data.load(REPO / "setup" / "externals.yaml", "externals")["libraries"])


def _site_recipe(recipe: str):
    return ast.parse(
        (
            REPO / "packages" / "spack_repo" / "onestack" / "packages" / recipe.replace("-", "_") / "package.py"
        ).read_text()
    )


def _builtin_modules(site) -> list:
    """The builtin recipes' modules a site recipe imports from."""
    return [
        n.module
        for n in site.body
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("spack_repo.builtin.packages.")
    ]


# The site recipes that extend a builtin one (the others have no builders to lose).
EXTENDING = [r for r in SITE_PACKAGES if r not in EXTERNAL and _builtin_modules(_site_recipe(r))]


def test_site_recipes_extend_builtin_ones():
    """The builders test below checks some recipe: one that imports from
    spack_repo.builtin.packages.*."""
    assert EXTENDING, "no site recipe imports from spack_repo.builtin.packages.*: the builders test checks none"


@pytest.mark.parametrize("recipe", EXTENDING)
def test_a_site_recipe_that_extends_a_builtin_one_keeps_its_builders(recipe):
    """Spack takes a package's builder (CMakeBuilder, GenericBuilder, with
    the builtin recipe's cmake_args or install) from the package's own
    module: a site recipe that subclasses a builtin package without importing
    its builders builds it as a bare CMake project (GROMACS once did: no MPI,
    no GMX_SIMD, the build host's SIMD instead)."""
    site = _site_recipe(recipe)
    imported = {a.asname or a.name for n in site.body if isinstance(n, ast.ImportFrom) for a in n.names}
    for module in _builtin_modules(site):
        source = paths.spack_packages() / "repos" / Path(*module.split(".")).with_suffix(".py")
        builders = {c for c in _classes(ast.parse(source.read_text())) if c.endswith("Builder")}
        missing = {b for b in builders if b not in imported and b not in _classes(site)}
        assert not missing, f"{recipe}: import {', '.join(sorted(missing))} from {module} (after spack.package)"


def test_every_flavor_concretizes():
    """Each cell of the matrix this run solves on its own (status.solved_here:
    with the ci_build lists, a cover of the matrix), those that cannot be
    built here too: an absent compiler (Intel, NVHPC) through its declared
    external."""
    every = status.solved_here(list(stack.load().flavors))
    cells = status.concretize_cells(every)
    failed = {f.module_name: cells[f.spack_spec]["error"] for f in every if not cells[f.spack_spec]["ok"]}
    assert not failed, failed
    assert status.declared_compilers(every), "no absent compiler: the declared-compiler path went untested"


QE = "quantum-espresso@6.7.0 ~openmp"
# One wrong choice per kind of rule the site recipes declare, each solved to
# its refusal (seconds each on 2 cores): a conflict (the Netlib reference
# BLAS in a production flavor, the seeds' first rule), a requirement on the
# MPI family of MKL's BLACS, and one on the MPI of the OS's ScaLAPACK. The
# other rules of packages/ are declared the same way, in the same recipes.
# And a package the site does not build (spack.yaml's `buildable` list) nor
# has as an external, here an MPI: refused naming it (solved a second time,
# without the static analysis that leaves such packages out, half a minute).
REFUSED = {
    "hpl-netlib-reference-blas": ("hpcc@1.5.0 ^[virtuals=blas] netlib-lapack", "refused for production HPL"),
    "an-mpi-the-site-does-not-build": ("hpcc@1.5.0 ^[virtuals=mpi] mpitrampoline", "Cannot build mpitrampoline"),
    "mkl-openmpi-blacs-with-mpich": (
        f"{QE} ^[virtuals=mpi] mpich ^[virtuals=blas,lapack,scalapack,fftw-api] intel-oneapi-mkl mpi_family=openmpi",
        "needs the BLACS of the mpich family",
    ),
    "openmpi-with-the-mpich-scalapack": (
        f"{QE} ^[virtuals=mpi] openmpi ^[virtuals=blas,lapack] openblas "
        "^[virtuals=scalapack] netlib-scalapack mpi_family=mpich",
        "must be the OS's Open MPI build",
    ),
}


@pytest.fixture(scope="module")
def refusals():
    """The concretizer's answer to each wrong choice, solved side by side in
    one Spack process. reuse: false tests the recipe's rule itself, not a
    reused install (HPL's Netlib baseline, built +netlib_reference, satisfies
    a spec that does not say)."""
    specs = [spec for spec, _ in REFUSED.values()]
    return spack.query("concretize_each", json.dumps(specs), json.dumps({"concretizer": {"reuse": False}}))


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_wrong_library_choice_is_refused_with_its_reason(refusals, case):
    spec, reason = REFUSED[case]
    outcome = refusals[spec]
    assert not outcome["ok"], f"{spec} concretized"
    assert reason in outcome["error"], outcome["error"]


def test_open_mpi_flavors_get_open_mpis_wrappers(tmp_path):
    """Debian's plain mpif90 is MPICH's (pinned): an Open MPI flavor must be
    handed mpif90.openmpi, or it would silently be built against MPICH."""
    code = (
        "import spack.concretize, spack.spec\n"
        "s = spack.concretize.concretize_one(spack.spec.Spec('openmpi'))\n"
        "s.package.setup_dependent_package(None, s)\n"
        "print('WRAPPERS', s.external, s.mpicc, s.mpifc)"
    )
    script = tmp_path / "wrappers.py"
    script.write_text(code)
    proc = subprocess.run(
        spack.command("python", str(script)),
        text=True,
        capture_output=True,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(out for out in proc.stdout.splitlines() if out.startswith("WRAPPERS"))
    assert line == "WRAPPERS True /usr/bin/mpicc.openmpi /usr/bin/mpif90.openmpi", line


def test_the_package_repos_are_indexed_ahead_of_the_site_set_up():
    """`bin/onestack spack-indexes`, which tests/run.sh runs beside the fast
    tier: each index of each repo of the environment (spack.yaml `repos`) is
    in Spack's cache, no older than that repo's recipes (Spack brings an
    older one up to date)."""
    proc = onestack("spack-indexes", check=True)
    assert "package repos indexed (providers" in proc.stdout, proc.stdout
    repos = {
        "onestack": REPO / "packages" / "spack_repo" / "onestack",
        "builtin": paths.spack_packages() / "repos" / "spack_repo" / "builtin",
    }
    for repo, folder in repos.items():
        newest_recipe = max(f.stat().st_mtime for f in (folder / "packages").glob("*/package.py"))
        for index in spack.REPO_INDEXES:
            [kept] = (paths.spack_misc_cache() / index).glob(f"{repo}-*index.json")
            assert kept.stat().st_mtime >= newest_recipe, f"{kept} is older than the recipes of {folder}"
