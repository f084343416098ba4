"""Which flavor becomes an application's default at this site: the fastest,
but only when it beats the current default beyond the spread of the runs,
written into the site's own file (sites/<site>/site.yaml) for review."""

import statistics
from typing import Dict, Optional

from ruamel.yaml import YAML

from onestack import files, host, stack
from onestack.stack import site


def fastest(cases: Dict[str, dict]) -> Optional[str]:
    """The flavor with the best geometric mean of its ratios over the cases."""
    by_flavor: Dict[str, list] = {}
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


def note(best: Optional[str], default: str, beyond_noise: bool, change: Optional[str]) -> str:
    """What the run did to the application's default, in words."""
    if best is None:
        return "no flavor measured"
    if change:
        return f"written as the site default: {change}; review and commit"
    if best == default:
        return "already the site default"
    if not beyond_noise:
        return f"not beyond the spread of the runs of the default {default}, which stays"
    return f"ahead of the default {default} in this run; only a full run over all flavors may change it"


def measured_elsewhere(app: str) -> Optional[str]:
    """Where the site's default of the app was measured on another CPU model
    than this host's, in words (a default is a site fact, and sites' build
    hosts and nodes differ); None where it was measured on this model."""
    entry = site.load().default_flavors.get(app)
    if entry is None or entry["measured_on"] == host.model():
        return None
    return f"the site default {entry['flavor']} was measured on {entry['measured_on']}, not on this host's CPU"


def adopt(app: str, module: str, why: str) -> Optional[str]:
    """Write the fastest flavor as the app's default at this site
    (default_flavors of the site file, comments kept); returns the change."""
    file = site.load().file
    # Its flavor's name: a default flavor holds in every version (the site's
    # `versions` chooses which one loads).
    flavor = stack.load().flavor(module).name
    yaml = YAML()
    yaml.width = 100
    document = yaml.load(file.read_text())
    defaults = document.setdefault("default_flavors", {})
    if defaults.get(app, {}).get("flavor") == flavor:
        return None
    defaults[app] = {"flavor": flavor, "why": why, "measured_on": host.model()}
    with files.replacing(file) as partial, open(partial, "w") as handle:
        yaml.dump(document, handle)
    site._load.cache_clear()
    stack._load.cache_clear()
    return f"{file}: default_flavors.{app}: {flavor}"
