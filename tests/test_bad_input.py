"""Bad input gives a clear error (file, key, what is allowed) and publishes
nothing: the live module tree stays what it was."""

import os
import shutil
from pathlib import Path

import pytest

from conftest import REPO, onestack
from onestack import publish

CASES = sorted(p for p in (REPO / "tests" / "bad-input").iterdir() if p.is_dir())


def _environments_with(case: Path, tmp_path: Path) -> Path:
    env_dir = tmp_path / "environments"
    shutil.copytree(REPO / "environments", env_dir)
    for file in case.iterdir():
        if file.name != "expected-error":
            shutil.copy(file, env_dir / file.name)
    return env_dir


def _releases():
    return sorted(p.name for p in publish.releases_dir().iterdir())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_named_and_nothing_is_published(case, tmp_path, live_release):
    env_dir = _environments_with(case, tmp_path)
    before = _releases()
    proc = onestack("publish", env_extra={"ONESTACK_ENVIRONMENTS": str(env_dir)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for line in (case / "expected-error").read_text().splitlines():
        assert line in proc.stderr, f"missing from the error:\n  {line}\ngot:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    assert publish.current_release() == live_release
    assert _releases() == before


def test_unknown_flavor_lists_the_known_ones(live_release):
    proc = onestack("publish", "qe/mkl-nosuchmpi")
    assert proc.returncode == 1
    assert "unknown flavor(s) qe/mkl-nosuchmpi" in proc.stderr
    assert "qe/openblas-mpich" in proc.stderr
    assert publish.current_release() == live_release
