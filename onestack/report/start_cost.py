"""What the fat flavor adds to a run when its dispatcher picks the native
twin's own build: only its start.

Where archspec names this CPU by an x86-64 level (a VM that hides a few of
the model's features, e.g. x86_64_v4 for a zen4 guest), the native twin's
spec is that level build's spec, so both are one installation. Every figure
of the test problems is timed by the program itself, after the exec, so
whole runs in pairs then compare a build with itself: their interval is the
machine's noise (several percent a run on these shared 2-core VMs), which
no bound of pairs narrows to the native_gap goals' bound. What the dispatcher does add is measured here directly:
starts of a no-op through a copy of the flavor's own dispatcher (the same
table of levels) against the no-op started directly, in alternating pairs,
and that cost per rank set against the job's wall time."""

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

from onestack.modules.dispatch import CHECK, TABLE_LEVELS, choice_here, table_folder

STARTS = 400  # alternating pairs of starts: about a second in all
NOOP = "/bin/true"


def _scratch_table(table: Path, build: Path) -> str:
    """The flavor's table with every build's folder the scratch one; its
    `at-most` lines stay, so that the dispatcher does the same work."""
    lines = []
    for line in table.read_text().splitlines():
        word = line.split(None, 1)[0] if line.strip() else ""
        lines.append(f"{word} {table_folder('the start cost', str(build))}" if word in TABLE_LEVELS else line)
    return "".join(f"{line}\n" for line in lines)


def _spawn_ns(argv: List[str]) -> int:
    start = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, {})
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter_ns() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv[0]} exited {os.waitstatus_to_exitcode(status)}")
    return elapsed


def measure(entry_bin: Path, starts: int = STARTS) -> Dict[str, float]:
    """The dispatcher's start cost in ms (mean of the pairs' differences,
    95% interval), from a scratch copy of the flavor's dispatch folder whose
    every level points at a folder holding the no-op."""
    with tempfile.TemporaryDirectory(prefix="onestack-start-") as scratch:
        build, entry = Path(scratch) / "build", Path(scratch) / "dispatch" / "bin"
        build.mkdir()
        entry.mkdir(parents=True)
        shutil.copy(NOOP, build / "true")
        shutil.copy(entry_bin / CHECK, entry / "true")
        (entry.parent / "levels.conf").write_text(_scratch_table(entry_bin.parent / "levels.conf", build))
        through, direct = [str(entry / "true")], [str(build / "true")]
        diffs = []
        for i in range(starts):
            # The order swapped every pair: neither always meets a warm cache.
            if i % 2 == 0:
                with_it, without = _spawn_ns(through), _spawn_ns(direct)
            else:
                without, with_it = _spawn_ns(direct), _spawn_ns(through)
            diffs.append((with_it - without) / 1e6)
    mean, half = statistics.fmean(diffs), 1.96 * statistics.stdev(diffs) / len(diffs) ** 0.5
    return {"ms": mean, "low_ms": mean - half, "high_ms": mean + half, "starts": starts}


def bound(cost: Dict[str, float], ranks: int, job_seconds: float) -> float:
    """The most the start can add to a job, as a share of its wall time:
    every rank starting through the dispatcher one after the other."""
    return ranks * max(cost["high_ms"], 0.0) / 1000 / job_seconds


def same_build(entry_bin: Path, native_bin: str) -> Optional[str]:
    """The folder both run, when the fat flavor's dispatcher picks the
    native twin's own build on this CPU; None when they differ."""
    chosen = choice_here(entry_bin)[1]
    return chosen if os.path.realpath(chosen) == os.path.realpath(native_bin) else None


def describe(cost: Dict[str, float]) -> str:
    return (
        f"{cost['ms']:+.3f} ms a start [95% CI {cost['low_ms']:+.3f} .. {cost['high_ms']:+.3f}, "
        f"{cost['starts']} alternating starts]"
    )
