"""Running the pinned Spack on the site's environment (its state folder, onestack/stack/site.py)."""

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from onestack import paths, stack
from onestack.errors import OnestackError
from onestack.stack import DISPATCHER, preload_packages, site
from onestack.stack.flavors import Flavor

# Scripts run by `spack python` (see query).
INSIDE_SPACK = Path(__file__).parent / "inside"


class SpackError(OnestackError):
    pass


def site_scope() -> Path:
    """The site's Spack scope (onestack/spack/scope.py): per site, since its
    externals and vendor layouts name paths under the site's prefix."""
    return site.cache_dir() / "scope"


def command(*args: str) -> List[str]:
    return [str(paths.spack_root() / "bin" / "spack"), "-e", str(site.state_dir()), *args]


def _digest(files) -> str:
    digest = hashlib.sha256()
    for file in files:
        if file.is_file():
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def recipes_fingerprint() -> str:
    """What a root solved before must be solved again for: the site
    environment, the site recipes and their patches, this machine's
    externals, the CPU baseline. (A change of the flavor data changes the
    specs themselves, which Spack solves as new roots.)"""
    return _digest(
        [
            paths.REPO / "spack.yaml",
            paths.environments_dir() / "cpus.yaml",
            *sorted(f for f in (paths.REPO / "packages").rglob("*") if f.is_file()),
            site_scope() / "packages.yaml",
        ]
    )


def inputs_fingerprint() -> str:
    """Everything a cell's concretization depends on (the flavor table's
    cache): the recipes' fingerprint, the stack's data and the site's, the
    scripts run inside Spack."""
    return _digest(
        [
            paths.REPO / "spack.yaml",
            *sorted(paths.environments_dir().glob("*")),
            paths.site_dir() / "site.yaml",
            *sorted(f for f in (paths.REPO / "packages").rglob("*") if f.is_file()),
            *sorted(INSIDE_SPACK.glob("*.py")),
            site_scope() / "packages.yaml",
        ]
    )


def _concretized_stamp() -> Path:
    return site.state_dir() / "concretized-inputs"


def lock_is_current() -> bool:
    """Whether spack.lock was solved from the recipes and site as they are now."""
    stamp = _concretized_stamp()
    lock = site.state_dir() / "spack.lock"
    return lock.is_file() and stamp.is_file() and stamp.read_text() == recipes_fingerprint()


def check_set_up() -> None:
    """Refuse a site this machine has not set up (a new site folder, a new
    prefix): without its scope Spack would solve without the site's
    externals and fail on a version it cannot see (intel-oneapi-mpi's)."""
    if not (site_scope() / "packages.yaml").is_file():
        raise SpackError(
            f"site {site.load().name} at prefix {site.prefix()} is not set up on this machine "
            f"(no Spack scope at {site_scope()}): run `make setup` or `bin/onestack site` first, "
            "with the same ONESTACK_SITE and ONESTACK_PREFIX"
        )


def concretize() -> None:
    """`spack concretize` of the rendered flavors. Spack keeps a root it has
    concretized before, even when the recipe it was solved with has changed
    since (a reused checkout then installs the old, unfixed build); so when
    the inputs have changed, every root is solved again (--force)."""
    check_set_up()
    unchanged = lock_is_current()
    run("concretize", *([] if unchanged else ["--force"]), quiet=True)
    _concretized_stamp().write_text(recipes_fingerprint())


def install() -> None:
    """`spack install` of the environment (two packages at a time: spack.yaml)."""
    run("install", "--fail-fast")


def run(*args: str, quiet: bool = False, env: Optional[Dict[str, str]] = None) -> None:
    """Run a Spack command, its output shown (or kept for the error if quiet),
    in this environment (or in env)."""
    cmd = command(*args)
    print(f"==> spack {' '.join(args)}", flush=True)
    started = time.monotonic()
    proc = subprocess.run(cmd, text=True, capture_output=quiet, env=env)
    if proc.returncode != 0:
        detail = (proc.stdout + proc.stderr)[-4000:] if quiet else ""
        raise SpackError(f"`spack {' '.join(args)}` failed (exit {proc.returncode})\n{detail}")
    # The build stage's time is mostly the solve's and the installs': each said.
    print(f"==> spack {args[0]}: {time.monotonic() - started:.0f} s", flush=True)


def query(script: str, *args: str):
    """Run onestack/spack/inside/<script>.py in `spack python`; it prints JSON.

    These scripts read Spack's own objects (concretized specs, fetchers,
    module index) where no Spack command prints the fact we need.
    """
    cmd = command("python", str(INSIDE_SPACK / f"{script}.py"), *args)
    proc = subprocess.run(cmd, text=True, capture_output=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SpackError(f"spack python {script}.py failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def installed(selected: List[Flavor]) -> Tuple[List[Flavor], Dict[str, dict]]:
    """What is installed here, the one question every later step asks: the
    flavors of selected that are built, and the concrete installed root of
    each, of its level builds, of each MPI runtime, the dispatcher and the
    preloaded libraries, by abstract spec (inside/flavor_roots.py). A flavor
    not built here is left out, and said so, as is a runtime `make test`
    does not build (components.yaml `ci_build`); another runtime missing is
    an error."""
    wanted = {f.spack_spec: f.module_name for f in selected}
    every_runtime = stack.load().runtimes
    runtimes = {r.spec: r.module_name for r in every_runtime}
    runtimes[DISPATCHER] = "the CPU dispatcher (onestack-dispatch)"
    runtimes.update({p: f"{p}, preloaded by flavors (components.yaml `preload`)" for p in preload_packages(selected)})
    levels = [spec for f in selected for _, spec in f.levels]
    roots = query("flavor_roots", json.dumps(list(wanted) + list(runtimes) + levels))
    optional = {r.spec for r in every_runtime if not r.ci_build}
    for spec, module in runtimes.items():
        if roots.get(spec) and roots[spec]["installed"]:
            continue
        if spec not in optional:
            raise SpackError(f"{module}: not installed; run `make stack` to build it")
        roots.pop(spec, None)
        print(f"==> {module} is not built here, left out (`make stack` builds it)")
    built = [f for f in selected if roots.get(f.spack_spec) and roots[f.spack_spec]["installed"]]
    for flavor in selected:
        if flavor not in built:
            print(
                f"==> {flavor.module_name} is not built here, left out "
                f"(`make stack FLAVORS={flavor.module_name}` builds it)"
            )
    if not built:
        raise SpackError("none of the selected flavors is built: run `make stack`")
    return built, roots
