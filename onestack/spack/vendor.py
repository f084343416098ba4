"""Vendor libraries no Spack download can provide here (setup/vendor.yaml),
laid out under $ONESTACK_PREFIX/vendor/<spack package>/ the way Spack's
recipes expect (<prefix>/<component>/<component_version>/ for oneAPI ones),
with the env/vars.sh Spack reads to write their modules, and declared as
externals in the site scope."""

import functools
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import yaml

from onestack import data, files, paths, render
from onestack.errors import OnestackError

TEMPLATES = Path(__file__).parent / "templates"


class VendorError(OnestackError):
    pass


@functools.lru_cache(maxsize=None)
def _every(file: Path) -> Dict[str, dict]:
    return data.load(file, "vendor")


def vendor_file() -> Path:
    """setup/vendor.yaml of the data in use (ONESTACK_DATA_ROOT, else the checkout's)."""
    return paths.data_root() / "setup" / "vendor.yaml"


def every() -> Dict[str, dict]:
    return _every(vendor_file())


def prefix_of(package: str) -> Path:
    return paths.prefix() / "vendor" / package


def component_dir(package: str, how: dict, prefix: Path) -> Path:
    """Where the files go: the oneAPI layout for oneAPI recipes, else the
    prefix itself (whose lib/ Spack then rpaths into its dependents)."""
    return prefix / how["component"] / str(how["component_version"]) if "component" in how else prefix


def _link_into(component: Path, targets: dict) -> None:
    """Link each name to its target; a target with a wildcard links each file
    it matches into the folder `name`, so that a vendor prefix exposes only its
    own files, never a whole system folder (where another MPI's libmpi.so lives)."""
    for name, target in targets.items():
        matches = sorted(Path("/").glob(str(target).lstrip("/"))) if "*" in str(target) else None
        links = (
            [(component / name / m.name, m) for m in matches] if matches is not None else [(component / name, target)]
        )
        for link, to in links:
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                link.symlink_to(to)


def _link_wheels(component: Path, wheels: Path, final: Path, links: dict) -> None:
    """Link each top folder of the wheels' prefix into the component, but
    one that `links` names itself (e.g. CMake's bin, its real programs); a
    folder that `links` adds to (e.g. include/gfortran) is made real, its
    entries linked one by one, so that the added link never lands in the
    wheels' tree. The wheels lie at `wheels` now, at `final` once switched in:
    the links point there."""
    extended = {name.split("/")[0] for name in links if "/" in name}
    for entry in wheels.iterdir():
        if entry.name in links:
            continue
        if entry.name in extended:
            _link_into(
                component / entry.name, {child.name: final / entry.name / child.name for child in entry.iterdir()}
            )
        else:
            _link_into(component, {entry.name: final / entry.name})


def vars_sh(package: str, how: dict) -> str:
    return render.text(
        TEMPLATES, "vendor-vars.sh.j2", package=package, version=how["version"], set=how["set"], prepend=how["prepend"]
    )


def _lay_out(package: str, how: dict) -> None:
    """Lay out the component (PyPI wheels or OS files, plus env/vars.sh)
    whole in a folder of its own beside the live one, then switch the
    package's path to it with one rename of a link: the modules and Spack
    externals users load read that path, so a failed or changed layout never
    leaves it half-written."""
    prefix = prefix_of(package)
    recipe = yaml.safe_dump(how)
    if (prefix / ".installed").is_file() and (prefix / ".installed").read_text() == recipe:
        print(f"==> vendor: {package}@{how['version']} already laid out")
        return
    layout = prefix.with_name(f".{package}@{hashlib.sha256(recipe.encode()).hexdigest()[:12]}")
    files.remove(layout)  # a leftover of a layout that failed
    layout.mkdir(parents=True)
    try:
        _fill(layout, prefix, package, how)
    except subprocess.CalledProcessError as err:
        files.remove(layout)
        raise VendorError(
            f"setup/vendor.yaml: {package}: pip: `{' '.join(map(str, err.cmd[-len(how['pip']) :]))}` "
            f"failed (exit {err.returncode}); check the pins and that PyPI (or its mirror) is reachable. "
            f"{prefix} is as it was"
        ) from None
    (layout / ".installed").write_text(recipe)
    _switch(prefix, layout)
    print(f"==> vendor: {package}@{how['version']} laid out in {component_dir(package, how, prefix)}")


def _fill(layout: Path, prefix: Path, package: str, how: dict) -> None:
    """The files of the layout, written into `layout`, each link pointing
    where it will lie once `prefix` names it."""
    component = component_dir(package, how, layout)
    component.mkdir(parents=True, exist_ok=True)
    links = {name: prefix / target for name, target in how["links"].items()}  # absolute stays absolute
    if "pip" in how:
        print(f"==> vendor: pip install {' '.join(how['pip'])} into {prefix / 'pypi'}")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--prefix",
                str(layout / "pypi"),
                *how["pip"],
            ],
            check=True,
        )
        _link_wheels(component, layout / "pypi", prefix / "pypi", links)
    _link_into(component, links)
    (component / "env").mkdir(exist_ok=True)
    (component / "env" / "vars.sh").write_text(vars_sh(package, how))


def _switch(prefix: Path, layout: Path) -> None:
    """`prefix` becomes a link to `layout` in one rename; the layouts it
    named before are removed (a tree laid out before layouts were switched
    is a folder: moved aside first, for the instant of the rename)."""
    new_link = prefix.with_name(f".{prefix.name}.new")
    files.remove(new_link)
    new_link.symlink_to(layout.name)
    if prefix.exists() and not prefix.is_symlink():
        prefix.rename(prefix.with_name(f".{prefix.name}@folder"))
    os.replace(new_link, prefix)
    for old in prefix.parent.glob(f".{prefix.name}@*"):
        if old != layout:
            files.remove(old)


def environment(package: str) -> Dict[str, list]:
    """A vendor library's environment as absolute paths (for the modules
    Spack does not write, e.g. mpi-runtime/*), and its component folder."""
    how = every()[package]
    component = component_dir(package, how, prefix_of(package))
    return {
        "component_dir": component,
        "set": [(k, os.path.normpath(component / v)) for k, v in how["set"].items()],
        "prepend": [(k, str(component / v)) for k, v in how["prepend"].items()],
    }


def externals_of(package: str, prefix: str) -> List[dict]:
    """A vendor library's Spack external declarations, at prefix."""
    how = every()[package]
    return [{"spec": f"{package}@{how['version']} {variants}".strip(), "prefix": prefix} for variants in how["specs"]]


def layout_script(package: str, prefix: str) -> str:
    """Shell lines that lay a vendor library out at prefix as _lay_out does,
    for a container's build stage (which has the OS packages, not onestack).
    Only layouts of OS files: a PyPI wheel is not an OS package."""
    how = every()[package]
    if "pip" in how:
        raise ValueError(f"{package} comes from PyPI wheels ({', '.join(how['pip'])}), not OS packages")
    return render.text(
        TEMPLATES,
        "vendor-layout.sh.j2",
        package=package,
        version=how["version"],
        component=str(component_dir(package, how, Path(prefix))),
        links=how["links"],
        vars_sh=vars_sh(package, how),
    )


def install_all(scope_dir: Path, used: set) -> None:
    """Lay out each vendor library the site uses and declare it as a Spack
    external (one it does not use is neither laid out nor declared)."""
    wanted = {package: how for package, how in every().items() if package in used}
    for package in sorted(set(every()) - set(wanted)):
        print(f"==> vendor: {package} not laid out: no component this site can have uses it")
    for package, how in wanted.items():
        _lay_out(package, how)
    packages_yaml = scope_dir / "packages.yaml"
    config = yaml.safe_load(packages_yaml.read_text()) if packages_yaml.is_file() else {"packages": {}}
    for package in every():
        _undeclare(config["packages"], package)
    for package in wanted:
        _declare(config["packages"], package)
    files.write_text(packages_yaml, yaml.safe_dump(config, sort_keys=False))  # read by concurrent jobs


def _undeclare(packages: dict, package: str) -> None:
    """Drop what _declare added (a layout no longer used, or about to be
    declared again), keeping what `spack external find` detected."""
    entry = packages.get(package)
    if entry is None:
        return
    ours = str(prefix_of(package))
    kept = [e for e in entry.get("externals", []) if e["prefix"] != ours]
    if not kept:
        packages.pop(package)
        return
    if len(kept) < len(entry["externals"]):
        entry.pop("version", None)  # the preference _declare set beside it
    entry["externals"] = kept


def _declare(packages: dict, package: str) -> None:
    """The layout as the package's only external, or, where the OS has the
    package too (a newer build tool than the OS's: CMake for GROMACS
    2025), beside the detected one, which stays preferred: only a package
    that needs the newer version gets it."""
    declared = externals_of(package, str(prefix_of(package)))
    entry = packages.get(package)
    if entry is None:
        packages[package] = {"externals": declared, "buildable": False}
        return
    entry["version"] = [e["spec"].split("@")[1].split()[0] for e in entry["externals"]]
    entry["externals"] += declared
