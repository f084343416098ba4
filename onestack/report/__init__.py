"""The flavor benchmark report (`make report`): every published flavor, the
benchmark-only builds and the baselines run side by side on the figures of
the test problems (measure.py), against the measured peak (peak.py), judged
by the goals of report/goals.yaml (goals.py), with the site default moved
only beyond the spread of the runs (defaults.py), each fat flavor against its
native twin in alternating pairs (pairs.py), the CPU's peak sought with the
fastest HPL flavor (peak_search.py), written as an HTML page
with charts (page.py) into $ONESTACK_PREFIX/reports/<time>/.

`onestack report qe hpl/mkl-mpich` measures a selection (apps or flavors);
only a run over all of an app's flavors may change its site default."""

import json
import os
import time
from pathlib import Path
from typing import List, Optional

from onestack import host, paths, problems, stack
from onestack.errors import OnestackError
from onestack.modules import publish
from onestack.report import defaults, goals, interconnect, measure, page, pairs, peak, peak_search


def reports_dir() -> Path:
    return paths.prefix() / "reports"


def latest() -> Path:
    done = sorted(d for d in reports_dir().glob("*") if (d / "index.html").is_file()) if reports_dir().is_dir() else []
    if not done:
        raise OnestackError("no report yet: run `make report`")
    return done[-1]


def _selected(contestant: dict, app: str, only: List[str]) -> bool:
    """Whether a selection (apps or app/flavor names; empty: everything)
    takes a contestant. The yardsticks of an application (reference,
    baselines) come with any flavor of it; a native twin, or a run without
    the flavor's preload, with the flavor it accompanies."""
    if not only or app in only:
        return True
    if contestant["kind"] in ("reference", "baseline"):
        return any(o.startswith(f"{app}/") for o in only)
    return contestant.get("of", contestant["name"]) in only


def _check_selection(only: List[str], published: List[str]) -> None:
    known = set(problems.apps()) | set(published)
    unknown = [o for o in only if o not in known]
    if unknown:
        raise problems.ProblemError(
            f"report: {', '.join(unknown)}: neither an application with test problems nor a published flavor "
            f"(published: {', '.join(published)})"
        )


def _measured_cases(app: str, reduced: bool) -> List[problems.Problem]:
    """The app's cases that have figures. A reduced run checks the report's
    code path, not the figures (tests/test_problems.py runs every case): its
    first case only, which keeps it to minutes as the flavors grow."""
    cases = [p for p in problems.load(app, benchmarks=not reduced).values() if p["figures"]]
    return cases[:1] if reduced else [problems.full_size(p) for p in cases]


def _rounds(reduced: bool) -> tuple:
    """Runs of each contestant on a case, and whether a warm-up precedes them."""
    return (1, False) if reduced else (3, True)


def _measure_cases(init: Path, app: str, contestants: List[dict], out: Path, reduced: bool) -> dict:
    """Every contestant on each of the app's cases with figures, in rounds
    (3 after a warm-up; reduced: one)."""
    repeats, warmup = _rounds(reduced)
    cases = {}
    for problem in _measured_cases(app, reduced):
        results = measure.measure_case(init, contestants, problem, out / "runs" / app / problem.case, repeats, warmup)
        measure.ratios(results, problem)
        cases[problem.case] = {
            "results": results,
            "params": problem["params"],
            "figures": problem["figures"],
            "benchmark": problem["benchmark_only"],
            "ranks": problem["ranks"],
        }
    return cases


def _default(app: str, cases: dict, out: Path, full: bool) -> dict:
    """The app's fastest flavor and what the run did to its site default."""
    headline = defaults.loadable(goals._headline(cases))
    best = defaults.fastest(headline)
    default = next(f.module_name for f in stack.load().flavors if f.app.module == app and f.is_default)
    beyond_noise = best is not None and defaults.clearly_faster(best, default, headline)
    chosen = best if beyond_noise else default
    written = full and best is not None
    change = defaults.change(app, chosen) if written else None
    return {
        "app": app,
        "cases": cases,
        "fastest": best,
        "default_change": change,
        "default_note": defaults.note(best, default, beyond_noise, change, headline),
        "default_measured_elsewhere": defaults.measured_elsewhere(app),
        # Written by _record_defaults, once the whole report is written
        "default_record": (app, chosen, defaults.reason(chosen, headline, out.name, beyond_noise)) if written else None,
    }


def _pending_defaults(apps: List[dict]) -> List[tuple]:
    """The apps' defaults to write, taken out of what the report saves."""
    return [record for a in apps if (record := a.pop("default_record"))]


def _record_defaults(pending: List[tuple]) -> None:
    """The defaults into the site file, once the report is whole: a report
    that fails half-way must not have changed what `module load <app>`
    loads at the next publish."""
    for app, module, why in pending:
        print(f"==> report: {defaults.record(app, module, why)}")


def _measure_app(
    init: Path, app: str, contestants: List[dict], out: Path, reduced: bool, only: List[str]
) -> Optional[dict]:
    cases = _measure_cases(init, app, contestants, out, reduced)
    if not cases:
        return None
    # Only a full run over all of an app's flavors may name its default; it
    # also restates a default that stays with this run's figures and CPU.
    full = not reduced and (not only or app in only)
    return {
        **_default(app, cases, out, full),
        "native_pairs": pairs.measure_pairs(init, contestants, app, out / "pairs", reduced),
        "abi_pairs": pairs.measure_abi_pairs(init, contestants, app, out / "abi-pairs", reduced),
        "emulated": [] if reduced else measure.emulated(init, contestants, app, out / "emulated"),
    }


def _search_peak(init: Path, app: dict, peak_gflops: float, cores: int, out: Path, reduced: bool) -> Optional[dict]:
    """The app's problem with a `peak_search`, run with its fastest flavor."""
    searched = [p for p in problems.load(app["app"]).values() if "peak_search" in p.spec]
    if not searched or app["fastest"] is None:
        return None
    found = peak_search.search(init, app["fastest"], searched[0], peak_gflops, cores, out / "peak-search", reduced)
    print(
        f"==> report: peak search chose {found['best']} ({found['why']})"
        if found["best"]
        else f"==> report: peak search: {found['why']}"
    )
    return found


def _start(only: List[str], suffix: str = "") -> tuple:
    """The live tree's init script and published flavors, the selection
    checked, and the new report's folder."""
    published = publish.release_manifest(publish.current_release())["flavors"]
    _check_selection(only, published)
    out = reports_dir() / (time.strftime("%Y%m%d-%H%M%S") + suffix)
    out.mkdir(parents=True)
    print(f"==> report: host {host.describe()}", flush=True)
    return publish.init_of(publish.current_release()), published, out


def make_defaults(apps: List[str]) -> Path:
    """What the site defaults rest on, alone: every published flavor of
    each named application side by side on its cases (3 rounds after a
    warm-up), and the defaults written as a full report writes them. No
    yardsticks, pairs, peak or page: a full report takes hours on 2 cores,
    and a site re-measures its defaults after each change of its stack."""
    if not apps or any("/" in a for a in apps):
        raise OnestackError("report --defaults: name whole applications (a default rests on all their flavors)")
    published = publish.release_manifest(publish.current_release())["flavors"]
    unpublished = [app for app in apps if not any(m.startswith(f"{app}/") for m in published)]
    if unpublished:
        raise OnestackError(
            f"report --defaults: no flavor of {', '.join(unpublished)} is published in the current release "
            f"({publish.current_release()}); publish them first (make stack)"
        )
    init, published, out = _start(apps, "-defaults")
    flavors = [c for c in measure.contestants(published) if c["kind"] == "flavor"]
    measured = []
    for app in apps:
        cases = _measure_cases(init, app, [c for c in flavors if c["app"] == app], out, reduced=False)
        measured.append(_default(app, cases, out, full=True))
        print(f"==> report: fastest {app} flavor: {measured[-1]['fastest']} ({measured[-1]['default_note']})")
    pending = _pending_defaults(measured)
    (out / "results.json").write_text(json.dumps({"host": host.describe(), "apps": measured}, indent=1, default=str))
    print(f"==> report: {out / 'results.json'}")
    _record_defaults(pending)
    return out


def make(reduced: bool, only: Optional[List[str]] = None) -> Path:
    """Run every selected contestant on every case and write the report."""
    only = only or []
    init, published, out = _start(only)
    repeats, warmup = _rounds(reduced)
    cpus = sorted(os.sched_getaffinity(0))
    cpu = host.describe()
    before = peak.measure(cpus)
    everyone = measure.contestants(published)
    apps = []
    for app in problems.apps():
        contestants = [c for c in everyone if c["app"] == app and _selected(c, app, only)]
        measured = _measure_app(init, app, contestants, out, reduced, only) if contestants else None
        if measured:
            apps.append(measured)
    measured_peak = peak.combined(before, peak.measure(cpus))
    print(
        f"==> report: measured peak {measured_peak['gflops']:.1f} GFLOPS ({measured_peak['isa']} multiply-adds, "
        f"{measured_peak['cores']} cores; {len(measured_peak['samples'])} samples before and after the runs: "
        f"median {measured_peak['median']:.1f}, min {measured_peak['min']:.1f})"
    )
    # The search after the peak's last samples: its shares and where it
    # stops are judged against the peak the page and the goal show.
    for a in apps:
        a["peak_search"] = _search_peak(init, a, measured_peak["gflops"], len(cpus), out, reduced)
    _chart(out, apps, measured_peak, f"report {out.name}, {cpu}")
    judged = goals.judge(apps, measured_peak)
    links = interconnect.measure(reduced)
    print(
        "==> report: MPI benchmarks within a node and between 2 nodes of the virtual cluster:\n"
        + links.get("table", links.get("skipped", ""))
    )
    pending = _pending_defaults(apps)
    # results.json before index.html: the page is the mark of a whole report (latest).
    (out / "results.json").write_text(
        json.dumps(
            {"host": cpu, "peak": measured_peak, "apps": apps, "goals": judged, "interconnect": links},
            indent=1,
            default=str,
        )
    )
    page.write(
        out,
        apps=apps,
        peak=measured_peak,
        goals=judged,
        reduced=reduced,
        repeats=repeats,
        warmup=warmup,
        created=out.name,
        release=publish.current_release().name,
        interconnect=links,
        host=cpu,
    )
    _record_defaults(pending)
    _print_verdicts(judged, apps, cpu)
    print(f"==> report: {out / 'index.html'}")
    return out


def _chart(out: Path, apps: List[dict], measured_peak: dict, source: str) -> None:
    """Each case's chart of each figure, against the measured peak of the
    cores its runs take (a rank each)."""
    for a in apps:
        for case, measured in a["cases"].items():
            its_peak = peak.of_cores(measured_peak, measured["ranks"])
            measured["charts"] = [
                page.chart(out, a["app"], case, name, how, measured["results"], its_peak, source)
                for name, how in measured["figures"].items()
            ]


def _print_verdicts(judged: List[dict], apps: List[dict], cpu: str) -> None:
    """The goals' verdicts and each application's fastest flavor, for the log."""
    for goal in judged:
        print(f"==> report: goal {goal['goal']}: {goal['figure']} [{goal['verdict']}]")
    for a in apps:
        print(f"==> report: fastest {a['app']} flavor: {a['fastest']} ({a['default_note']})")
        if a["default_measured_elsewhere"]:
            print(f"==> report: {a['app']}: {a['default_measured_elsewhere']} ({cpu})")
