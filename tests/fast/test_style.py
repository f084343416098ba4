"""The project's Python is linted and formatted by its own configuration
(pyproject.toml): a style slip fails in seconds, here, not in review."""

import subprocess
import sys
from pathlib import Path

import pytest

from onestack import paths

RUFF = Path(sys.executable).parent / "ruff"


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_passes(command):
    proc = subprocess.run([str(RUFF), *command, "."], cwd=paths.REPO, capture_output=True, text=True)
    assert proc.returncode == 0, f"ruff {' '.join(command)} . (pyproject.toml):\n{proc.stdout}{proc.stderr}"
