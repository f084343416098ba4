"""Which flavor becomes an application's default at this site: the fastest,
but only when it beats the current default beyond the spread of the runs,
written into the site's own file (sites/<site>/site.yaml) for review."""

import statistics
from typing import Dict, List, Optional

from ruamel.yaml import YAML

from onestack import files, host, stack
from onestack.stack import site


def loadable(cases: Dict[str, dict]) -> Dict[str, dict]:
    """The cases with the runs of the flavors their unversioned names load
    (each flavor's default version) alone: a default is written as a flavor's
    name, and the site's `versions` picks the version that name loads, so
    another version's speed must not choose it."""
    matrix = stack.load()
    return {
        name: {
            **case,
            "results": [
                r for r in case["results"] if r["kind"] != "flavor" or matrix.flavor(r["name"]).default_version
            ],
        }
        for name, case in cases.items()
    }


def measured(module: str, cases: Dict[str, dict]) -> bool:
    return any(r["name"] == module and r.get("figures") for case in cases.values() for r in case["results"])


def ranked(cases: Dict[str, dict]) -> List[str]:
    """The measured flavors, fastest first: by the geometric mean of their
    ratios over the cases."""
    by_flavor: Dict[str, list] = {}
    for case in cases.values():
        for r in case["results"]:
            if r["kind"] != "flavor":
                continue
            for fig in r.get("figures", {}).values():
                by_flavor.setdefault(r["label"], []).append(fig["ratio"])
    return sorted(by_flavor, key=lambda k: statistics.geometric_mean(by_flavor[k]))


def fastest(cases: Dict[str, dict]) -> Optional[str]:
    return next(iter(ranked(cases)), None)


def _figures(module: str, cases: Dict[str, dict]) -> str:
    """A flavor's figures in the cases, in words: median [min-max] unit."""
    words = []
    for case_name, case in cases.items():
        run = next((r for r in case["results"] if r["name"] == module), {})
        for name, fig in run.get("figures", {}).items():
            unit = case["figures"][name]["unit"]
            words.append(f"{case_name} {fig['median']:.3g} {unit} [{fig['min']:.3g}-{fig['max']:.3g}]")
    return ", ".join(words)


def reason(chosen: str, cases: Dict[str, dict], report_id: str, beyond_noise: bool) -> str:
    """Why the chosen flavor is the default, from this run: its figures
    against those of the next fastest flavor."""
    others = [m for m in ranked(cases) if m != chosen]
    against = f" against {others[0]}'s {_figures(others[0], cases)}" if others else ""
    verdict = (
        "fastest beyond the spread of the runs" if beyond_noise else "no flavor ahead beyond the spread of the runs"
    )
    return f"report {report_id}: {_figures(chosen, cases)}{against}; {verdict}"


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


def note(best: Optional[str], default: str, beyond_noise: bool, change: Optional[str], cases: Dict[str, dict]) -> str:
    """What the run did to the application's default, in words."""
    if best is None:
        return "no flavor measured"
    if change:
        return f"written into the site file: {change}; review and commit"
    if best == default:
        return "already the site default"
    if not measured(default, cases):
        return f"the default {default} was not measured in this run"
    if not beyond_noise:
        return f"not beyond the spread of the runs of the default {default}, which stays"
    return f"ahead of the default {default} in this run; only a full run over all flavors may change it"


def _this_cpu() -> tuple:
    """How a default's `measured_on` names this host's CPU: model and
    level, or the model alone (an entry recorded before the level was)."""
    return (host.describe(), host.model())


def measured_elsewhere(app: str) -> Optional[str]:
    """Where the site's default of the app was measured on another CPU than
    this host's, in words (a default is a site fact, and sites' build hosts
    and nodes differ); None where it was measured on this one: the same
    model and level (a VM may hide AVX-512 from the same model), or the same
    model for an entry recorded before the level was."""
    entry = site.load().default_flavors.get(app)
    if entry is None or entry["measured_on"] in _this_cpu():
        return None
    return f"the site default {entry['flavor']} was measured on {entry['measured_on']}, not on this host's CPU"


def change(app: str, module: str) -> str:
    """What record() will write for the app, in words: a new flavor, or the
    same one re-measured (and where it was chosen before)."""
    file = site.load().file
    # Its flavor's name: a default flavor holds in every version (the site's
    # `versions` chooses which one loads).
    flavor = stack.load().flavor(module).name
    before = site.load().default_flavors.get(app, {})
    notes = ["kept, its reason re-measured"] if before.get("flavor") == flavor else []
    if before.get("measured_on", host.describe()) not in _this_cpu():
        notes.append(f"chosen before on {before['measured_on']}")
    return f"{file}: default_flavors.{app}: {flavor}" + (f" ({'; '.join(notes)})" if notes else "")


def record(app: str, module: str, why: str) -> str:
    """Write the app's default at this site with this run's reason and CPU
    (default_flavors of the site file, comments kept): a new flavor, or the
    same one re-measured; returns the change in words (change())."""
    said = change(app, module)
    file = site.load().file
    yaml = YAML()
    yaml.width = 100
    document = yaml.load(file.read_text())
    defaults = document.setdefault("default_flavors", {})
    defaults[app] = {"flavor": stack.load().flavor(module).name, "why": why, "measured_on": host.describe()}
    with files.replacing(file) as partial, open(partial, "w") as handle:
        yaml.dump(document, handle)
    site._load.cache_clear()
    stack._load.cache_clear()
    return said
