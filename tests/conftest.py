"""Fixtures shared by the tests: the live module tree that `make stack`
published (the tests check what users get, through `module load`)."""

import os
import subprocess
from pathlib import Path

import pytest

from onestack import paths, publish

REPO = paths.REPO


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
