"""The site scope: this machine's facts for Spack, kept outside the
repository, one per site ($ONESTACK_CACHE/sites/<site>/scope, included by
the site's environment as $ONESTACK_SITE_SCOPE): externals detected by `spack external
find`, the vendor libraries of setup/vendor.yaml, the source mirror and the
site buildcache."""

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Dict, List

import yaml

from onestack import data, files, paths, spack, stack
from onestack.spack import vendor
from onestack.stack import site
from onestack.stack.flavors import package_name

BUILDCACHE_MIRROR = "onestack-buildcache"
# The packages declare_compilers declared last, in the site scope (Spack
# reads no other file of a scope folder than its config sections).
DECLARED = "declared-compilers.yaml"


def write(folder: Path, sections: Dict[str, dict]) -> Path:
    """A Spack configuration scope of its own: one file per section, as
    {section: content} ("mirrors:", its colon kept: these mirrors only)."""
    folder.mkdir(parents=True, exist_ok=True)
    for key, content in sections.items():
        files.write_text(folder / f"{key.rstrip(':')}.yaml", yaml.safe_dump({key: content}))
    return folder


def recipe_repos(site_repo, spack_packages) -> Dict[str, str]:
    """The `repos:` of a scope that reads the stack's recipes (a relocated
    binary may run its package's hooks): the site's first, then Spack's."""
    return {"onestack": f"{site_repo}/spack_repo/onestack", "builtin": f"{spack_packages}/repos/spack_repo/builtin"}


def _scope_name() -> str:
    """How Spack names the site scope included by the site's environment."""
    return f"env:{site.state_dir()}:{spack.site_scope()}"


def detect_externals() -> None:
    """Run `spack external find` once per change of setup/externals.yaml or
    of the site recipes (which hold the detection of the libraries)."""
    wanted = data.load(paths.data_root() / "setup" / "externals.yaml", "externals")
    packages = wanted["libraries"] + wanted["build_tools"]
    stamp = spack.site_scope() / ".externals-detected"
    digest = hashlib.sha256(" ".join(packages).encode())
    for recipe in sorted((paths.REPO / "packages").rglob("package.py")):
        digest.update(recipe.read_bytes())
    if stamp.is_file() and stamp.read_text() == digest.hexdigest() and (spack.site_scope() / "packages.yaml").is_file():
        print("==> site scope: externals already detected")
        return
    spack.site_scope().mkdir(parents=True, exist_ok=True)
    # From scratch: `spack external find` adds to what is there, and an entry
    # detected by an older recipe would stay beside the new ones. The stamp
    # goes first: a run stopped half-way must not pass for a complete one.
    stamp.unlink(missing_ok=True)
    (spack.site_scope() / "packages.yaml").unlink(missing_ok=True)
    spack.run("external", "find", "--scope", _scope_name(), *packages, quiet=True, env=_os_programs_only())
    # Spack gives each package 60 s and skips a slower one without a word
    # (only `spack -d` says so): on a fresh machine Open MPI's cold
    # `ompi_info -a` took longer, and Open MPI was then built from source.
    # The caches are warm for a second try; what is still missing is an error.
    missing = _undetected(wanted["libraries"])
    if missing:
        spack.run("external", "find", "--scope", _scope_name(), *missing, quiet=True, env=_os_programs_only())
    missing = _undetected(wanted["libraries"])
    if missing:
        raise paths.SetupError(
            f"setup/externals.yaml libraries: `spack external find` did not detect {', '.join(missing)}; "
            "install their Debian packages (setup/apt-packages.txt) and run `make setup` again"
        )
    stamp.write_text(digest.hexdigest())
    print(f"==> site scope: externals detected into {spack.site_scope() / 'packages.yaml'}")


def _os_programs_only() -> Dict[str, str]:
    """The environment of `spack external find`: programs are looked up on
    PATH, and this machine's may hold a user's own (pyenv's python shims, a
    newer cmake in /usr/local); the stack's externals are the OS packages of
    setup/apt-packages.txt, in the OS's folders."""
    return {**os.environ, "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}


def _undetected(libraries: List[str]) -> List[str]:
    """The libraries no configuration scope has an external of. Not the site
    scope alone: `spack external find` writes nothing for an external another
    scope declares already (gcc, in spack.yaml)."""
    proc = subprocess.run(spack.command("config", "get", "packages"), text=True, capture_output=True, check=True)
    found = yaml.safe_load(proc.stdout).get("packages", {})
    return [lib for lib in libraries if not found.get(lib, {}).get("externals")]


def site_compilers() -> Dict[str, dict]:
    """Spack's externals of the compilers the site has outside the OS, by
    compiler: its site file's `compilers` entry, else components.yaml's
    site_external (the vendor's default prefix). `spack external find`
    cannot find them: it looks on the OS's PATH only (_os_programs_only),
    and a vendor installs its compilers in a prefix of its own."""
    matrix = stack.load()
    found = {}
    for name, compiler in matrix.components["compilers"].items():
        if "site_external" not in compiler or matrix.site.why_unavailable("compilers", name):
            continue
        external = matrix.site.compilers.get(name, compiler["site_external"])
        missing = [p for p in external["extra_attributes"]["compilers"].values() if not os.access(p, os.X_OK)]
        if missing:
            default = "" if name in matrix.site.compilers else " (no entry: the vendor's default prefix)"
            raise paths.SetupError(
                f"{data.location(matrix.site.file)}: compilers.{name}{default}: the site has the {name} "
                f"compiler (it is not in unavailable.compilers), but these are not executables here: "
                f"{', '.join(missing)}; fix: say where it is in compilers.{name} of the site file, "
                "or list it under unavailable.compilers with why"
            )
        found[name] = external
    return found


def declare_compilers() -> None:
    """The site's compilers outside the OS as the only externals of their
    packages in the site scope. What it declared before (DECLARED, beside) is
    dropped first: a compiler the site no longer has, or one whose package
    the site file now names otherwise, is not left declared."""
    packages_yaml, record = spack.site_scope() / "packages.yaml", spack.site_scope() / DECLARED
    config = yaml.safe_load(packages_yaml.read_text())
    defaults = [
        c["site_external"]["spec"] for c in stack.load().components["compilers"].values() if "site_external" in c
    ]
    before = yaml.safe_load(record.read_text()) if record.is_file() else []
    for package in {*map(package_name, defaults), *before}:
        config["packages"].pop(package, None)
    declared = site_compilers()
    for name, external in declared.items():
        config["packages"][package_name(external["spec"])] = {"externals": [external], "buildable": False}
        print(f"==> site scope: the {name} compiler declared: {external['spec']} in {external['prefix']}")
    files.write_text(packages_yaml, yaml.safe_dump(config, sort_keys=False))  # read by concurrent jobs
    files.write_text(record, yaml.safe_dump(sorted(package_name(e["spec"]) for e in declared.values())))


def buildcache_dir() -> Path:
    """Binaries of the stack's installs: images install from it, `spack ci`
    jobs push to it (the site's own, outside the repository)."""
    return paths.cache() / "buildcache"


def buildcache_signed() -> bool:
    """Sign where a signing key is configured (`spack gpg create` or import)."""
    proc = subprocess.run(spack.command("gpg", "list", "--signing"), text=True, capture_output=True)
    return proc.returncode == 0 and "sec" in proc.stdout


def shared_buildcache_url() -> str:
    """A site's buildcache shared by its hosts (ONESTACK_BUILDCACHE_URL, a
    CI variable: S3 or OCI), where the pipeline's build jobs push; "" if none."""
    return os.environ.get("ONESTACK_BUILDCACHE_URL", "")


def write_mirror_config() -> None:
    """Point Spack at the local source mirror (sources only) and the site
    buildcaches (binaries only): this host's, and the shared one where the
    site has one, so that the jobs after the pipeline's build jobs (publish,
    images, on any runner) install what those pushed instead of building it."""
    signed = buildcache_signed()
    mirrors = {
        "onestack-sources": {"url": f"file://{paths.mirror()}", "signed": False, "binary": False},
        BUILDCACHE_MIRROR: {"url": f"file://{buildcache_dir()}", "signed": signed, "source": False},
    }
    if shared_buildcache_url():
        mirrors[f"{BUILDCACHE_MIRROR}-shared"] = {"url": shared_buildcache_url(), "signed": signed, "source": False}
    config = {"mirrors": mirrors}
    spack.site_scope().mkdir(parents=True, exist_ok=True)
    paths.mirror().mkdir(parents=True, exist_ok=True)
    buildcache_dir().mkdir(parents=True, exist_ok=True)
    files.write_text(spack.site_scope() / "mirrors.yaml", yaml.safe_dump(config))  # read by concurrent jobs


def install_vendors() -> None:
    """Lay out the vendor libraries the site's components use and declare
    them as Spack externals; one only an unavailable component uses (site.yaml
    `unavailable`, e.g. a center without MKL) is left out."""
    vendor.install_all(spack.site_scope(), used_packages())


def used_packages() -> set:
    """The Spack packages the components the site can have are made of: each
    MPI's spec, each math library's providers, and the vendor build tools
    of those and of the applications (setup/vendor.yaml `needed_by`)."""
    matrix = stack.load()
    used = {f.app.package for f in matrix.flavors}
    for kind in ("mpis", "math"):
        for name, component in matrix.components[kind].items():
            if not matrix.site.why_unavailable(kind, name):
                specs = [component["spec"]] if kind == "mpis" else component["providers"].values()
                used |= {package_name(spec) for spec in specs}
    return used | {package for package, how in vendor.every().items() if used & set(how["needed_by"])}
