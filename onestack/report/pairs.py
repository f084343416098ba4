"""Fat against native, side by side in alternating pairs: what a build for
every CPU generation costs against one built for this machine alone.

A report's 3 rounds cannot resolve a gap of a percent: on these shared 2-core VMs
one QE case's runs spread by several percent (docs/results.md). Here each pair runs the fat
flavor and its native twin back to back, the order swapped every pair (so
that neither always meets the machine first), and the gap is the geometric
mean of the pairs' ratios with its 95% confidence interval (Student's t on
the log-ratios). Pairs are added until the interval is narrow enough to
judge the native_gap goals of report/goals.yaml (half-width at most
RESOLUTION), or a bound on pairs or time is reached; a reduced run does MIN_PAIRS, to keep the code path working.

Where the fat flavor's dispatcher picks the native twin's own build on this
CPU (start_cost.py says when and why), whole pairs compare a build with
itself: SAME_BUILD_PAIRS of them show the noise, and the gap is the
dispatcher's start, measured apart.
"""

import math
import statistics
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from onestack import problems, stack
from onestack.modules import dispatch, publish
from onestack.report import measure, start_cost

# Half-width of the interval: half the native_gap goals' bound, so that the
# interval judges them (report/goals.yaml; tests/fast/test_report.py ties the two).
RESOLUTION = 0.005
MIN_PAIRS = 3  # the fewest with an interval (2 degrees of freedom)
MAX_PAIRS = 30
SAME_BUILD_PAIRS = 6
TIME_BUDGET_S = 30 * 60  # per comparison (a twin, an ABI crossing): the report stays within an evening

# Student's t, two-sided 95%, by degrees of freedom (beyond: 1.96 is close).
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    21: 2.080,
    22: 2.074,
    23: 2.069,
    24: 2.064,
    25: 2.060,
    26: 2.056,
    27: 2.052,
    28: 2.048,
    29: 2.045,
}


def interval(ratios: List[float]) -> Dict[str, float]:
    """The gap (fat's cost: +0.02 = 2% slower) of pairs' ratios fat/native
    (>1: fat slower), with its 95% interval; an interval needs 2 pairs."""
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return {"gap": math.exp(mean) - 1, "low": -math.inf, "high": math.inf, "pairs": len(logs)}
    half = _T95.get(len(logs) - 1, 1.96) * statistics.stdev(logs) / math.sqrt(len(logs))
    return {
        "gap": math.exp(mean) - 1,
        "low": math.exp(mean - half) - 1,
        "high": math.exp(mean + half) - 1,
        "pairs": len(logs),
    }


def stratified_interval(groups: List[List[float]]) -> Dict[str, float]:
    """interval() over groups of pairs that differ by design (flavors,
    cases): the mean of the groups' mean log-ratios, each group weighted
    alike, and its 95% interval from the spread within each group alone
    (Welch-Satterthwaite's degrees of freedom, rounded down), since a goal
    over these flavors is met or not by their mean, and how far one flavor
    is from another is part of that figure, not noise. With one group, or
    a group of one pair (no spread of its own), every pair pooled."""
    if len(groups) < 2 or any(len(g) < 2 for g in groups):
        return interval([r for g in groups for r in g])
    logs = [[math.log(r) for r in g] for g in groups]
    mean = statistics.fmean(statistics.fmean(g) for g in logs)
    shares = [statistics.variance(g) / len(g) / len(logs) ** 2 for g in logs]
    spread = sum(shares)
    half = 0.0
    if spread > 0:
        freedom = spread**2 / sum(share**2 / (len(g) - 1) for share, g in zip(shares, logs))
        half = _T95.get(int(freedom), 1.96) * math.sqrt(spread)
    return {
        "gap": math.exp(mean) - 1,
        "low": math.exp(mean - half) - 1,
        "high": math.exp(mean + half) - 1,
        "pairs": sum(len(g) for g in logs),
    }


def resolved(found: Dict[str, float]) -> bool:
    return found["pairs"] >= MIN_PAIRS and (found["high"] - found["low"]) / 2 <= RESOLUTION


def _slowdown(fat: float, native: float, better: str) -> float:
    return native / fat if better == "higher" else fat / native


def _headline_case(app: str, reduced: bool) -> Optional[problems.Problem]:
    """The benchmark case where the run has one (the test-sized cases finish
    in under a second, where the timer decides), else the first with figures."""
    cases = [p for p in problems.load(app, benchmarks=not reduced).values() if p["figures"]]
    benchmarks = [p for p in cases if p["benchmark_only"]]
    chosen = (benchmarks or cases or [None])[0]
    return chosen if chosen is None or reduced else problems.full_size(chosen)


def _figure(init: Path, run: dict, problem: problems.Problem, rundir: Path, name: str) -> Tuple[float, float]:
    """The run's figure, and its job's wall time in seconds."""
    start = time.monotonic()
    outcome, error = measure.run_once(init, run, problem, rundir)
    if error:
        raise problems.ProblemError(f"{run['label']}: {error}")
    figures = measure.figures(problem, outcome.output)
    if name not in figures:
        raise problems.ProblemError(f"{run['label']}: its output holds no {name} (the problem's figures)")
    return figures[name], time.monotonic() - start


def _pairs(init: Path, fat: dict, native: dict, problem: problems.Problem, workdir: Path, most: int) -> dict:
    """Pairs until the interval resolves the goal or a bound is reached (fat:
    the side whose cost is measured, native: what it is measured against)."""
    name, how = next(iter(problem["figures"].items()))
    ratios: List[float] = []
    native_seconds: List[float] = []
    start = time.monotonic()
    while len(ratios) < most:
        pair = (fat, native) if len(ratios) % 2 == 0 else (native, fat)
        values = {
            c["name"]: _figure(init, c, problem, workdir / f"pair{len(ratios)}" / c["name"].replace("/", "_"), name)
            for c in pair
        }
        ratios.append(_slowdown(values[fat["name"]][0], values[native["name"]][0], how["better"]))
        native_seconds.append(values[native["name"]][1])
        print(
            f"==> report: {problem.app}: pair {len(ratios)} ({' then '.join(c['label'] for c in pair)}): "
            f"{fat['label']} / {native['label']} {ratios[-1]:.4f}; so far {describe(interval(ratios))}",
            flush=True,
        )
        if resolved(interval(ratios)) or time.monotonic() - start > TIME_BUDGET_S:
            break
    return {
        "case": problem.case,
        "figure": name,
        "ratios": ratios,
        "job_s": statistics.median(native_seconds),
        **interval(ratios),
    }


def _same_build(fat: dict, native: dict, ranks: int) -> Optional[dict]:
    """The start cost of the fat flavor's dispatcher, where it runs the
    native twin's own build on this CPU (None where the builds differ)."""
    entry_bin = dispatch.bin_dir(publish.current_release(), stack.load().flavor(fat["name"]))
    folder = start_cost.same_build(entry_bin, native["how"].path[0])
    if folder is None:
        return None
    cost = start_cost.measure(entry_bin)
    print(
        f"==> report: {fat['name']} runs its native twin's own build here ({folder}); its dispatcher's start: "
        f"{start_cost.describe(cost)}",
        flush=True,
    )
    return {"folder": folder, "ranks": ranks, **cost}


def measure_pairs(init: Path, runs: List[dict], app: str, workdir: Path, reduced: bool) -> List[dict]:
    """Each native twin of the app against its fat flavor, in alternating
    pairs; a pair that fails its check ends that twin's row with the error."""
    problem = _headline_case(app, reduced)
    by_name = {c["name"]: c for c in runs}
    twins = [c for c in runs if c["kind"] == "native" and c["of"] in by_name]
    found = []
    for native in twins if problem else []:
        fat = by_name[native["of"]]
        row = {"fat": fat["name"], "native": native["name"], "case": problem.case, "error": None}
        try:
            row["same_build"] = _same_build(fat, native, problem["ranks"])
            most = MIN_PAIRS if reduced else SAME_BUILD_PAIRS if row["same_build"] else MAX_PAIRS
            row.update(_pairs(init, fat, native, problem, workdir / app, most))
        except problems.ProblemError as err:
            row["error"] = str(err)
        if row["same_build"] and not row["error"]:
            row["same_build"]["bound"] = start_cost.bound(row["same_build"], problem["ranks"], row["job_s"])
        found.append(row)
    return found


def measure_abi_pairs(init: Path, runs: List[dict], app: str, workdir: Path, reduced: bool) -> List[dict]:
    """Each run of a flavor on another MPI's runtime for its ABI (kind
    abi_runtime: the standard ABI on Intel MPI) against the flavor built
    natively with that MPI, in alternating pairs, as fat against native."""
    problem = _headline_case(app, reduced)
    by_name = {c["name"]: c for c in runs}
    found = []
    for crossing in [c for c in runs if c["kind"] == "abi_runtime" and c["of"] in by_name] if problem else []:
        native = by_name[crossing["of"]]
        row = {"fat": crossing["label"], "native": native["name"], "case": problem.case, "error": None}
        try:
            row.update(_pairs(init, crossing, native, problem, workdir / app, MIN_PAIRS if reduced else MAX_PAIRS))
        except problems.ProblemError as err:
            row["error"] = str(err)
        found.append(row)
    return found


def describe(found: Dict[str, float]) -> str:
    if found["pairs"] < 2:
        return f"{found['gap']:+.2%} (1 pair, no interval)"
    return f"{found['gap']:+.2%} [95% CI {found['low']:+.2%} .. {found['high']:+.2%}, {found['pairs']} pairs]"
