"""The report's goals (report/goals.yaml): each judged from the measured
figures by the function of its kind, with the figure shown and a verdict of
met, MISSED, or why it was not measured."""

import functools
import math
from pathlib import Path
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Tuple

from onestack import data, host, paths
from onestack.report import pairs, start_cost
from onestack.report.peak import of_cores
from onestack.stack import cpus

GOALS_FILE = "report/goals.yaml"


@functools.lru_cache(maxsize=None)
def _load(file: Path) -> tuple:
    return tuple(data.load(file, "goals")["goals"])


def every() -> List[dict]:
    return list(_load(paths.data_root() / GOALS_FILE))


def _headline(cases: Dict[str, dict]) -> Dict[str, dict]:
    """The cases the verdicts rest on: the benchmark cases when the run has
    them. The test-sized ones finish in well under a second, where start-up
    and the timer's 0.01 s resolution decide the ratio."""
    benchmarks = {k: v for k, v in cases.items() if v["benchmark"]}
    return benchmarks or cases


def _results(app: dict, figure: str) -> List[dict]:
    return [r for case in _headline(app["cases"]).values() for r in case["results"] if figure in r["figures"]]


def _verdict(goal: dict, value: float) -> str:
    if "at_least" in goal:
        return "met" if value >= goal["at_least"] else "MISSED"
    return "met" if value <= goal["at_most"] else "MISSED"


def peak_share(goal: dict, app: dict, peak: dict) -> dict:
    """The best run against the measured peak of the cores it ran on: the
    best flavor's median (the case's ranks, a core each), or the best run of
    the peak search (peak_search.py, every core) where it went further; not
    judged when any run beat its peak, as then the peak is what was
    mismeasured."""
    runs = []  # (share, GFLOPS, the peak of its cores, where; the fastest run of the case)
    for case in _headline(app["cases"]).values():
        cores_peak = of_cores(peak, case.get("ranks", peak["cores"]))["gflops"]
        for r in (r for r in case["results"] if goal["figure"] in r["figures"]):
            figure = r["figures"][goal["figure"]]
            # Any run above its peak (a baseline's, a twin's) says the peak was mismeasured; flavors are judged.
            runs.append((figure["max"] / cores_peak, figure["max"], cores_peak, None))
            if r["kind"] == "flavor":
                runs.append((figure["median"] / cores_peak, figure["median"], cores_peak, f"{r['name']}, median"))
    searched = (app.get("peak_search") or {}).get("best")
    if searched:
        where = (
            f"{app['peak_search']['flavor']}, searched: N={searched['n']} NB={searched['block']}, {searched['layout']}"
        )
        runs.append((searched["gflops"] / peak["gflops"], searched["gflops"], peak["gflops"], where))
    judged = [run for run in runs if run[3]]
    if not judged:
        return {"figure": "-", "verdict": "not measured: no flavor ran"}
    share, best, of, where = max(judged, key=lambda run: run[0])
    figure = f"{best:.1f} of {of:.1f} GFLOPS = {share:.1%} ({where})"
    fastest = max(runs, key=lambda run: run[0])
    if fastest[0] > 1:
        return {
            "figure": figure,
            "verdict": f"not judged: a run reached {fastest[1]:.1f} GFLOPS, above the measured peak of its cores "
            f"({fastest[2]:.1f}; samples {peak['min']:.1f}-{peak['gflops']:.1f}): the peak was measured on a busy CPU",
        }
    return {"figure": figure, "verdict": _verdict(goal, share)}


def flavor_over(goal: dict, app: dict, peak: dict) -> dict:
    """How many times better the best path of the stack (a flavor, or one of
    its accelerated styles) is than the yardstick's best (the reference
    build, or a baseline in any of its styles): the geometric mean over the
    headline cases, with its interval from the rounds they ran side by side."""
    rows, ours_failed = [], ""
    for name, case in _headline(app["cases"]).items():
        ours, theirs = _contenders(goal, case)
        if not (ours and theirs and goal["figure"] in case["figures"]):
            continue
        failed = _failed(theirs, goal["figure"])
        if failed:
            return {"figure": "-", "verdict": f"not measured: {failed}"}
        ours_failed = ours_failed or _failed(ours, goal["figure"])
        ran = [r for r in ours if not _failed([r], goal["figure"])]
        if not ran:
            continue
        how = case["figures"][goal["figure"]]
        best, yardstick = (_best(runs, goal["figure"], how["better"]) for runs in (ran, theirs))
        label = f"{best['label']} over {yardstick['label']} on {name}:"
        rows.append(_side(label, name, yardstick, best, goal["figure"], how))
    if not rows:
        return {"figure": "-", "verdict": f"not measured: {ours_failed or _yardstick_missing(goal, app)}"}
    verdict = _judged_gain(goal, rows)
    # A path of ours that failed can only have been better: met stands, the
    # rest is not known.
    if ours_failed and verdict != "met":
        verdict = f"not measured: {ours_failed}"
    return {"figure": _gains_shown(rows), "verdict": verdict}


def _contenders(goal: dict, case: dict) -> Tuple[List[dict], List[dict]]:
    """A case's runs of the stack's paths, and the yardstick's runs. Not a
    hybrid flavor's threads: the yardsticks run as ranks only, and the goal
    would judge the layout, not the build."""
    results = case["results"]
    theirs = [r for r in results if r["kind"] == goal["versus"] or r.get("baseline") == goal["versus"]]
    ours = [r for r in results if r["kind"] in ("flavor", "accelerated")]
    return ours, theirs


def _failed(runs: Iterable[dict], figure: str) -> Optional[str]:
    """The first of the runs a goal compares that failed or printed no
    `figure`, said: judged on the others, the goal would rest on a subset (a
    yardstick's failed style, a flavor's failed second run) and could be
    met by what did not run."""
    for r in runs:
        if r["error"] or figure not in r["figures"]:
            return f"{r['label']}: {r['error'] or 'its output held no ' + figure}"
    return None


def _yardstick_missing(goal: dict, app: dict) -> str:
    failed = [
        r["error"]
        for case in app["cases"].values()
        for r in case["results"]
        if r.get("baseline") == goal["versus"] and r["error"]
    ]
    return f"{goal['versus']} failed its check: {failed[0]}" if failed else f"{goal['versus']} was not measured"


def _best(runs: List[dict], figure: str, better: str) -> dict:
    """The run of the best median."""
    pick = max if better == "higher" else min
    return pick(runs, key=lambda r: r["figures"][figure]["median"])


def native_gap(goal: dict, app: dict, peak: dict) -> dict:
    """How much slower the fat flavor is than its native twin, from their
    alternating pairs (pairs.py): met when the whole 95% interval is within
    the goal, MISSED when the whole of it is beyond, else not resolved. Where
    the dispatcher runs the twin's own build, the gap is its start alone
    (start_cost.py), bounded against the job's wall time, unless the whole
    runs' interval is wholly beyond the goal: then how the two run differs,
    and the goal is missed."""
    return _gap(goal, app.get("native_pairs") or [], "no native twin built")


def abi_gap(goal: dict, app: dict, peak: dict) -> dict:
    """How much slower a build for the standard ABI is on an MPI than the
    same application built natively with that MPI, from their alternating
    pairs (pairs.measure_abi_pairs), judged as native_gap is."""
    return _gap(goal, app.get("abi_pairs") or [], "no standard-ABI flavor beside a native one of the same MPI")


def _gap(goal: dict, rows: List[dict], missing: str) -> dict:
    if not rows:
        return {"figure": "-", "verdict": f"not measured: {missing}"}
    failed = [r for r in rows if r["error"]]
    if failed:
        return {"figure": "-", "verdict": f"not measured: {failed[0]['error']}"}
    figure = "; ".join(_native_row(r) for r in rows)
    # Whole runs wholly beyond the goal miss it even where both sides run the
    # same build: then what differs is not the build but how it is run.
    if any(r["low"] > goal["at_most"] for r in rows):
        return {"figure": figure, "verdict": "MISSED"}
    highs = [r["same_build"]["bound"] if r.get("same_build") else r["high"] for r in rows]
    if all(high <= goal["at_most"] for high in highs):
        return {"figure": figure, "verdict": "met"}
    return {"figure": figure, "verdict": f"not resolved: the interval spans {goal['at_most']:.0%}"}


def _native_row(r: dict) -> str:
    whole = f"{r['fat']} {r['case']}: whole runs {pairs.describe(r)}"
    same = r.get("same_build")
    if not same:
        return whole
    return (
        f"{whole}, the same build on both sides ({same['folder']}): the gap is the dispatcher's start, "
        f"{start_cost.describe(same)} x {same['ranks']} ranks = at most {same['bound']:.4%} of the "
        f"{r['job_s']:.1f} s job"
    )


def _second_runs(kind: str) -> Callable[[List[dict]], List[tuple]]:
    """Each run of `kind` and the flavor's run it is the second run of:
    (that second run, the flavor's run), the flavor's the one judged."""

    def matched(results: List[dict]) -> List[tuple]:
        by_name = {r["name"]: r for r in results}
        return [(r, by_name[r["of"]]) for r in results if r["kind"] == kind]

    return matched


def _level_over_baseline(level: str) -> Callable[[List[dict]], List[tuple]]:
    """Each flavor's build of `level` alone after its baseline build alone,
    both forced by ONESTACK_CPU_LEVEL: (the baseline run, the level's run)."""

    def matched(results: List[dict]) -> List[tuple]:
        baseline = {r["of"]: r for r in results if r["kind"] == "baseline_level"}
        chosen = [r for r in results if r["kind"] == "level_build" and r["level"] == level]
        return [(baseline[r["of"]], r) for r in chosen if r["of"] in baseline]

    return matched


class Side(NamedTuple):
    """Two runs of a flavor side by side in the same rounds: their medians,
    how much faster the second is (above 1, it wins), and the gain of each
    round (a pair: the two ran one after the other, measure.measure_case)."""

    flavor: str
    case: str
    before: float
    after: float
    gain: float
    rounds: List[float]


def _gain_of(before: float, after: float, better: str) -> float:
    return after / before if better == "higher" else before / after


def _round_gains(before: dict, after: dict, better: str) -> List[float]:
    """The gain of each round both runs printed the figure in (none from a
    results file written before rounds were kept)."""
    pairs_ = zip(before.get("rounds", []), after.get("rounds", []))
    return [_gain_of(b, a, better) for b, a in pairs_ if b is not None and a is not None]


def _side_by_side(goal: dict, app: dict, matched: Callable[[List[dict]], List[tuple]]) -> Tuple[List[Side], str]:
    """Each pair of runs of a flavor (first, second) in the same rounds, over
    the headline cases; and the first pair's failure, said ("" if none)."""
    rows = []
    for name, case in _headline(app["cases"]).items():
        how = case["figures"].get(goal["figure"])
        for off, on in matched(case["results"]) if how else []:
            failed = _failed((on, off), goal["figure"])
            if failed:
                return [], failed
            rows.append(_side(off["of"], name, off, on, goal["figure"], how))
    return rows, ""


def _side(flavor: str, case: str, off: dict, on: dict, figure: str, how: dict) -> Side:
    """Run `on` against run `off` of the same rounds, on one figure."""
    before, after = off["figures"][figure], on["figures"][figure]
    gain = _gain_of(before["median"], after["median"], how["better"])
    return Side(flavor, case, before["median"], after["median"], gain, _round_gains(before, after, how["better"]))


def _gain(goal: dict, app: dict, kind: str, missing: str) -> dict:
    """A flavor's figure against its second run of `kind`: the geometric
    mean of the gains of every round over the flavors and headline cases,
    with its interval, judged as _judged_gain says."""
    rows, failed = _side_by_side(goal, app, _second_runs(kind))
    if not rows:
        return {"figure": "-", "verdict": f"not measured: {failed or missing}"}
    return {"figure": _gains_shown(rows), "verdict": _judged_gain(goal, rows)}


def _gains(rows: List[Side]) -> dict:
    """The rounds' gains as pairs.stratified_interval reads them (ratios:
    gap = gain - 1), one group per flavor and case; a row's median gain where
    no round was kept. The goal is one over its flavors and cases: their
    mean, its interval from each row's own spread."""
    return pairs.stratified_interval([r.rounds or [r.gain] for r in rows])


def _judged_gain(goal: dict, rows: List[Side]) -> str:
    """Met or MISSED when the whole 95% interval of the gain is on one side
    of the goal, else not resolved (the pairs' spread spans it, or one
    round, a reduced run's, has none); a results file without rounds kept is
    judged on its medians."""
    found = _gains(rows)
    if _one_round_each(rows):
        return "not resolved: one round, no interval"
    if found["pairs"] < 2:
        return _verdict(goal, 1 + found["gap"])
    low, high = 1 + found["low"], 1 + found["high"]
    bound = goal.get("at_least", goal.get("at_most"))
    if _verdict(goal, low) == _verdict(goal, high):
        return _verdict(goal, low)
    return f"not resolved: the interval {low:.2f}x .. {high:.2f}x spans {bound}x"


def _one_round_each(rows: List[Side]) -> bool:
    """Rounds kept, one a row (a reduced run's): the rows' gains differ by
    flavor and case, which is no spread of the runs, so there is no interval."""
    return any(r.rounds for r in rows) and all(len(r.rounds) < 2 for r in rows)


def _gains_shown(rows: List[Side]) -> str:
    found = _gains(rows)
    each = "; ".join(f"{r.flavor} {r.before:.3g} -> {r.after:.3g}" for r in rows)
    if found["pairs"] < 2 or _one_round_each(rows):
        return f"{1 + found['gap']:.2f}x ({each})"
    return (
        f"{1 + found['gap']:.2f}x [95% CI {1 + found['low']:.2f} .. {1 + found['high']:.2f}, "
        f"{found['pairs']} pairs] ({each})"
    )


def layout_gap(goal: dict, app: dict, peak: dict) -> dict:
    """A hybrid flavor as one rank with a thread per core against itself
    with a rank per core (measure._threaded), at equal cores, whichever
    layout wins: met when every case's 95% interval is within the goal,
    MISSED when one case's is wholly beyond it, else not resolved; the
    figure says which layout wins where."""
    rows, failed = _side_by_side(goal, app, _second_runs("threaded"))
    if not rows:
        return {"figure": "-", "verdict": f"not measured: {failed or 'no hybrid flavor ran'}"}
    shown = "; ".join(
        f"{flavor} {case}: ranks {after:.3g}, threads {before:.3g} "
        f"({'ranks' if gain >= 1 else 'threads'} faster by {max(gain, 1 / gain) - 1:.1%})"
        for flavor, case, before, after, gain, _ in rows
    )
    verdicts = [_layout_verdict(r, goal["at_most"]) for r in rows]
    unresolved = [v for v in verdicts if v.startswith("not resolved")]
    verdict = "MISSED" if "MISSED" in verdicts else unresolved[0] if unresolved else "met"
    return {"figure": shown, "verdict": verdict}


def _layout_verdict(row: Side, at_most: float) -> str:
    """A case's gap between the layouts as a log-ratio, so that either
    layout ahead by the same share counts alike (threads 5% slower is ranks
    1.05x faster, and the other way round)."""
    bound = math.log1p(at_most)
    found = pairs.interval(row.rounds or [row.gain])
    if found["pairs"] < 2 and row.rounds:
        return f"not resolved: {row.flavor} {row.case}: one round, no interval"
    if found["pairs"] < 2:  # a results file without rounds: its medians
        low = high = math.log(row.gain)
    else:
        low, high = math.log1p(found["low"]), math.log1p(found["high"])
    if -bound <= low and high <= bound:
        return "met"
    if high < -bound or low > bound:
        return "MISSED"
    return (
        f"not resolved: {row.flavor} {row.case}: the interval {math.exp(low):.3f}x .. {math.exp(high):.3f}x "
        f"spans {1 / (1 + at_most):.3f}x .. {1 + at_most:.3f}x"
    )


def preload_gain(goal: dict, app: dict, peak: dict) -> dict:
    """What a flavor's preloaded library (MKL's CPU-path remedy) gives: with
    the library against without. On Intel's CPUs MKL takes its own path
    whether or not the library is there: nothing to measure."""
    if host.vendor() == "GenuineIntel":
        return {"figure": "-", "verdict": "not measured: on an Intel CPU MKL takes its own path without the library"}
    return _gain(goal, app, "without_preload", "no flavor with a preload ran")


def level_gain(goal: dict, app: dict, peak: dict) -> dict:
    """What a flavor's level builds give on this CPU: the build the
    dispatcher runs against the baseline build alone. A goal for a level
    (`on_level`) is judged only on a host of that level; on a newer host the
    figure is that level's build against the baseline's, both forced here,
    shown as an indication (another CPU, not the goal's host). A goal over
    a baseline build of another level than the site's (`over_level`) is not
    judged: the site has no such build."""
    if goal["over_level"] != cpus.baseline_level():
        return {
            "figure": "-",
            "verdict": f"not applicable: the goal is over an {goal['over_level']} build, and this site's "
            f"baseline is {cpus.baseline_level()} ({cpus.where_chosen()})",
        }
    here = f"x86-64-{host.level()}"
    picked, lowered = _picked(app) or (here, "")
    # The level judged here: the CPU's, or the one the flavors' tables lower
    # it to on this model; below the CPU's for want of a build, none.
    judged = picked if lowered else here
    on_level = goal.get("on_level", judged)
    if on_level == judged == picked:
        return _gain(goal, app, "baseline_level", "no flavor with level builds ran")
    why = f"not measured: this host is {here}{_not_judged_here(here, picked, lowered)}, the goal is for {on_level}"
    if on_level == picked:
        rows, _ = _side_by_side(goal, app, _second_runs("baseline_level"))
        shown = f"its {picked} build, the newest it has, against its baseline build, on this {here} host"
    else:
        rows, _ = _side_by_side(goal, app, _level_over_baseline(on_level))
        shown = f"its {on_level} build against its baseline build, both forced on this {here} host"
    if not rows:
        return {"figure": "-", "verdict": why}
    return {"figure": f"{_gains_shown(rows)}: {shown}", "verdict": why}


def _not_judged_here(here: str, picked: str, lowered: str) -> str:
    """Why the dispatcher does not run a build of the host's level."""
    if picked == here:
        return ""
    if lowered:
        return f", whose dispatcher runs its {picked} build (lower_level_on)"
    return f", and the flavors have no {here} build (the dispatcher runs their {picked} build)"


def _picked(app: dict) -> Optional[Tuple[str, str]]:
    """The level the flavors' dispatchers ran on this host, as the runs of
    their lower builds recorded it, and why it is below the CPU's where a
    flavor's table lowers it on this CPU's model ("" if not)."""
    found = {
        (r["picked"], r.get("lowered", "")) for case in app["cases"].values() for r in case["results"] if "picked" in r
    }
    return min(found) if found else None


def emulated(goal: dict, app: dict, peak: dict) -> dict:
    """On the emulated generations: the fat build runs on every one, the
    native build on none of a lower x86-64 level than this machine (on the
    others it may: a Zen build can run on a Haswell), where it dies of an
    illegal instruction; any other failure is not that proof."""
    rows = app.get("emulated")
    if not rows:
        return {"figure": "-", "verdict": "not measured: no native twin built, or a reduced run"}
    fat_ok = all(r["fat"]["passed"] for r in rows)
    native_runs = [r["cpu"] for r in rows if r["native"]["passed"]]
    older_runs = [r["cpu"] for r in rows if r["older"] and r["native"]["passed"]]
    figure = (
        f"fat: {'runs on all ' + str(len(rows)) if fat_ok else 'FAILS on some'}; native runs on: "
        f"{', '.join(native_runs) or 'none'} (this CPU: x86-64-{host.level()})"
    )
    other = next((r for r in rows if r["older"] and not r["native"]["passed"] and not r["native"].get("sigill")), None)
    if fat_ok and not older_runs and other:
        return {
            "figure": figure,
            "verdict": f"not measured: on {other['cpu']} the native build {other['native']['outcome']}",
        }
    if fat_ok and not any(r["older"] for r in rows):
        return {"figure": figure, "verdict": f"not measured: no generation is below this host's x86-64-{host.level()}"}
    met = fat_ok and not older_runs
    return {"figure": figure, "verdict": "met" if met else "MISSED"}


KINDS = {
    "peak_share": peak_share,
    "flavor_over": flavor_over,
    "native_gap": native_gap,
    "abi_gap": abi_gap,
    "emulated": emulated,
    "preload_gain": preload_gain,
    "level_gain": level_gain,
    "layout_gap": layout_gap,
}


def judge(apps: List[dict], peak: dict) -> List[dict]:
    """Every goal with its figure and verdict; one of an application the run
    did not measure says so."""
    by_app = {a["app"]: a for a in apps}
    judged = []
    for goal in every():
        app = by_app.get(goal["app"])
        result = (
            KINDS[goal["kind"]](goal, app, peak)
            if app
            else {"figure": "-", "verdict": f"not measured: {goal['app']} not in this run"}
        )
        judged.append({"goal": goal["goal"], **result})
    return judged
