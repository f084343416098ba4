"""The CPU generations the stack knows (environments/cpus.yaml) and the
site's own among them (its site file's `cpu_generations`): the baseline
every package is built for, the x86-64 levels the dispatcher chooses
between, and the compilers' own multi-path flags derived from the same list;
and the classes of CPU models on which an application may run a lower level."""

import functools
import string
from pathlib import Path
from typing import Dict, List

from archspec import cpu as archspec_cpu

from onestack import data, paths
from onestack.stack import site

CPUS_FILE = "cpus.yaml"


@functools.lru_cache(maxsize=None)
def _document(file: Path) -> dict:
    doc = data.load(file, "cpus")
    _check(file, doc["generations"])
    return doc


def _check(file: Path, every: List[dict]) -> None:
    """Oldest first (the first is the baseline), each named once (a site
    chooses by name), each a target Spack knows: a misspelt target would
    fail only in Spack's solve, minutes later."""
    for i, (older, newer) in enumerate(zip(every, every[1:]), start=1):
        if newer["x86_64_level"] < older["x86_64_level"]:
            raise data.InputError(
                f"{data.location(file)}: generations[{i}].x86_64_level: {newer['x86_64_level']} is below "
                f"generations[{i - 1}]'s {older['x86_64_level']}; list the generations oldest first, "
                "the baseline every package is built for first"
            )
    names = [g["name"] for g in every]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise data.InputError(
                f"{data.location(file)}: generations[{i}].name: '{name}' is the name of "
                f"generations[{names.index(name)}] too; name each generation once (a site's cpu_generations "
                "chooses by name)"
            )
    for i, generation in enumerate(every):
        if generation["spack_target"] not in archspec_cpu.TARGETS:
            raise data.InputError(
                f"{data.location(file)}: generations[{i}].spack_target: '{generation['spack_target']}' is "
                "not a target of archspec (Spack's CPU names: `spack arch --known-targets`), e.g. x86_64_v2, haswell"
            )


def described() -> List[dict]:
    """Every generation cpus.yaml describes, oldest first (sites choose among them)."""
    return list(_document(paths.environments_dir() / CPUS_FILE)["generations"])


def generations() -> List[dict]:
    """The site's generations, those its site file's `cpu_generations`
    names, oldest (the build baseline) first."""
    own = site.load()
    return _chosen(described(), own.cpu_generations, data.location(own.file))


def _chosen(every: List[dict], names: List[str], where: str) -> List[dict]:
    """The generations of cpus.yaml a site names, checked: each known, in
    cpus.yaml's order (oldest first: the first is what every package is
    built for)."""
    index = {g["name"]: i for i, g in enumerate(every)}
    for i, name in enumerate(names):
        if name not in index:
            raise data.InputError(
                f"{where}: cpu_generations[{i}]: unknown generation '{name}'; allowed: {', '.join(index)} "
                f"(generations of environments/{CPUS_FILE}, where a new one is described first)"
            )
        if i and index[name] <= index[names[i - 1]]:
            raise data.InputError(
                f"{where}: cpu_generations[{i}]: '{name}' is listed after '{names[i - 1]}', which "
                f"environments/{CPUS_FILE} lists after it; list the site's generations oldest first, "
                "the baseline every package is built for first"
            )
    return [every[index[name]] for name in names]


def where_chosen() -> str:
    """Where the site's generations are chosen, for messages."""
    return f"{data.location(site.load().file)}: cpu_generations"


def cpu_classes() -> Dict[str, dict]:
    """The classes of CPU models an application's `lower_level_on` names."""
    return _document(paths.environments_dir() / CPUS_FILE)["cpu_classes"]


def baseline_target() -> str:
    """Spack's target for every package: the x86-64 level of the site's
    oldest generation (x86_64_v2 for Nehalem), not its microarchitecture
    (haswell): archspec's haswell has AES, PCLMULQDQ and RDRAND beyond v3,
    which the build host's check and the dispatcher, testing the level
    alone, would not ask a node for."""
    return level_target(generations()[0]["x86_64_level"])


def level_target(x86_64_level: str) -> str:
    """Spack's (archspec's) generic target of a psABI level (v3 -> x86_64_v3)."""
    return "x86_64" if x86_64_level == "v1" else f"x86_64_{x86_64_level}"


def intel_ax_flag(every: List[dict]) -> str:
    """Intel's automatic CPU dispatch over every generation, newest first
    (-ax with only some of them yields those paths plus a generic one)."""
    return "-ax" + ",".join(g["intel_ax"] for g in reversed(every))


# The placeholders a compiler's fat_flags may hold, bare ({intel_ax}): a
# field of str.format could otherwise reach an attribute or an index.
FAT_FLAG_FIELDS = {"intel_ax", "nvhpc_tp", None}


def fat_flags(template: str) -> str:
    """A compiler's fat_flags with the site's CPU generations filled in."""
    odd = [f for _, f, spec, conv in string.Formatter().parse(template) if f not in FAT_FLAG_FIELDS or spec or conv]
    if odd:
        raise ValueError(f"unknown placeholder {{{odd[0]}}}")
    every = generations()
    return template.format(intel_ax=intel_ax_flag(every), nvhpc_tp=every[0]["nvhpc_tp"])


def level_name(x86_64_level: str) -> str:
    """GCC's -march name of a psABI level (v3 -> x86-64-v3), the dispatcher's."""
    return "x86-64" if x86_64_level == "v1" else f"x86-64-{x86_64_level}"


def newer_levels() -> List[tuple]:
    """The x86-64 levels of the site's generations above the baseline's, as
    (dispatcher name, Spack target): a flavor's extra builds. Spack's
    x86_64_vN targets give -march=x86-64-vN, exactly the level the
    dispatcher tests for (haswell or skylake_avx512 would add more)."""
    every = generations()
    above = sorted({g["x86_64_level"] for g in every} - {every[0]["x86_64_level"]})
    return [(level_name(level), level_target(level)) for level in above]


def baseline_level() -> str:
    return level_name(generations()[0]["x86_64_level"])
