"""Running the pinned Spack on the site's environment (its state folder, onestack/stack/site.py)."""

import contextlib
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import yaml

from onestack import commands, files, paths, stack
from onestack.errors import OnestackError
from onestack.stack import DISPATCHER, cpus, preload_packages, site
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


def _digest(files, text: str = "") -> str:
    digest = hashlib.sha256()
    for file in files:
        with contextlib.suppress(FileNotFoundError):  # gone between the two
            if file.is_file():
                digest.update(file.read_bytes())
    digest.update(text.encode())
    return digest.hexdigest()[:16]


def _recipe_files() -> List[Path]:
    return [
        paths.REPO / "spack.yaml",
        paths.REPO / "setup" / "spack-pins.sh",  # Spack's and its builtin recipes' commits
        # Not the bytecode Python writes beside a recipe when Spack imports it
        # (where PYTHONDONTWRITEBYTECODE is unset): a solve's own inputs.
        *sorted(f for f in (paths.REPO / "packages").rglob("*") if f.is_file() and "__pycache__" not in f.parts),
        site_scope() / "packages.yaml",
    ]


def recipes_fingerprint() -> str:
    """What a root solved before must be solved again for: the site
    environment, Spack's and its builtin recipes' pinned commits, the site
    recipes and their patches, this machine's
    externals, the site's CPU generations (as cpus.yaml describes them: not
    the rest of either file, the other generations, the site's defaults the
    report rewrites). (A change of the flavor data changes the specs
    themselves, which Spack solves as new roots.)"""
    return _digest(_recipe_files(), json.dumps(cpus.generations(), sort_keys=True))


def inputs_fingerprint() -> str:
    """Everything a cell's concretization depends on (the flavor table's
    cache): the recipes' files, the stack's data and the site's, the
    scripts run inside Spack."""
    return _digest(
        [
            *_recipe_files(),
            *sorted(paths.environments_dir().glob("*")),  # cpus.yaml among them
            paths.site_dir() / "site.yaml",
            *sorted(INSIDE_SPACK.glob("*.py")),
        ]
    )


# The file not_buildable writes in the state folder.
NOT_BUILDABLE = "not-buildable.yaml"


def _concretized_stamp() -> Path:
    return site.state_dir() / "concretized-inputs"


def lock_is_current() -> bool:
    """Whether spack.lock was solved from the recipes and site as they are now."""
    stamp = _concretized_stamp()
    lock = site.state_dir() / "spack.lock"
    return lock.is_file() and stamp.is_file() and stamp.read_text() == recipes_fingerprint()


def set_up_mark() -> Path:
    """Written by the site's set-up when its last step is done: a first
    set-up stopped half-way leaves none. (Never removed: a set-up run again
    replaces each file whole, while commands beside it, the pipeline's
    concurrent jobs, read the one before.)"""
    return site.cache_dir() / "set-up-done"


def check_set_up() -> None:
    """Refuse a site this machine has not set up (a new site folder, a new
    prefix), or whose set-up stopped half-way: without its scope whole
    Spack would solve without the site's externals and fail on a version it
    cannot see (intel-oneapi-mpi's)."""
    if not set_up_mark().is_file():
        raise SpackError(
            f"site {site.load().name} at prefix {site.prefix()} is not set up on this machine "
            f"(no complete set-up of its Spack scope at {site_scope()}): run `make setup` or `bin/onestack "
            "site` first, with the same ONESTACK_SITE and ONESTACK_PREFIX"
        )


# Spack's indexes of the package repos (their virtual providers, tags and
# patches): folders of its misc cache (paths.spack_misc_cache()).
REPO_INDEXES = ("providers", "tags", "patches")


def index_repos() -> Dict[str, float]:
    """Spack's indexes of the environment's package repos (providers, tags,
    patches), kept in its user cache: on a new cache the first Spack command
    builds them, over a minute of one core (docs/results.md), which `make
    test` spends beside its fast tier and apt (tests/run.sh). Returns the
    seconds each took."""
    return query("repo_indexes", *REPO_INDEXES)


def not_buildable() -> None:
    """Write .generated/<site>/not-buildable.yaml (spack.yaml includes it):
    each package a solve could reach and may not build, as `buildable:
    false`, for Spack's static analysis to leave out (spack.yaml's
    concretizer section says why). Written again when the recipes' inputs
    change; an outdated one only slows a solve, never changes its result:
    `packages:all:buildable: false` holds either way."""
    out = site.state_dir() / NOT_BUILDABLE
    stamp = f"# inputs {recipes_fingerprint()}\n"
    if out.is_file() and out.read_text().startswith(stamp):
        return
    names = query("not_buildable")
    header = "# Generated by onestack/spack/__init__.py (not_buildable) from spack.yaml's packages: do not edit.\n"
    files.write_text(out, stamp + header + yaml.safe_dump({"packages": {n: {"buildable": False} for n in names}}))


# What Spack says of a spec that needs a package its static analysis left
# out (not_buildable), with no reason; solved again without that analysis
# (half a minute a root), Spack names the package ("Cannot build X, since it
# is configured `buildable:false`"). Also in inside/concretize_each.py.
LEFT_OUT = "concretizer internal error"
WITHOUT_PRUNING = ("-c", "concretizer:static_analysis:false")


def _solved_fingerprint() -> str:
    """The lock and everything its roots were solved from: the rendered
    environment and the recipes' fingerprint."""
    state = site.state_dir()
    solved_from = [state / name for name in ("spack.yaml", "flavors.yaml", NOT_BUILDABLE, "spack.lock")]
    return recipes_fingerprint() + _digest(solved_from)


def _solved_stamp() -> Path:
    return site.state_dir() / "concretized-lock"


def concretize() -> None:
    """`spack concretize` of the rendered flavors. Spack keeps a root it has
    concretized before, even when the recipe it was solved with has changed
    since (a reused checkout then installs the old, unfixed build); so when
    the inputs have changed, every root is solved again (--force). When
    nothing changed since the last solve, not even the lock, Spack would
    solve nothing: it is not started (seconds of CPU per command, each
    publish and image build)."""
    check_set_up()
    not_buildable()
    current = lock_is_current()
    if current and _solved_stamp().is_file() and _solved_stamp().read_text() == _solved_fingerprint():
        print("==> spack concretize: nothing changed since spack.lock was solved", flush=True)
        return
    force = [] if current else ["--force"]
    try:
        run("concretize", *force, quiet=True)
    except SpackError as err:
        if LEFT_OUT not in str(err):
            raise
        run(*WITHOUT_PRUNING, "concretize", *force, quiet=True)
    _concretized_stamp().write_text(recipes_fingerprint())
    _solved_stamp().write_text(_solved_fingerprint())


def install() -> None:
    """`spack install --fail-fast` of the environment, two packages at a time
    (spack.yaml), components.yaml `build_first` first: Spack's installer
    with the command's defaults, run by inside/install_in_order.py, which
    says why not by the command itself."""
    first = stack.load().components["build_first"]
    said = f"install --fail-fast (started first: {', '.join(first) or 'none named'})"
    run("python", str(INSIDE_SPACK / "install_in_order.py"), json.dumps(first), said=said)


def run(*args: str, quiet: bool = False, env: Optional[Dict[str, str]] = None, said: str = "") -> None:
    """Run a Spack command, its output shown (or kept for the error if quiet),
    in this environment (or in env); said is what the log calls it (its
    arguments unless given)."""
    cmd = command(*args)
    said = said or " ".join(args)
    print(f"==> spack {said}", flush=True)
    started = time.monotonic()
    code, out, err = commands.run_in_session(cmd, capture=quiet, env=env, stdin=subprocess.DEVNULL)
    if code != 0:
        detail = (out + err)[-4000:] if quiet else ""
        raise SpackError(f"`spack {said}` failed (exit {code})\n{detail}")
    # The build stage's time is mostly the solve's and the installs': each said.
    print(f"==> spack {said.split()[0]}: {time.monotonic() - started:.0f} s", flush=True)


def query(script: str, *args: str):
    """Run onestack/spack/inside/<script>.py in `spack python`; it prints JSON.

    These scripts read Spack's own objects (concretized specs, fetchers,
    module index) where no Spack command prints the fact we need.
    """
    cmd = command("python", str(INSIDE_SPACK / f"{script}.py"), *args)
    code, out, err = commands.run_in_session(cmd, capture=True, stdin=subprocess.DEVNULL)
    if code != 0:
        sys.stderr.write(err)
        raise SpackError(f"spack python {script}.py failed (exit {code})")
    return json.loads(out.strip().splitlines()[-1])


def _flavor_roots(specs: List[str]) -> Dict[str, Optional[dict]]:
    """inside/flavor_roots.py's answer for specs, kept beside the lock: what
    each root is comes from the lock, whether it is installed from Spack's
    install database, and with neither changed the answer is the same
    (seconds of CPU saved on every publish, image, check and report)."""
    database = paths.prefix() / "software" / ".spack-db" / "index.json"  # spack.yaml: install_tree
    key = _solved_fingerprint() + _digest([database]) + hashlib.sha256(json.dumps(specs).encode()).hexdigest()[:16]
    kept = site.state_dir() / "flavor-roots.json"
    if kept.is_file():
        answer = json.loads(kept.read_text())
        if answer["key"] == key:
            return answer["roots"]
    roots = query("flavor_roots", json.dumps(specs))
    files.write_text(kept, json.dumps({"key": key, "roots": roots}))
    return roots


def build_hashes(flavor: Flavor, roots: Dict[str, dict]) -> List[str]:
    """The installed builds of a flavor: its own and those of its CPU levels."""
    return [
        roots[spec]["hash"]
        for spec in [flavor.spack_spec, *dict(flavor.levels).values()]
        if roots.get(spec) and roots[spec]["installed"]
    ]


def installed(selected: List[Flavor]) -> Tuple[List[Flavor], Dict[str, dict]]:
    """What is installed here, the one question every later step asks: the
    flavors of selected that are built, and the concrete installed root of
    each, of its level builds, of each MPI runtime, the dispatcher and the
    preloaded libraries, by abstract spec (inside/flavor_roots.py). A flavor
    not built here is left out, and said so, as is a runtime `make test`
    does not build (components.yaml `ci_build`); another runtime missing is
    an error."""
    every_runtime = stack.load().runtimes
    runtimes = _runtimes(every_runtime, selected)
    levels = [spec for f in selected for _, spec in f.levels]
    roots = _flavor_roots(list(dict.fromkeys(f.spack_spec for f in selected)) + list(runtimes) + levels)
    _drop_optional_runtimes(roots, runtimes, {r.spec for r in every_runtime if not r.ci_build})
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


def _runtimes(every_runtime: list, selected: List[Flavor]) -> Dict[str, str]:
    """What every flavor's module may load besides its own build, by spec:
    the MPI runtimes, the dispatcher and the preloaded libraries."""
    runtimes = {r.spec: r.module_name for r in every_runtime}
    runtimes[DISPATCHER] = "the CPU dispatcher (onestack-dispatch)"
    runtimes.update({p: f"{p}, preloaded by flavors (components.yaml `preload`)" for p in preload_packages(selected)})
    return runtimes


def _drop_optional_runtimes(roots: Dict[str, dict], runtimes: Dict[str, str], optional: set) -> None:
    """Leave out of roots, and say so, a runtime not installed that `make
    test` does not build; any other runtime missing is an error."""
    for spec, module in runtimes.items():
        if roots.get(spec) and roots[spec]["installed"]:
            continue
        if spec not in optional:
            raise SpackError(f"{module}: not installed; run `make stack` to build it")
        roots.pop(spec, None)
        print(f"==> {module} is not built here, left out (`make stack` builds it)")
