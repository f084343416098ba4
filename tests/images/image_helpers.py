"""Helpers shared by the image tests (fixtures are in conftest.py)."""

import os
import time
from pathlib import Path

import pytest

DESKTOP_USER = "onestack-desktop"
# (label, seconds) of each timed step, printed at the end of the run
# (conftest.py's pytest_terminal_summary).
TIMINGS = []


def timed(label: str, step, *args, **kwargs):
    """Runs step and records how long it took."""
    start = time.monotonic()
    result = step(*args, **kwargs)
    TIMINGS.append((label, time.monotonic() - start))
    return result


# How long the image tests wait for an Apptainer set-up still running beside
# them (tests/run.sh); it takes minutes on 2 idle cores.
SETUP_WAIT_SECONDS = 3600


def wait_for_apptainer_setup() -> None:
    """`make test` builds Apptainer beside the tests, and the image tests
    last (tests/run.sh): wait until the file ONESTACK_APPTAINER_SETUP_STATUS
    names holds the set-up's exit code; fail if it is not 0."""
    status = os.environ.get("ONESTACK_APPTAINER_SETUP_STATUS")
    if not status:
        return
    path = Path(status)
    deadline = time.monotonic() + SETUP_WAIT_SECONDS
    start = time.monotonic()
    while not path.is_file():
        if time.monotonic() > deadline:
            pytest.fail(f"Apptainer's set-up beside the tests did not end within {SETUP_WAIT_SECONDS} s ({path})")
        time.sleep(5)
    TIMINGS.append(("waited for Apptainer's set-up beside the tests", time.monotonic() - start))
    code = path.read_text().strip()
    if code != "0":
        pytest.fail(f"Apptainer's set-up beside the tests failed (exit {code}): its log follows the tests")


def tamper(image: Path, objects) -> int:
    """Flips one byte in the middle of the image's system partition (its
    place from `apptainer sif list`); returns the offset."""
    partition = next(o for o in objects if o["type"].startswith("FS (Squashfs"))
    offset = (partition["start"] + partition["end"]) // 2
    with open(image, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0xFF]))
    return offset


def listing(folder: Path) -> list:
    """Every name in folder, hidden temporary names included."""
    return sorted(p.name for p in folder.iterdir())
