"""The Spack side: site recipes pass Spack's audit, every flavor concretizes,
and the recipes' rules hold (Netlib reference BLAS refused)."""

import shutil
import subprocess

import pytest

from conftest import REPO
from onestack import flavors, paths

SITE_PACKAGES = sorted(
    p.name.replace("_", "-") for p in (REPO / "packages" / "spack_repo" / "onestack" / "packages").iterdir()
    if (p / "package.py").is_file()
)


def spack_in(env_dir, *args):
    cmd = [str(paths.spack_root() / "bin" / "spack"), "-e", str(env_dir), *args]
    return subprocess.run(cmd, text=True, capture_output=True)


@pytest.fixture(scope="module")
def scratch_env(tmp_path_factory):
    """A copy of the site environment whose flavor list can be changed freely."""
    env_dir = tmp_path_factory.mktemp("env")
    shutil.copy(REPO / "spack.yaml", env_dir)
    for folder in ("packages", "modulefiles"):
        (env_dir / folder).symlink_to(REPO / folder)
    return env_dir


def test_site_recipes_pass_spack_audit():
    proc = subprocess.run([str(paths.spack_root() / "bin" / "spack"), "-e", str(REPO), "audit", "packages",
                           *SITE_PACKAGES], text=True, capture_output=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "issues found" not in proc.stdout, proc.stdout


def test_every_flavor_concretizes(scratch_env):
    every = flavors.load()
    flavors.render(every, scratch_env / ".generated")
    proc = spack_in(scratch_env, "concretize", "-f")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for flavor in every:
        assert flavor.app.package in proc.stdout


def test_netlib_reference_blas_is_refused(scratch_env):
    (scratch_env / ".generated").mkdir(exist_ok=True)
    (scratch_env / ".generated" / "flavors.yaml").write_text(
        "definitions:\n- runtimes: []\n- flavors: ['quantum-espresso@6.7.0 ~openmp ^[virtuals=blas,lapack] netlib-lapack']\n")
    proc = spack_in(scratch_env, "concretize", "-f")
    assert proc.returncode != 0
    assert "Netlib reference" in proc.stdout + proc.stderr
