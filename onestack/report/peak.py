"""This CPU's floating-point peak, measured (report/fma_peak.c): the
yardstick of the HPL goal."""

import functools
import os
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import List

from onestack import paths

FMA_PEAK_SOURCE = paths.REPO / "report" / "fma_peak.c"
# Samples of the peak, before the runs and again after them.
SAMPLES = 5


def measure(cpus: List[int]) -> dict:
    """report/fma_peak.c on every CPU at once, each process pinned to its
    own, SAMPLES times."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "fma_peak"
        subprocess.run(["gcc", "-O3", "-o", str(exe), str(FMA_PEAK_SOURCE)], check=True)
        samples = [_sample(exe, cpus) for _ in range(SAMPLES)]
    return {"isa": samples[0][0], "cores": len(cpus), "samples": [gflops for _, gflops in samples]}


def _sample(exe: Path, cpus: List[int]) -> tuple:
    """One sample: the ISA and the GFLOPS summed over the CPUs."""
    runs = [
        subprocess.Popen(
            [str(exe)], stdout=subprocess.PIPE, text=True, preexec_fn=functools.partial(os.sched_setaffinity, 0, {cpu})
        )
        for cpu in cpus
    ]
    lines = [r.communicate(timeout=120)[0].split() for r in runs]
    return lines[0][0], sum(float(line[1]) for line in lines)


def combined(before: dict, after: dict) -> dict:
    """The peak is the best sample, before or after the runs: on a virtual
    machine a CPU is shared with the host, and a sample during which the host
    took one ran at a fraction of the peak (half of it was seen), which
    made HPL look faster than the CPU. The spread shows how often."""
    samples = before["samples"] + after["samples"]
    return {
        **before,
        "samples": samples,
        "gflops": max(samples),
        "min": min(samples),
        "median": statistics.median(samples),
    }


def of_cores(measured: dict, ranks: int) -> dict:
    """The measured peak of the cores a case's runs take, a rank each (the
    peak is every core's): what a run of that case is judged and charted against."""
    cores = min(ranks, measured["cores"])
    return {"gflops": measured["gflops"] * cores / measured["cores"], "cores": cores}
