"""Each flavor's entry points: one per program, hard links of the
onestack-dispatch program (its Spack recipe in packages/), and the table of
the flavor's builds per x86-64 level it picks from at exec time, on the node
where the program starts. Written into the release, beside its modules."""

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

from onestack import data, files, host, paths, render
from onestack.errors import OnestackError
from onestack.stack import DISPATCHER, cpus
from onestack.stack.flavors import Flavor

DISPATCHER_PROGRAM = "onestack-dispatch"
CHECK = "onestack-cpu-check"
# The first word of a build's line of levels.conf (the C file's LEVEL_NAMES);
# its other lines are comments and `at-most` lines.
TABLE_LEVELS = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")
# What onestack-cpu-check prints: the build programs run here, and on a
# second line the `at-most` line that lowered its level, if one did.
_CHOICE = re.compile(r"programs here run the (\S+) build in (.+)$", re.M)
_LOWERED = re.compile(r"^onestack: (\S+: at most .+)$", re.M)


class DispatchError(OnestackError):
    pass


def levels(flavor: Flavor, roots: Dict[str, dict]) -> List[Tuple[str, str]]:
    """(level, bin folder) of the flavor's installed builds, lowest first:
    its baseline build, and each level build that is installed here."""
    found = [(cpus.baseline_level(), f"{roots[flavor.spack_spec]['prefix']}/bin")]
    for level, spec in flavor.levels:
        if roots.get(spec) and roots[spec]["installed"]:
            found.append((level, f"{roots[spec]['prefix']}/bin"))
    for _, folder in found:
        table_folder(flavor.module_name, folder)
    return found


def table_folder(whose: str, folder: str) -> str:
    """A build's bin folder as levels.conf holds it: one line per build, its
    folder the rest of the line, so no newline and no space at either end."""
    if "\n" in folder or folder != folder.strip():
        raise DispatchError(f"{whose}: {folder!r} cannot stand in levels.conf")
    return folder


def rules(flavor: Flavor) -> List[dict]:
    """The `at-most` lines of the flavor's table: each CPU model of each
    class its application's `lower_level_on` names, with that level, or the
    site's baseline where that is higher: the site has no build below it
    (the dispatcher would refuse the table), and the baseline build is the
    nearest to what the application's authors advise."""
    classes, baseline = cpus.cpu_classes(), cpus.baseline_level()
    return [
        {"level": max(level, baseline, key=TABLE_LEVELS.index), "cpu_class": name, **model}
        for name, level in flavor.app.lower_level_on
        for model in classes[name]["models"]
    ]


def table_builds(table: Path) -> Dict[str, str]:
    """The builds a levels.conf lists, {level: bin folder}, lowest first
    (its comments and `at-most` lines left out)."""
    fields = [line.split(None, 1) for line in table.read_text().splitlines()]
    return {f[0]: f[1].strip() for f in fields if len(f) == 2 and f[0] in TABLE_LEVELS}


def choice_here(entry_bin: Path) -> Tuple[str, str, str]:
    """The level and bin folder the flavor's programs run on this CPU, and
    why that level is below the CPU's ("" if it is not), as its own
    dispatcher reports them (`onestack-cpu-check`, what `module load` runs)."""
    printed = subprocess.run([str(entry_bin / CHECK)], capture_output=True, text=True, check=True).stdout
    found, lowered = _CHOICE.search(printed), _LOWERED.search(printed)
    if not found:
        raise DispatchError(f"{entry_bin / CHECK}: no choice in {printed!r}")
    return found.group(1), found.group(2), lowered.group(1) if lowered else ""


def programs(flavor: Flavor, builds: List[Tuple[str, str]]) -> List[str]:
    """The executables every build has (scripts stay reached through the
    application's module: they run on any CPU), the flavor's program among
    them: without it, neither the module nor the image has an entry point."""
    names = None
    for _, folder in builds:
        here = {f.name for f in Path(folder).iterdir() if f.is_file() and os.access(f, os.X_OK) and files.is_elf(f)}
        names = here if names is None else names & here
    if flavor.app.program not in (names or ()):
        raise DispatchError(
            f"{data.location(flavor.app.file)}: program: {flavor.app.program} is not an executable of every build "
            f"of {flavor.module_name} ({', '.join(folder for _, folder in builds)}; those of them all: "
            f"{', '.join(sorted(names or ())) or 'none'}); name the one users run among them"
        )
    return sorted(names)


def _link(source: Path, target: Path) -> None:
    """A hard link: the dispatcher names the program by its own path; a
    copy where the release is on another filesystem than the installs."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def published_levels(release: Path, flavor: Flavor) -> List[str]:
    """The levels of the flavor's builds in a release (its levels.conf)."""
    table = bin_dir(release, flavor).parent / "levels.conf"
    return list(table_builds(table)) if table.is_file() else []


def without_own_level(release: Path, flavor: Flavor) -> str:
    """Why the flavor's build for this host's own x86-64 level cannot be
    judged as this CPU's best ("" if it can): the release has none, or the
    CPU has more than that level (host.beyond_own_level). What its
    `own_level` checks need."""
    built = published_levels(release, flavor)
    own = cpus.level_name(host.level())
    if own not in built:
        return f"{flavor.module_name} has no {own} build in this release (built: {', '.join(built) or 'none'})"
    # Lowered on this CPU's model (lower_level_on) to a level it has no build
    # of, the dispatcher runs one below what the application's authors advise.
    picked, _, lowered = choice_here(bin_dir(release, flavor))
    cap = re.search(r"at most (\S+)", lowered)
    if cap and picked != cap.group(1):
        return f"its dispatcher runs its {picked} build here ({lowered}), and it has no {cap.group(1)} build"
    extra = host.beyond_own_level()
    if extra:
        return f"this CPU has {', '.join(extra)} of the level above {own}, which its {own} build leaves unused"
    return ""


def bin_dir(release: Path, flavor: Flavor) -> Path:
    """The flavor's entry points in a release (its application module puts them first on PATH)."""
    return release / "dispatch" / flavor.app.module / flavor.name / flavor.app.version / "bin"


def write(release: Path, flavor: Flavor, roots: Dict[str, dict]) -> dict:
    """The flavor's dispatch folder; what the module needs of it."""
    builds = levels(flavor, roots)
    folder = bin_dir(release, flavor).parent
    (folder / "bin").mkdir(parents=True)
    dispatcher = Path(roots[DISPATCHER]["prefix"]) / "bin" / DISPATCHER_PROGRAM
    names = programs(flavor, builds)
    for name in [*names, CHECK]:
        _link(dispatcher, folder / "bin" / name)
    render.write(
        paths.MODULE_TEMPLATES,
        "levels.conf.j2",
        folder / "levels.conf",
        flavor=flavor,
        levels=builds,
        rules=rules(flavor),
        release=release.name,
    )
    return {
        "bin": str(folder / "bin"),
        "check": str(folder / "bin" / CHECK),
        "levels": [lv for lv, _ in builds],
        "programs": len(names),
    }
