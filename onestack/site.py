"""The site scope: this machine's facts for Spack, kept outside the repository
($ONESTACK_SITE_SCOPE): externals detected by `spack external find`, the
vendor libraries laid out from setup/vendor.yaml, and the local source mirror."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import yaml

from onestack import paths, spack

EXTERNALS = paths.REPO / "setup" / "externals.yaml"
VENDOR = paths.REPO / "setup" / "vendor.yaml"


def scope_dir() -> Path:
    return paths.site_scope()


def _scope_name() -> str:
    """How Spack names the site scope included by spack.yaml."""
    return f"env:{paths.REPO}:{scope_dir()}"


def detect_externals() -> None:
    """Run `spack external find` once per change of setup/externals.yaml or
    of the site recipes (which hold the detection of the libraries)."""
    wanted = yaml.safe_load(EXTERNALS.read_text())
    packages = wanted["libraries"] + wanted["build_tools"]
    stamp = scope_dir() / ".externals-detected"
    digest = hashlib.sha256(" ".join(packages).encode())
    for recipe in sorted((paths.REPO / "packages").rglob("package.py")):
        digest.update(recipe.read_bytes())
    if stamp.is_file() and stamp.read_text() == digest.hexdigest() and (scope_dir() / "packages.yaml").is_file():
        print("==> site scope: externals already detected")
        return
    scope_dir().mkdir(parents=True, exist_ok=True)
    # From scratch: `spack external find` adds to what is there, and an entry
    # detected by an older recipe would stay beside the new ones.
    (scope_dir() / "packages.yaml").unlink(missing_ok=True)
    spack.run("external", "find", "--scope", _scope_name(), *packages, quiet=True)
    # Spack gives each package 60 s and skips a slower one without a word
    # (only `spack -d` says so): on a fresh machine Open MPI's cold
    # `ompi_info -a` took longer, and Open MPI was then built from source.
    # The caches are warm for a second try; what is still missing is an error.
    missing = _undetected(wanted["libraries"])
    if missing:
        spack.run("external", "find", "--scope", _scope_name(), *missing, quiet=True)
    missing = _undetected(wanted["libraries"])
    if missing:
        raise paths.SetupError(
            f"setup/externals.yaml libraries: `spack external find` did not detect {', '.join(missing)}; "
            "install their Debian packages (setup/apt-packages.txt) and run `make setup` again")
    stamp.write_text(digest.hexdigest())
    print(f"==> site scope: externals detected into {scope_dir() / 'packages.yaml'}")


def _undetected(libraries: List[str]) -> List[str]:
    """The libraries no configuration scope has an external of. Not the site
    scope alone: `spack external find` writes nothing for an external another
    scope declares already (gcc, in spack.yaml)."""
    proc = subprocess.run(spack.command("config", "get", "packages"), text=True, capture_output=True, check=True)
    found = yaml.safe_load(proc.stdout).get("packages", {})
    return [lib for lib in libraries if not found.get(lib, {}).get("externals")]


BUILDCACHE_MIRROR = "onestack-buildcache"


def buildcache_dir() -> Path:
    """Binaries of the stack's installs: images install from it, `spack ci`
    jobs push to it (the site's own, outside the repository)."""
    return paths.cache() / "buildcache"


def buildcache_signed() -> bool:
    """Sign where a signing key is configured (`spack gpg create` or import)."""
    proc = subprocess.run(spack.command("gpg", "list", "--signing"), text=True, capture_output=True)
    return proc.returncode == 0 and "sec" in proc.stdout


def write_mirror_config() -> None:
    """Point Spack at the local source mirror (sources only) and the site
    buildcache (binaries only)."""
    config = {"mirrors": {
        "onestack-sources": {"url": f"file://{paths.mirror()}", "signed": False, "binary": False},
        BUILDCACHE_MIRROR: {"url": f"file://{buildcache_dir()}", "signed": buildcache_signed(), "source": False},
    }}
    scope_dir().mkdir(parents=True, exist_ok=True)
    paths.mirror().mkdir(parents=True, exist_ok=True)
    buildcache_dir().mkdir(parents=True, exist_ok=True)
    (scope_dir() / "mirrors.yaml").write_text(yaml.safe_dump(config))


def _vendor_prefix(package: str) -> Path:
    return paths.prefix() / "vendor" / package


def _component_dir(package: str, how: dict) -> Path:
    """Where the files go: the oneAPI layout for oneAPI recipes, else the
    prefix itself (whose lib/ Spack then rpaths into its dependents)."""
    if "component" not in how:
        return _vendor_prefix(package)
    return _vendor_prefix(package) / how["component"] / str(how["component_version"])


def _link_into(component: Path, targets: dict) -> None:
    """Link each name to its target; a target with a wildcard links each file
    it matches into the folder `name`, so that a vendor prefix exposes only its
    own files, never a whole system folder (where another MPI's libmpi.so lives)."""
    for name, target in targets.items():
        matches = sorted(Path("/").glob(str(target).lstrip("/"))) if "*" in str(target) else None
        links = [(component / name / m.name, m) for m in matches] if matches is not None \
            else [(component / name, target)]
        for link, to in links:
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                link.symlink_to(to)


def _link_wheels(component: Path, wheels: Path, links: dict) -> None:
    """Link each top folder of the wheels' prefix into the component; a folder
    that `links` adds to (e.g. include/gfortran) is made real, its entries
    linked one by one, so that the added link never lands in the wheels' tree."""
    extended = {name.split("/")[0] for name in links if "/" in name}
    for entry in wheels.iterdir():
        if entry.name in extended:
            _link_into(component / entry.name, {child.name: child for child in entry.iterdir()})
        else:
            _link_into(component, {entry.name: entry})


def _vars_sh(how: dict) -> str:
    lines = ["# Written by onestack site from setup/vendor.yaml; read by Spack to write the module.",
             'here="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"']
    lines += [f'export {k}="$here/{v}"'.replace('/."', '"') for k, v in how["set"].items()]
    lines += [f'export {k}="$here/{v}${{{k}:+:${k}}}"' for k, v in how["prepend"].items()]
    return "\n".join(lines) + "\n"


def _install_vendor(package: str, how: dict) -> None:
    """Lay out the component: PyPI wheels or OS files, plus env/vars.sh."""
    prefix = _vendor_prefix(package)
    stamp = prefix / ".installed"
    recipe = yaml.safe_dump(how)
    if stamp.is_file() and stamp.read_text() == recipe:
        print(f"==> vendor: {package}@{how['version']} already laid out")
        return
    component = _component_dir(package, how)
    if stamp.is_file() and component != prefix:
        shutil.rmtree(component)  # a changed layout replaces the old links, never writes through them
    component.mkdir(parents=True, exist_ok=True)
    links = {name: prefix / target for name, target in how.get("links", {}).items()}  # absolute stays absolute
    if "pip" in how:
        wheels = prefix / "pypi"
        print(f"==> vendor: pip install {' '.join(how['pip'])} into {wheels}")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--prefix", str(wheels), *how["pip"]], check=True)
        _link_wheels(component, wheels, links)
    _link_into(component, links)
    (component / "env").mkdir(exist_ok=True)
    (component / "env" / "vars.sh").write_text(_vars_sh(how))
    stamp.write_text(recipe)
    print(f"==> vendor: {package}@{how['version']} laid out in {component}")


def vendor(package: str) -> dict:
    """A vendor library's setup/vendor.yaml entry, with its component folder
    and its environment as absolute paths (for modules Spack does not write)."""
    how = yaml.safe_load(VENDOR.read_text())[package]
    component = _component_dir(package, how)
    return {
        **how,
        "component_dir": component,
        "set_abs": [(k, os.path.normpath(component / v)) for k, v in how["set"].items()],
        "prepend_abs": [(k, str(component / v)) for k, v in how["prepend"].items()],
    }


def externals_of(package: str, prefix: str) -> List[dict]:
    """A vendor library's Spack external declarations, at prefix."""
    how = yaml.safe_load(VENDOR.read_text())[package]
    return [{"spec": f"{package}@{how['version']} {variants}".strip(), "prefix": prefix}
            for variants in how["specs"]]


def layout_script(package: str, prefix: str) -> str:
    """Shell lines that lay a vendor library out at prefix as _install_vendor
    does, for a container's build stage (which has the OS packages but not
    onestack). Only layouts of OS files: a PyPI wheel is not an OS package."""
    how = yaml.safe_load(VENDOR.read_text())[package]
    if "pip" in how:
        raise ValueError(f"{package} comes from PyPI wheels ({', '.join(how['pip'])}), not OS packages")
    component = f"{prefix}/{how['component']}/{how['component_version']}" if "component" in how else prefix
    lines = [f"# {package}@{how['version']}: the layout of setup/vendor.yaml", f"mkdir -p {component}/env"]
    for name, target in how.get("links", {}).items():
        if "*" in target:  # each match into the folder, as _link_into does
            lines += [f"mkdir -p {component}/{name}", f"ln -s {target} {component}/{name}/"]
        else:
            lines += [f"mkdir -p $(dirname {component}/{name})", f"ln -s {target} {component}/{name}"]
    lines += [f"cat > {component}/env/vars.sh << 'EOF'", _vars_sh(how).rstrip(), "EOF"]
    return "\n".join(lines) + "\n"


def install_vendors() -> None:
    """Lay out the vendor libraries and declare them as Spack externals."""
    vendors = yaml.safe_load(VENDOR.read_text())
    for package, how in vendors.items():
        _install_vendor(package, how)
    packages_yaml = scope_dir() / "packages.yaml"
    config = yaml.safe_load(packages_yaml.read_text()) if packages_yaml.is_file() else {"packages": {}}
    for package, how in vendors.items():
        config["packages"][package] = {"externals": externals_of(package, str(_vendor_prefix(package))),
                                       "buildable": False}
    packages_yaml.write_text(yaml.safe_dump(config, sort_keys=False))
