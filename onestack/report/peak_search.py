"""The CPU's peak, sought as a site tunes HPL: with the fastest flavor of the
report's HPL case, a problem's `peak_search` (tests/problems/hpl/hpl.yaml)
runs its program (HPL alone) in a bounded search, and the report prints
every trial, what it chose and why.

1. At the first size, each layout: MPI ranks on every core (the process
   grid as square as the core count allows), or one rank whose BLAS runs a
   thread per core; the faster layout stays.
2. At the first size, each block size; the fastest stays.
3. Growing sizes, until a run reaches the goal's share of the measured peak,
   or the next size is predicted (time ~ size^3) to run longer than the bound.
"""

import math
import time
from pathlib import Path
from typing import List, Optional, Tuple

from onestack import host, problems
from onestack.problems import How, Problem
from onestack.problems.problem import memory_size
from onestack.report import measure

# Each math library's thread count, which the flavors' modules set to 1
# (they are MPI-only): the one-rank layout sets them to the core count.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def grid(cores: int) -> Tuple[int, int]:
    """Rows x columns = cores, as square as it goes, rows <= columns (HPL's advice)."""
    rows = max(r for r in range(1, int(math.isqrt(cores)) + 1) if cores % r == 0)
    return rows, cores // rows


def layouts(cores: int) -> List[dict]:
    rows, columns = grid(cores)
    return [
        {"name": f"{cores} ranks ({rows}x{columns} grid)", "ranks": cores, "grid": (rows, columns), "threads": 1},
        {"name": f"1 rank, {cores} BLAS threads", "ranks": 1, "grid": (1, 1), "threads": cores},
    ]


def _variant(problem: Problem, n: int, block: int, layout: dict) -> Problem:
    search = problem["peak_search"]
    rows, columns = search["grid_params"]
    params = {
        **problem["params"],
        search["size_param"]: n,
        search["block_param"]: block,
        rows: layout["grid"][0],
        columns: layout["grid"][1],
    }
    return Problem(
        problem.app,
        problem.case,
        {**problem.spec, "command": search["command"], "ranks": layout["ranks"], "params": params},
    )


def _trial(
    init: Path, flavor: str, problem: Problem, n: int, block: int, layout: dict, peak: float, workdir: Path
) -> dict:
    """One run: its figure (the problem's first), share of the peak, seconds."""
    variant = _variant(problem, n, block, layout)
    how = How(modules=(flavor,), env=tuple((name, str(layout["threads"])) for name in BLAS_THREADS))
    start = time.monotonic()
    outcome = problems.execute(variant, how, workdir / f"{layout['ranks']}r-{n}-{block}", init)
    seconds = time.monotonic() - start
    failure = outcome.failure() or "; ".join(str(c) for c in outcome.checks() if not c.passed)
    name = next(iter(problem["figures"]))
    gflops = None if failure else measure.figures(problem, outcome.output).get(name)
    if gflops is None and not failure:
        # A run whose checks passed, but whose figure was not a finite number above zero (measure.figures)
        failure = f"its output held no {name}"
    trial = {
        "n": n,
        "block": block,
        "layout": layout["name"],
        "seconds": round(seconds, 1),
        "gflops": gflops,
        "share": gflops / peak if gflops else None,
        "error": failure[:300] or None,
    }
    print(
        f"==> report: peak search: {flavor} N={n} NB={block} {layout['name']}: "
        + (
            f"{gflops:.1f} GFLOPS = {trial['share']:.1%} of {peak:.1f}, {seconds:.0f} s"
            if gflops
            else f"failed: {trial['error']}"
        ),
        flush=True,
    )
    return trial


def _best(trials: List[dict]) -> Optional[dict]:
    return max((t for t in trials if t["gflops"]), key=lambda t: t["gflops"], default=None)


def search(init: Path, flavor: str, problem: Problem, peak: float, cores: int, workdir: Path, reduced: bool) -> dict:
    """The bounded search of the module's docstring; its trials, the best,
    and why it stopped. A reduced run tries the layouts at the test size only."""
    spec = problem["peak_search"]
    memory = host.memory_bytes()
    first = (
        problem["params"][spec["size_param"]]
        if reduced
        else memory_size(spec["memory_fractions"][0], spec["blocks"][0], memory)
    )
    trials = [
        _trial(init, flavor, problem, first, spec["blocks"][0], layout, peak, workdir) for layout in layouts(cores)
    ]
    best = _best(trials)
    if best is None or reduced:
        return {
            "flavor": flavor,
            "trials": trials,
            "best": best,
            "why": "every layout failed" if best is None else "a reduced run tries the layouts only",
        }
    layout = next(lay for lay in layouts(cores) if lay["name"] == best["layout"])
    trials += [
        _trial(
            init, flavor, problem, memory_size(spec["memory_fractions"][0], block, memory), block, layout, peak, workdir
        )
        for block in spec["blocks"][1:]
    ]
    best = _best(trials)
    block, last, why = best["block"], best, None
    for fraction in spec["memory_fractions"][1:]:
        if best["share"] >= spec["share"]:
            break
        n = memory_size(fraction, block, memory)
        predicted = last["seconds"] * (n / last["n"]) ** 3
        if predicted > spec["seconds"]:
            why = (
                f"N={n} ({fraction:.0%} of memory) would take about {predicted:.0f} s, over the bound of "
                f"{spec['seconds']:.0f} s"
            )
            break
        last = _trial(init, flavor, problem, n, block, layout, peak, workdir)
        trials.append(last)
        best = _best(trials)
        if not last["gflops"]:
            why = f"N={n} failed"
            break
    if best["share"] >= spec["share"]:
        why = f"{best['share']:.1%} of the peak reaches the goal's {spec['share']:.0%}"
    return {
        "flavor": flavor,
        "trials": trials,
        "best": best,
        "why": why or f"the largest size of the search ({spec['memory_fractions'][-1]:.0%} of memory) ran",
    }
