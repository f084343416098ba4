"""Publishing is atomic and reversible: a new release is made beside the live
one and switched in by one rename; a publish killed half-way leaves the live
tree loadable; one command rolls back. Runs against a scratch module root
(ONESTACK_MODULES), never the site's live tree."""

import os
import signal
import subprocess
import time

import pytest
from conftest import REPO, onestack

from onestack.modules import lmod


@pytest.fixture
def modules_root(tmp_path):
    return {"ONESTACK_MODULES": str(tmp_path / "modules")}


def _current(env):
    return os.path.realpath(os.path.join(env["ONESTACK_MODULES"], "current"))


def _loads(env):
    init = os.path.join(env["ONESTACK_MODULES"], "current", "init", "bash")
    return lmod.clean_shell(init, "module load qe/openblas-mpich && command -v pw.x").returncode == 0


def test_publish_is_idempotent_then_forced(modules_root):
    onestack("publish", env_extra=modules_root, check=True)
    first = _current(modules_root)
    assert "up to date" in onestack("publish", env_extra=modules_root, check=True).stdout
    assert _current(modules_root) == first
    onestack("publish", "--force", env_extra=modules_root, check=True)
    assert _current(modules_root) != first and _loads(modules_root)


def test_killed_publish_leaves_the_live_tree_loadable(modules_root):
    onestack("publish", env_extra=modules_root, check=True)
    live = _current(modules_root)
    releases = os.path.join(modules_root["ONESTACK_MODULES"], "releases")
    proc = subprocess.Popen(
        [str(REPO / "bin" / "onestack"), "publish", "--force"],
        env={**os.environ, **modules_root},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while len(os.listdir(releases)) < 2 and time.time() < deadline:  # the new release has begun
        time.sleep(0.05)
    time.sleep(0.5)  # half-way: Spack is writing the new hierarchy
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(os.listdir(releases)) == 2, "the publish was not caught half-way"
    assert _current(modules_root) == live
    assert _loads(modules_root)
    onestack("publish", "--force", env_extra=modules_root, check=True)  # cleans up the partial one
    assert all(os.path.exists(os.path.join(releases, r, ".complete")) for r in os.listdir(releases))


def test_rollback_restores_the_previous_release(modules_root):
    onestack("publish", env_extra=modules_root, check=True)
    first = _current(modules_root)
    onestack("publish", "--force", env_extra=modules_root, check=True)
    assert _current(modules_root) != first
    proc = onestack("rollback", env_extra=modules_root, check=True)
    assert "live again" in proc.stdout
    assert _current(modules_root) == first and _loads(modules_root)
    refused = onestack("rollback", env_extra=modules_root)
    assert refused.returncode == 1 and "oldest published" in refused.stderr
