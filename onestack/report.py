"""The flavor benchmark report: every published flavor, and each
application's reference (the Netlib baseline), run side by side on the
benchmark figures of the test problems (tests/problems/<app>/<case>.yaml
`figures`), through `module load` as users run them. Writes an HTML page and
PNG charts into $ONESTACK_PREFIX/reports/<time>/; ratios are the headline.

Benchmark hygiene (shared/context/seed-facts.md): one warm-up round that is
not counted, then repeated rounds, each running every contestant once; the
median and the spread (min-max) are shown; ranks are bound to cores by the
flavor module (HYDRA_BINDING=core for MPICH).

`onestack report qe hpl/mkl-mpich` measures a selection (apps or flavors);
only a run over all of an app's flavors writes its site default, and only
for a flavor faster than the current default beyond the spread of the runs."""

import functools
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import jinja2

from onestack import emulate, flavors, paths, problems, publish, spack, status
from onestack.flavors import Flavor

FMA_PEAK_SOURCE = paths.REPO / "report" / "fma_peak.c"
TEMPLATE = paths.REPO / "report" / "report.html.j2"


def reports_dir() -> Path:
    return paths.prefix() / "reports"


def latest() -> Path:
    done = sorted(d for d in reports_dir().glob("*") if (d / "index.html").is_file()) if reports_dir().is_dir() else []
    if not done:
        raise FileNotFoundError("no report yet: run `make report`")
    return done[-1]


# Samples of the peak, before the runs and again after them.
PEAK_SAMPLES = 5


def measure_peak(cpus: List[int]) -> dict:
    """This CPU's floating-point peak, measured: report/fma_peak.c on every
    CPU at once, each process pinned to its own, PEAK_SAMPLES times."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "fma_peak"
        subprocess.run(["gcc", "-O3", "-o", str(exe), str(FMA_PEAK_SOURCE)], check=True)
        samples = [_fma_sample(exe, cpus) for _ in range(PEAK_SAMPLES)]
    return {"isa": samples[0][0], "cores": len(cpus), "samples": [gflops for _, gflops in samples]}


def _fma_sample(exe: Path, cpus: List[int]) -> tuple:
    """One sample: the ISA and the GFLOPS summed over the CPUs."""
    runs = [subprocess.Popen([str(exe)], stdout=subprocess.PIPE, text=True,
                             preexec_fn=functools.partial(os.sched_setaffinity, 0, {cpu}))
            for cpu in cpus]
    lines = [r.communicate()[0].split() for r in runs]
    return lines[0][0], sum(float(line[1]) for line in lines)


def combined_peak(before: dict, after: dict) -> dict:
    """The peak is the best sample, before or after the runs: on a virtual
    machine a CPU is shared with the host, and a sample during which the host
    took one ran at a fraction of the peak (19.5 of 39.7 GFLOPS was seen),
    which made HPL look faster than the CPU. The spread shows how often."""
    samples = before["samples"] + after["samples"]
    return {**before, "samples": samples, "gflops": max(samples), "min": min(samples),
            "median": statistics.median(samples)}


def _memory_bytes() -> int:
    kib = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text()).group(1)
    return int(kib) * 1024


def full_size_params(problem: dict) -> dict:
    """A problem's params for the full report, sized from this machine's memory."""
    params = dict(problem.get("params", {}))
    for key, rule in problem.get("report_params", {}).items():
        n = int(math.sqrt(rule["memory_fraction"] * _memory_bytes() / 8))
        params[key] = n - n % rule["multiple_of"]
    return params


def _contestants(published: List[str]) -> List[dict]:
    """What is measured: each published flavor, and each built benchmark-only
    build, the Netlib reference and the native twin (run from its prefix, with
    a published flavor of the same MPI loaded for the MPI)."""
    every = flavors.load()
    runs = [{"name": m, "label": m, "module": m, "prelude": "", "kind": "flavor"} for m in published]
    extra = [f for f in every if not f.published]
    roots = spack.query("flavor_roots", json.dumps([f.spack_spec() for f in extra])) if extra else {}
    runs += _baselines(every)
    for ref in extra:
        root = roots.get(ref.spack_spec())
        host = next((m for m in published if _same_mpi(every, m, ref)), None)
        if not root or not root["installed"] or host is None:
            print(f"==> report: {ref.module_name} not built or no {ref.mpi} flavor published: left out")
            continue
        kind = "reference" if ref.reference else "native"
        run = {"name": ref.module_name, "label": f"{ref.module_name} ({kind})", "module": host, "kind": kind,
               "prelude": f"export PATH='{root['prefix']}/bin':$PATH"}
        # A native twin runs right after its fat flavor, so that the two meet
        # the machine in the same state (see _round_order).
        names = [r["name"] for r in runs]
        fat = ref.module_name.removesuffix("-native")
        runs.insert(names.index(fat) + 1 if ref.native and fat in names else len(runs), run)
    return runs


def _baselines(every: List[Flavor]) -> List[dict]:
    """What users would pick instead (an application's `baselines`), run with
    no module loaded, its MPI launcher in place of mpirun."""
    runs = []
    for app in {f.app.module: f.app for f in every}.values():
        for name, base in app.baselines:
            prelude = _baseline_prelude(name, base)
            if prelude is not None:
                runs.append({"name": f"{app.module}/{name}", "label": f"{name} (baseline)", "module": "",
                             "app": app.module, "kind": "baseline", "prelude": prelude})
    return runs


def _baseline_prelude(name: str, base: dict) -> Optional[str]:
    """Shell lines that put a baseline's programs and launcher in place;
    None, said why, when it is not on this machine."""
    launcher = f'mpirun() {{ {base["launcher"]} "$@"; }}'
    if "apt" in base:
        installed = subprocess.run(["dpkg-query", "-W", "-f=${Status}", base["apt"]],
                                   capture_output=True, text=True).stdout.endswith("installed")
        if not installed:
            print(f"==> report: baseline {name} left out: Debian package {base['apt']} is not installed")
        return launcher if installed else None
    venv_bin = _pip_baseline(name, base["pip"])
    return None if venv_bin is None else f"export PATH='{venv_bin}':$PATH\n{launcher}"


def _pip_baseline(name: str, requirement: str) -> Optional[Path]:
    """The bin/ of a virtualenv of its own holding a PyPI baseline (its
    wheels bring their own MPI, which must not meet the project's Python),
    installed on first use; None, said why, when pip cannot get it."""
    venv = paths.cache() / "baselines" / name
    stamp = venv / ".requirement"
    if not (stamp.is_file() and stamp.read_text() == requirement):
        print(f"==> report: baseline {name}: pip install {requirement}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
                              requirement], capture_output=True, text=True)
        if pip.returncode != 0:
            print(f"==> report: baseline {name} left out: pip could not install {requirement}:\n"
                  f"{pip.stderr[-1500:]}")
            return None
        stamp.write_text(requirement)
    return venv / "bin"


def _same_mpi(every: List[Flavor], module: str, ref: Flavor) -> bool:
    flavor = next(f for f in every if f.module_name == module)
    return flavor.app is ref.app and flavor.mpi == ref.mpi


def _measure_case(init: Path, contestants: List[dict], case: str, problem: dict, casedir: Path,
                  repeats: int, warmup: bool) -> List[dict]:
    """Every contestant on one case, in rounds: each round runs each contestant
    once, so a drift of the machine's speed (other tenants, clock changes)
    falls on all of them alike instead of on whoever ran last, and each round
    starts one further down the list (_round_order). Round 0 is the uncounted
    warm-up. Median and spread of each figure per contestant."""
    samples: Dict[str, Dict[str, List[float]]] = {c["name"]: {} for c in contestants}
    errors: Dict[str, str] = {}
    for i in range(repeats + (1 if warmup else 0)):
        counted = not (warmup and i == 0)
        order = [c for c in _round_order(contestants, i) if c["name"] not in errors]
        print(f"==> report: {case}: {'warm-up round' if not counted else f'round {i + 1 - warmup} of {repeats}'}"
              f" ({', '.join(c['label'] for c in order)})", flush=True)
        for c in order:
            rundir = casedir / c["name"].replace("/", "_") / f"run{i}"
            error = _run_once(init, c, case, problem, rundir)
            if error:  # a broken contestant is reported, the others still measured
                errors[c["name"]] = error
            elif counted:
                for name, value in problems.figures(problem, (rundir / "output.txt").read_text()).items():
                    samples[c["name"]].setdefault(name, []).append(value)
    return [{**c, "error": errors.get(c["name"]),
             "figures": {} if c["name"] in errors else
             {name: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}
              for name, v in samples[c["name"]].items()}}
            for c in contestants]


def _round_order(contestants: List[dict], i: int) -> List[dict]:
    """Round i starts at the i-th contestant. In a fixed order the same
    contestant always ran first, after the previous case or round, and the
    same one after the minute-long Netlib run: here that position alone made
    a build 8-17% slower or faster than its twin (HPL, QE's surface), where
    runs side by side found them within 3%."""
    k = i % len(contestants)
    return contestants[k:] + contestants[:k]


def _run_once(init: Path, run: dict, case: str, problem: dict, rundir: Path) -> Optional[str]:
    """One run of one contestant, recorded in the flavor table's test column
    (the reference has no module the tests could load); the error, if any."""
    try:
        checks = problems.run(init, run["module"], problem, rundir, prelude=run["prelude"])
    except RuntimeError as err:
        status.record_result(run["name"], case, False, [str(err)[:300]])
        return str(err)[:300]
    status.record_result(run["name"], case, all(c.passed for c in checks), [str(c) for c in checks])
    failed = [str(c) for c in checks if not c.passed]
    return "; ".join(failed) or None


def _ratios(results: List[dict], problem: dict) -> None:
    """Each figure as a ratio to the best flavor's (1.00 = best; higher is worse)."""
    for name, how in problem.get("figures", {}).items():
        medians = [r["figures"][name]["median"] for r in results if name in r.get("figures", {})]
        if not medians:
            continue
        best = max(medians) if how["better"] == "higher" else min(medians)
        for r in results:
            if name in r.get("figures", {}):
                m = r["figures"][name]["median"]
                r["figures"][name]["ratio"] = best / m if how["better"] == "higher" else m / best


def _chart(out: Path, app: str, case: str, name: str, how: dict, results: List[dict],
           peak: Optional[dict]) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results if name in r.get("figures", {})]
    # The title names the application: the bars need only the flavor (long
    # names such as hpl/openblas-mvapich2 ran into each other).
    labels = [r["label"].removeprefix(f"{app}/").replace(" (", "\n(") for r in rows]
    medians = [r["figures"][name]["median"] for r in rows]
    spread = [[m - r["figures"][name]["min"] for m, r in zip(medians, rows)],
              [r["figures"][name]["max"] - m for m, r in zip(medians, rows)]]
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(rows), 3.6))
    colors = [{"reference": "#999999", "native": "#dd6b20", "baseline": "#805ad5"}.get(r["kind"], "#2b6cb0")
              for r in rows]
    ax.bar(range(len(rows)), medians, yerr=spread, capsize=4, color=colors)
    if peak and how["unit"] == "GFLOPS":
        ax.axhline(peak["gflops"], color="#c53030", linestyle="--",
                   label=f"measured FMA peak {peak['gflops']:.0f} GFLOPS")
        ax.legend(loc="upper right", fontsize=8)
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylabel(f"{name} ({how['unit']}, {how['better']} is better)")
    ax.set_title(f"{app}: {case} (median, min-max bars)")
    fig.tight_layout()
    file = f"{app}-{case}-{name}.png"
    fig.savefig(out / file, dpi=110)
    plt.close(fig)
    return file


def _fastest(cases: Dict[str, dict]) -> Optional[str]:
    """The flavor with the best geometric mean of its ratios over the cases."""
    by_flavor: Dict[str, List[float]] = {}
    for case in cases.values():
        for r in case["results"]:
            if r["kind"] != "flavor":
                continue
            for fig in r.get("figures", {}).values():
                by_flavor.setdefault(r["label"], []).append(fig["ratio"])
    if not by_flavor:
        return None
    return min(by_flavor, key=lambda k: statistics.geometric_mean(by_flavor[k]))


def clearly_faster(challenger: str, default: str, cases: Dict[str, dict]) -> bool:
    """Whether a flavor beats the current default beyond the spread of the
    runs: on every figure of the cases, its worst run is better than the
    default's best. The flavors of one application are often within a few
    percent of each other, less than a shared virtual CPU's run-to-run
    spread, and a default must not flip with the noise. A default that was
    not measured (not built here) is beaten by any measured flavor."""
    if challenger == default:
        return False
    pairs = []
    for case in cases.values():
        by_name = {r["name"]: r for r in case["results"]}
        for name, how in case["figures"].items():
            new, old = (by_name.get(n, {}).get("figures", {}).get(name) for n in (challenger, default))
            if old is None:
                continue
            higher = how["better"] == "higher"
            pairs.append(new is not None and (new["min"] > old["max"] if higher else new["max"] < old["min"]))
    return all(pairs)


def _default_note(fastest: Optional[str], default: str, beyond_noise: bool, change: Optional[str]) -> str:
    """What the run did to the application's default, in words."""
    if fastest is None:
        return "no flavor measured"
    if change:
        return f"written as the site default: {change}; review and commit"
    if fastest == default:
        return "already the site default"
    if not beyond_noise:
        return f"not beyond the spread of the runs of the default {default}, which stays"
    return f"ahead of the default {default} in this run; only a full run over all flavors may change it"


def adopt_default(app: str, module: str) -> Optional[str]:
    """Write the fastest flavor as the app's default_flavor in its environment
    file (in the working tree, for review in a commit); returns the change."""
    file = next(f.app.file for f in flavors.load() if f.app.module == app)
    text = file.read_text()
    flavor = module.split("/", 1)[1]
    new = re.sub(r"^default_flavor: .*$", f"default_flavor: {flavor}", text, count=1, flags=re.M)
    if new == text:
        return None
    file.write_text(new)
    return f"{file.relative_to(paths.REPO)}: default_flavor: {flavor}"


def _selected(contestant: dict, app: str, only: List[str]) -> bool:
    """Whether a selection (`onestack report qe hpl/mkl-mpich`: apps or
    app/flavor names; empty: everything) takes a contestant. The yardsticks of
    an application (reference, baselines) come with any flavor of it; a
    native twin with its fat flavor."""
    if not only or app in only:
        return True
    if contestant["kind"] in ("reference", "baseline"):
        return any(o.startswith(f"{app}/") for o in only)
    return contestant["name"].removesuffix("-native") in only


def _check_selection(only: List[str], published: List[str]) -> None:
    known = set(problems.apps()) | set(published)
    unknown = [o for o in only if o not in known]
    if unknown:
        raise problems.ProblemError(
            f"report: {', '.join(unknown)}: neither an application with test problems nor a published flavor "
            f"(published: {', '.join(published)})")


def make(reduced: bool, only: Optional[List[str]] = None) -> Path:
    """Run every selected contestant on every case and write the report."""
    only = only or []
    init = publish.current_release() / "init" / "bash"
    published = publish.release_manifest(publish.current_release())["flavors"]
    _check_selection(only, published)
    repeats, warmup = (1, False) if reduced else (3, True)
    out = reports_dir() / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    cpus = sorted(os.sched_getaffinity(0))
    before = measure_peak(cpus)
    apps = []
    everyone = _contestants(published)
    for app in problems.apps():
        contestants = [c for c in everyone
                       if (c["module"].startswith(f"{app}/") or c.get("app") == app) and _selected(c, app, only)]
        if not contestants:
            continue
        cases = {}
        for case, problem in _measured_cases(app, reduced):
            problem = {**problem, "params": problem.get("params", {}) if reduced else full_size_params(problem)}
            results = _measure_case(init, contestants, case, problem, out / "runs" / app / case,
                                    repeats, warmup)
            _ratios(results, problem)
            cases[case] = {"results": results, "params": problem["params"],
                           "figures": problem["figures"], "benchmark": bool(problem.get("benchmark_only"))}
        if not cases:
            continue
        emulated = [] if reduced else _emulated(init, contestants, app, out / "emulated")
        fastest = _fastest(_headline(cases))
        default = next(f.module_name for f in flavors.load() if f.app.module == app and f.is_default)
        beyond_noise = fastest is not None and clearly_faster(fastest, default, _headline(cases))
        # Only a full run over all of an app's flavors may name its default.
        full = not reduced and (not only or app in only)
        change = adopt_default(app, fastest) if beyond_noise and full else None
        apps.append({"app": app, "cases": cases, "fastest": fastest, "default_change": change,
                     "default_note": _default_note(fastest, default, beyond_noise, change), "emulated": emulated})
    peak = combined_peak(before, measure_peak(cpus))
    print(f"==> report: measured peak {peak['gflops']:.1f} GFLOPS ({peak['isa']} FMA, {peak['cores']} cores; "
          f"{len(peak['samples'])} samples before and after the runs: median {peak['median']:.1f}, "
          f"min {peak['min']:.1f})")
    for a in apps:
        for case, measured in a["cases"].items():
            measured["charts"] = [_chart(out, a["app"], case, name, how, measured["results"], peak)
                                  for name, how in measured["figures"].items()]
    goals = _goals(apps, peak)
    html = jinja2.Template(TEMPLATE.read_text(), undefined=jinja2.StrictUndefined).render(
        apps=apps, peak=peak, goals=goals, reduced=reduced, repeats=repeats, warmup=warmup,
        created=out.name, release=publish.current_release().name)
    (out / "index.html").write_text(html)
    (out / "results.json").write_text(json.dumps({"peak": peak, "apps": apps, "goals": goals}, indent=1))
    for goal in goals:
        print(f"==> report: goal {goal['goal']}: {goal['figure']} {goal['verdict']}")
    for a in apps:
        print(f"==> report: fastest {a['app']} flavor: {a['fastest']} ({a['default_note']})")
    print(f"==> report: {out / 'index.html'}")
    return out


def _measured_cases(app: str, reduced: bool) -> List[tuple]:
    """The app's cases that have figures. A reduced run checks the report's
    code path, not the figures (tests/test_problems.py runs every case): its
    first case only, which keeps it to minutes as the flavors grow."""
    cases = [(case, problem) for case, problem in problems.load(app, benchmarks=not reduced).items()
             if problem.get("figures")]
    return cases[:1] if reduced else cases


def _emulated(init: Path, contestants: List[dict], app: str, workdir: Path) -> List[dict]:
    """Each native twin and its fat flavor on the app's emulation problem
    under every CPU generation of the site (qemu): the fat build runs and
    passes, the native one dies. Not a speed figure: emulation is slow."""
    twins = [c for c in contestants if c["kind"] == "native"]
    by_name = {c["name"]: c for c in contestants}
    rows = []
    for g in flavors.cpu_generations() if twins else []:
        print(f"==> report: {app}: emulated {g['qemu']} (fat and native builds)", flush=True)
        for twin in twins:
            fat = by_name[twin["name"].removesuffix("-native")]
            row = {"cpu": g["qemu"], "isa": g["isa"], "older": g["x86_64_level"] < paths.host_x86_64_level()}
            for key, c in (("fat", fat), ("native", twin)):
                ran = emulate.run_problem(init, g["qemu"], problems.emulation_problem(app),
                                          workdir / app / g["qemu"] / c["name"].replace("/", "_"),
                                          module=c["module"], prelude=c["prelude"])
                row[key] = {"label": c["label"], "exit": ran["exit"], "passed": ran["passed"],
                            "outcome": "ran, passed its check" if ran["passed"] else
                            "illegal instruction (SIGILL)" if ran["sigill"] else f"failed (exit {ran['exit']})"}
            rows.append(row)
    return rows


def _headline(cases: Dict[str, dict]) -> Dict[str, dict]:
    """The cases the verdicts rest on: the benchmark cases when the run has
    them. The test-sized ones finish in well under a second, where start-up
    and the timer's 0.01 s resolution decide the ratio."""
    benchmarks = {k: v for k, v in cases.items() if v["benchmark"]}
    return benchmarks or cases


def _goals(apps: List[dict], peak: dict) -> List[dict]:
    """The report's goals, each with its measured figure or why it is not measured."""
    hpl = next((a for a in apps if a["app"] == "hpl"), None)
    goals = []
    if hpl:
        results = [r for case in hpl["cases"].values() for r in case["results"] if "hpl_gflops" in r["figures"]]
        gflops = {r["name"]: r["figures"]["hpl_gflops"]["median"] for r in results}
        flavors_only = [gflops[r["name"]] for r in results if r["kind"] == "flavor"]
        refs = [gflops[r["name"]] for r in results if r["kind"] == "reference"]
        if flavors_only:
            goals.append(peak_goal(max(flavors_only), max(r["figures"]["hpl_gflops"]["max"] for r in results), peak))
        if flavors_only and refs:
            slower = max(flavors_only) / refs[0]
            goals.append({"goal": "Netlib baseline >= 5x slower than the best flavor",
                          "figure": f"{slower:.1f}x", "verdict": "met" if slower >= 5 else "MISSED"})
    goals += [g for g in map(_native_goal, apps) if g]
    goals += [g for g in map(_emulated_goal, apps) if g]
    goals.append(_baseline_goal(next((a for a in apps if a["app"] == "qe"), None)))
    return goals


def peak_goal(best: float, fastest_run: float, peak: dict) -> dict:
    """Best HPL against the measured peak; not judged when any HPL run beat
    the peak, as then the peak is what was mismeasured."""
    goal = "best HPL >= 90% of measured peak"
    share = best / peak["gflops"]
    figure = f"{best:.1f} of {peak['gflops']:.1f} GFLOPS = {share:.0%}"
    if fastest_run > peak["gflops"]:
        return {"goal": goal, "figure": figure,
                "verdict": f"not judged: an HPL run reached {fastest_run:.1f} GFLOPS, above the measured peak "
                           f"(samples {peak['min']:.1f}-{peak['gflops']:.1f}): the peak was measured on a busy CPU"}
    return {"goal": goal, "figure": figure, "verdict": "met" if share >= 0.9 else "MISSED"}


def _native_goal(app: dict) -> Optional[dict]:
    """The fat flavor against its native twin: how much slower it is, the
    geometric mean over the headline cases and figures of its ratio to the twin's."""
    gaps, cases = [], []
    for case, measured in _headline(app["cases"]).items():
        by_name = {r["name"]: r for r in measured["results"]}
        for native in (r for r in measured["results"] if r["kind"] == "native"):
            fat = by_name.get(native["name"][: -len("-native")], {})
            for name, figure in native["figures"].items():
                if name in fat.get("figures", {}):
                    gaps.append(fat["figures"][name]["ratio"] / figure["ratio"])
                    cases.append(f"{case} {name} {gaps[-1] - 1:+.1%}")
    if not gaps:
        return None
    gap = statistics.geometric_mean(gaps) - 1
    return {"goal": f"fat build within 3% of native ({app['app']})",
            "figure": f"{gap:+.1%} ({'; '.join(cases)})", "verdict": "met" if gap <= 0.03 else "MISSED"}


def _emulated_goal(app: dict) -> Optional[dict]:
    """On the emulated generations: the fat build runs on every one, the
    native build on none of a lower x86-64 level than this machine (on the
    others it may: a Zen build can run on a Haswell)."""
    rows = app.get("emulated")
    if not rows:
        return None
    fat_ok = all(r["fat"]["passed"] for r in rows)
    native_runs = [r["cpu"] for r in rows if r["native"]["passed"]]
    older_runs = [r["cpu"] for r in rows if r["older"] and r["native"]["passed"]]
    figure = (f"fat: {'runs on all ' + str(len(rows)) if fat_ok else 'FAILS on some'}; native runs on: "
              f"{', '.join(native_runs) or 'none'} (this CPU: x86-64-{paths.host_x86_64_level()})")
    return {"goal": f"on emulated older CPUs the fat build runs, the native one does not ({app['app']})",
            "figure": figure, "verdict": "met" if fat_ok and not older_runs and any(r["older"] for r in rows)
            else "MISSED"}


def _baseline_goal(qe: Optional[dict]) -> dict:
    """Best QE flavor against Debian's QE: geometric mean over the headline
    cases of the baseline's wall time over the best flavor's."""
    goal = "best QE flavor >= 1.3x Debian's QE (wall time)"
    speedups = []
    for case in _headline((qe or {}).get("cases", {})).values():
        times = {r["kind"]: [] for r in case["results"]}
        for r in case["results"]:
            if "wall_time" in r["figures"]:
                times[r["kind"]].append(r["figures"]["wall_time"]["median"])
        if times.get("baseline") and times.get("flavor"):
            speedups.append(times["baseline"][0] / min(times["flavor"]))
    if not speedups:
        why = "QE not in this report's selection" if qe is None else "Debian's QE is not installed"
        return {"goal": goal, "figure": "-", "verdict": f"not measured: {why}"}
    speedup = statistics.geometric_mean(speedups)
    return {"goal": goal, "figure": f"{speedup:.2f}x over {len(speedups)} cases",
            "verdict": "met" if speedup >= 1.3 else "MISSED"}
