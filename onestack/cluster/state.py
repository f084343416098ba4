"""The record of what `up` made (state.json in the cluster's folder), written
before each thing is made: a killed `up` leaves a record that names at least
everything that exists, and `down` works from it (and sweeps by name besides)."""

import json
from pathlib import Path
from typing import List, Tuple

from onestack import files

STATE_FILE = "state.json"


def _file(workdir: Path) -> Path:
    return workdir / STATE_FILE


def start(workdir: Path, prefix: str) -> None:
    files.write_text(_file(workdir), json.dumps({"prefix": prefix, "made": []}, indent=1))


def record(workdir: Path, kind: str, name: str) -> None:
    """Note that `up` is about to make `name` (a bridge, a namespace, a daemon's pid file)."""
    data = json.loads(_file(workdir).read_text())
    data["made"].append([kind, name])
    files.write_text(_file(workdir), json.dumps(data, indent=1))


def made(workdir: Path) -> List[Tuple[str, str]]:
    """What the last `up` made or was about to make; empty without a record."""
    try:
        return [tuple(entry) for entry in json.loads(_file(workdir).read_text())["made"]]
    except FileNotFoundError:
        return []


def exists(workdir: Path) -> bool:
    return _file(workdir).exists()


def forget(workdir: Path) -> None:
    _file(workdir).unlink(missing_ok=True)
