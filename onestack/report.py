"""The flavor benchmark report: every published flavor, and each
application's reference (the Netlib baseline), run side by side on the
benchmark figures of the test problems (tests/problems/<app>/<case>.yaml
`figures`), through `module load` as users run them. Writes an HTML page and
PNG charts into $ONESTACK_PREFIX/reports/<time>/; ratios are the headline.

Benchmark hygiene (shared/context/seed-facts.md): one warm-up run that is not
counted, then repeats; the median and the spread (min-max) are shown; ranks
are bound to cores by the flavor module (HYDRA_BINDING=core for MPICH)."""

import json
import math
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import jinja2

from onestack import flavors, paths, problems, publish, spack, status
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


def measure_peak(cores: int) -> dict:
    """This CPU's floating-point peak, measured: report/fma_peak.c on every core at once."""
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "fma_peak"
        subprocess.run(["gcc", "-O3", "-o", str(exe), str(FMA_PEAK_SOURCE)], check=True)
        runs = [subprocess.Popen([str(exe)], stdout=subprocess.PIPE, text=True) for _ in range(cores)]
        lines = [r.communicate()[0].split() for r in runs]
    return {"gflops": sum(float(line[1]) for line in lines), "isa": lines[0][0], "cores": cores}


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
        runs.append({"name": ref.module_name, "label": f"{ref.module_name} ({kind})", "module": host,
                     "kind": kind,
                     "prelude": f"export PATH='{root['prefix']}/bin':$PATH"})
    return runs


def _baselines(every: List[Flavor]) -> List[dict]:
    """What users would pick instead (an application's `baselines`), run with
    no module loaded, its MPI launcher in place of mpirun."""
    runs = []
    for app in {f.app.module: f.app for f in every}.values():
        for name, base in app.baselines:
            installed = subprocess.run(["dpkg-query", "-W", "-f=${Status}", base["apt"]],
                                       capture_output=True, text=True).stdout.endswith("installed")
            if not installed:
                print(f"==> report: baseline {name} left out: Debian package {base['apt']} is not installed")
                continue
            runs.append({"name": f"{app.module}/{name}", "label": f"{name} (baseline)", "module": "",
                         "app": app.module, "kind": "baseline",
                         "prelude": f'mpirun() {{ {base["launcher"]} "$@"; }}'})
    return runs


def _same_mpi(every: List[Flavor], module: str, ref: Flavor) -> bool:
    flavor = next(f for f in every if f.module_name == module)
    return flavor.app is ref.app and flavor.mpi == ref.mpi


def _measure(init: Path, run: dict, case: str, problem: dict, workdir: Path, repeats: int, warmup: bool) -> dict:
    """Median and spread of each figure over repeats (after an uncounted warm-up)."""
    samples: Dict[str, List[float]] = {}
    for i in range(repeats + (1 if warmup else 0)):
        rundir = workdir / f"run{i}"
        try:
            checks = problems.run(init, run["module"], problem, rundir, prelude=run["prelude"])
        except RuntimeError as err:  # a broken contestant is reported, the others still measured
            status.record_result(run["name"], case, False, [str(err)[:300]])
            return {"error": str(err)[:300]}
        # The flavor table's test column (the reference has no module the tests could load).
        status.record_result(run["name"], case, all(c.passed for c in checks), [str(c) for c in checks])
        if not all(c.passed for c in checks):
            return {"error": "; ".join(str(c) for c in checks if not c.passed)}
        if warmup and i == 0:
            continue
        for name, value in problems.figures(problem, (rundir / "output.txt").read_text()).items():
            samples.setdefault(name, []).append(value)
    return {name: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}
            for name, v in samples.items()}


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
    labels = [r["label"].replace(" (", "\n(") for r in rows]
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


def _fastest(app_results: Dict[str, List[dict]]) -> Optional[str]:
    """The flavor with the best geometric mean of its ratios over every case."""
    by_flavor: Dict[str, List[float]] = {}
    for results in app_results.values():
        for r in results:
            if r["kind"] != "flavor":
                continue
            for fig in r.get("figures", {}).values():
                by_flavor.setdefault(r["label"], []).append(fig["ratio"])
    if not by_flavor:
        return None
    return min(by_flavor, key=lambda k: statistics.geometric_mean(by_flavor[k]))


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


def make(reduced: bool) -> Path:
    """Run every contestant on every case and write the report."""
    init = publish.current_release() / "init" / "bash"
    published = publish.release_manifest(publish.current_release())["flavors"]
    repeats, warmup = (1, False) if reduced else (3, True)
    out = reports_dir() / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    peak = measure_peak(os.cpu_count() or 1)
    print(f"==> report: measured peak {peak['gflops']:.1f} GFLOPS ({peak['isa']} FMA, {peak['cores']} cores)")
    apps = []
    for app in problems.apps():
        contestants = [c for c in _contestants(published)
                       if c["module"].startswith(f"{app}/") or c.get("app") == app]
        cases = {}
        for case, problem in problems.load(app, benchmarks=not reduced).items():
            if not problem.get("figures"):
                continue
            problem = {**problem, "params": problem.get("params", {}) if reduced else full_size_params(problem)}
            results = []
            for c in contestants:
                print(f"==> report: {app}/{case}: {c['label']} ({repeats} runs{', after a warm-up' if warmup else ''})",
                      flush=True)
                measured = _measure(init, c, case, problem, out / "runs" / app / case / c["name"].replace("/", "_"),
                                    repeats, warmup)
                results.append({**c, "figures": {} if "error" in measured else measured,
                                "error": measured.get("error")})
            _ratios(results, problem)
            charts = [_chart(out, app, case, name, how, results, peak)
                      for name, how in problem["figures"].items()]
            cases[case] = {"results": results, "charts": charts, "params": problem["params"],
                           "figures": problem["figures"]}
        if not cases:
            continue
        fastest = _fastest({k: v["results"] for k, v in cases.items()})
        change = adopt_default(app, fastest) if fastest and not reduced else None
        apps.append({"app": app, "cases": cases, "fastest": fastest, "default_change": change})
    goals = _goals(apps, peak)
    html = jinja2.Template(TEMPLATE.read_text(), undefined=jinja2.StrictUndefined).render(
        apps=apps, peak=peak, goals=goals, reduced=reduced, repeats=repeats, warmup=warmup,
        created=out.name, release=publish.current_release().name)
    (out / "index.html").write_text(html)
    (out / "results.json").write_text(json.dumps({"peak": peak, "apps": apps, "goals": goals}, indent=1))
    for goal in goals:
        print(f"==> report: goal {goal['goal']}: {goal['figure']} {goal['verdict']}")
    for a in apps:
        print(f"==> report: fastest {a['app']} flavor: {a['fastest']}"
              + (f" (written: {a['default_change']}; review and commit)" if a["default_change"] else ""))
    print(f"==> report: {out / 'index.html'}")
    return out


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
            share = max(flavors_only) / peak["gflops"]
            goals.append({"goal": "best HPL >= 90% of measured peak",
                          "figure": f"{max(flavors_only):.1f} of {peak['gflops']:.1f} GFLOPS = {share:.0%}",
                          "verdict": "met" if share >= 0.9 else "MISSED"})
        if flavors_only and refs:
            slower = max(flavors_only) / refs[0]
            goals.append({"goal": "Netlib baseline >= 5x slower than the best flavor",
                          "figure": f"{slower:.1f}x", "verdict": "met" if slower >= 5 else "MISSED"})
    goals += [g for g in map(_native_goal, apps) if g]
    goals.append(_baseline_goal(next((a for a in apps if a["app"] == "qe"), None)))
    return goals


def _native_goal(app: dict) -> Optional[dict]:
    """The fat flavor against its native twin: how much slower it is, the
    geometric mean over every case and figure of its ratio to the twin's."""
    gaps, cases = [], []
    for case, measured in app["cases"].items():
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


def _baseline_goal(qe: Optional[dict]) -> dict:
    """Best QE flavor against Debian's QE: geometric mean over the cases of
    the baseline's wall time over the best flavor's."""
    goal = "best QE flavor >= 1.3x Debian's QE (wall time)"
    speedups = []
    for case in (qe or {}).get("cases", {}).values():
        times = {r["kind"]: [] for r in case["results"]}
        for r in case["results"]:
            if "wall_time" in r["figures"]:
                times[r["kind"]].append(r["figures"]["wall_time"]["median"])
        if times.get("baseline") and times.get("flavor"):
            speedups.append(times["baseline"][0] / min(times["flavor"]))
    if not speedups:
        return {"goal": goal, "figure": "-", "verdict": "not measured: Debian's QE is not installed"}
    speedup = statistics.geometric_mean(speedups)
    return {"goal": goal, "figure": f"{speedup:.2f}x over {len(speedups)} cases",
            "verdict": "met" if speedup >= 1.3 else "MISSED"}
