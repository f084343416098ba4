"""Fixtures shared by the tests: the live module tree that `make stack`
published (the tests check what users get, through `module load`)."""

import os
import subprocess
from pathlib import Path

import pytest

from onestack import paths
from onestack.modules import publish

REPO = paths.REPO
# Spack reads the install tree from spack.yaml's $ONESTACK_PREFIX: the site's, unless set.
os.environ.setdefault("ONESTACK_PREFIX", str(paths.prefix()))


@pytest.fixture(scope="session")
def live_release() -> Path:
    release = publish.current_release()  # fails, with the fix, if nothing is published
    return release


@pytest.fixture(scope="session")
def init_script(live_release) -> Path:
    return live_release / "init" / "bash"


@pytest.fixture(scope="session")
def published_flavors(live_release) -> list:
    return publish.release_manifest(live_release)["flavors"]


def onestack(*args, env_extra=None, check=False) -> subprocess.CompletedProcess:
    """Run bin/onestack as a site engineer would."""
    env = {**os.environ, **(env_extra or {})}
    proc = subprocess.run([str(REPO / "bin" / "onestack"), *args], env=env, text=True, capture_output=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"onestack {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")
    return proc


def run_as(user: str, env: dict = None):
    """A submit function for onestack.problems.execute: the run script as
    another user, from a clean login environment (plus env)."""
    def submit(script):
        os.chmod(script, 0o755)
        clean = {"HOME": "/tmp", "PATH": "/usr/bin:/bin", "TERM": "dumb", **(env or {})}
        proc = subprocess.run(["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in clean.items()),
                               "bash", "--noprofile", "--norc", str(script)], capture_output=True, text=True,
                              timeout=1800, cwd="/")
        return proc.returncode, proc.stdout + proc.stderr
    return submit
