"""Helpers shared by the image tests (fixtures are in conftest.py)."""

import time
from pathlib import Path

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
