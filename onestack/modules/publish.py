"""Publishing the module tree: every release is generated into a folder of its
own, checked, and only then made live by replacing one symlink (`current`).
A publish that fails or is killed leaves the live tree untouched.

Spack writes the hierarchy (`spack module lmod refresh`); what Spack lacks is
written here: the flavor modules (qe/openblas-mpich), the init script, the
spider cache and the switch between releases.
"""

import contextlib
import hashlib
import json
import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

import yaml

from onestack import data, files, paths, render, spack, stack
from onestack.errors import OnestackError
from onestack.modules import abi, dispatch, lmod
from onestack.spack import vendor
from onestack.stack.flavors import Flavor, default_version, launcher_program, version_key

TEMPLATES = paths.MODULE_TEMPLATES
COMPLETE_MARK = ".complete"


class PublishError(OnestackError):
    pass


def releases_dir() -> Path:
    return paths.modules_root() / "releases"


def current_link() -> Path:
    return paths.modules_root() / "current"


def init_script() -> Path:
    """The stable path users source; it follows the `current` link."""
    return init_of(current_link())


def init_of(release: Path) -> Path:
    """A release's own init script (bash): what loads its modules alone."""
    return release / "init" / "bash"


def complete_releases() -> List[Path]:
    """Published releases, oldest first (names sort by time)."""
    if not releases_dir().is_dir():
        return []
    return sorted(p for p in releases_dir().iterdir() if (p / COMPLETE_MARK).exists())


def current_release() -> Path:
    link = current_link()
    if not link.is_symlink():
        raise PublishError(f"no published release yet ({link} does not exist): run `make stack`")
    return link.resolve()


def _render(template: str, out: Path, mode: int = 0o644, **values) -> None:
    render.write(TEMPLATES, template, out, mode=mode, **values)


def _remove_incomplete() -> None:
    """Leftovers of publishes that failed or were killed: never live, so safe to drop."""
    if not releases_dir().is_dir():
        return
    for release in releases_dir().iterdir():
        if not (release / COMPLETE_MARK).exists():
            remove(release)


def remove(tree: Path) -> None:
    """A module tree's folder, removed with its folders made writable and
    its files' modes left alone: its entry points are hard links to the
    dispatcher in Spack's tree, one file with the live release's, and a
    removal that makes files writable first (tempfile's, where a folder
    refuses a user who is not root) changes the live release's too."""
    _make_writable(tree)
    shutil.rmtree(tree)


# `check --built`'s trees under the prefix, named for their process.
BUILT_TREE = "modules-built-"


@contextlib.contextmanager
def built_tree():
    """A module tree of its own under the prefix (whose path is checked: it
    lands in the modules), for `check --built`; removed after, and first
    the trees of such checks whose process is gone (killed)."""
    for stale in paths.prefix().glob(f"{BUILT_TREE}*"):
        pid = stale.name.removeprefix(BUILT_TREE).split("-")[0]
        # Another user's is theirs to remove (its folders refuse this one).
        if pid.isdigit() and not _alive(int(pid)) and stale.stat().st_uid == os.getuid():
            remove(stale)
    tree = Path(tempfile.mkdtemp(prefix=f"{BUILT_TREE}{os.getpid()}-", dir=paths.prefix()))
    try:
        yield tree
    finally:
        remove(tree)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


def _make_writable(tree: Path) -> None:
    for dirpath, _, _ in os.walk(tree):
        os.chmod(dirpath, 0o755)


def _make_read_only(tree: Path) -> None:
    """Users (and their scripts) cannot change a published release: its
    files, the dispatcher hard-linked from Spack's tree among them (one
    file, read-only in both places), never a symlink's target (the OS's
    mpirun, an MPI's library), which is not the release's to change."""
    for dirpath, dirnames, filenames in os.walk(tree):
        for name in filenames:
            file = Path(dirpath) / name
            mode = file.lstat()
            if stat.S_ISREG(mode.st_mode):
                file.chmod(mode.st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        os.chmod(dirpath, 0o555)


def _mark_complete(release: Path, manifest: dict) -> None:
    """Read-only first, then the mark: a release whose chmod failed is
    never marked complete (and the next publish removes it). Each on disk
    before the next step (os.sync): after a power cut, a release marked
    complete, or made live, holds whole files."""
    _make_read_only(release)
    os.sync()
    os.chmod(release, 0o755)
    files.write_text(release / COMPLETE_MARK, json.dumps(manifest, indent=1) + "\n", mode=0o444)
    os.chmod(release, 0o555)
    os.sync()


def _new_release_dir() -> Path:
    releases_dir().mkdir(parents=True, exist_ok=True)
    release = releases_dir() / time.strftime("%Y%m%d-%H%M%S")
    while release.exists():  # two publishes within one second
        time.sleep(1)
        release = releases_dir() / time.strftime("%Y%m%d-%H%M%S")
    release.mkdir()
    return release


def _spack_modules(release: Path, selected: List[Flavor], roots: Dict[str, dict]) -> Dict[str, str]:
    """Refresh Spack's hierarchy into the release; returns hash -> module name.

    Each flavor's entry points (dispatch.py) go first on PATH in the
    application module Spack writes for its install (keyed by its hash), not
    in the flavor module: that one sits in the MPI's branch of the
    hierarchy and leaves with its MPI (another MPI over a loaded flavor is
    refused: modulefiles/spack-templates/onestack/mpi.lua)."""
    root = release / "spack"
    scope = release / "spack-scope"
    scope.mkdir()
    per_install = {
        f"/{roots[f.spack_spec]['hash']}": {
            "environment": {"prepend_path": {"PATH": str(dispatch.bin_dir(release, f))}}
        }
        for f in selected
    }
    (scope / "modules.yaml").write_text(
        yaml.safe_dump({"modules": {"default": {"roots": {"lmod": str(root)}, "lmod": per_install}}})
    )
    spack.run("-C", str(scope), "module", "lmod", "refresh", "-y", "--delete-tree", quiet=True)
    index = yaml.safe_load((root / "module-index.yaml").read_text())["module_index"]
    return {h: entry["use_name"] for h, entry in index.items()}


def _core_dirs(release: Path) -> List[Path]:
    return sorted((release / "spack").glob("*/Core"))


def _module_of(names: Dict[str, str], node: dict, flavor: Flavor) -> str:
    if node["hash"] not in names:
        raise PublishError(
            f"{flavor.module_name}: Spack wrote no module for {node['name']}@{node['version']} "
            f"(hash {node['hash'][:7]}): check modulefiles/modules.yaml include/exclude"
        )
    return names[node["hash"]]


def _fingerprint(selected: List[Flavor], roots: Dict[str, dict]) -> str:
    """What a release is made of: installed hashes and the files that shape modules."""
    digest = hashlib.sha256()
    for flavor in selected:
        digest.update(f"{flavor.module_name}\n".encode())
    for spec in sorted(s for s in roots if roots[s]):
        digest.update(f"{spec} {roots[spec]['hash']}\n".encode())
    digest.update(_shape().encode())
    return digest.hexdigest()


def _shape() -> str:
    """The files that shape modules, whatever they are made of: the code that
    writes them (this package and the escaping filters) among them, since a
    change of what publish writes must make a new release."""
    digest = hashlib.sha256()
    sources = [
        *sorted(Path(__file__).parent.glob("*.py")),
        paths.REPO / "onestack" / "render.py",
        # module names, projections, settings, and what Spack writes no module of
        paths.REPO / "onestack" / "stack" / "flavors.py",
        paths.REPO / "onestack" / "spack" / "environment.py",
        paths.REPO / "modulefiles" / "modules.yaml",
        *sorted(TEMPLATES.iterdir()),
        *sorted(f for f in (paths.REPO / "modulefiles" / "spack-templates").rglob("*") if f.is_file()),
        *sorted(paths.environments_dir().glob("*.yaml")),
        vendor.vendor_file(),
        paths.site_dir() / "site.yaml",
    ]
    for file in sources:
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _flavor_modules(release: Path, selected: List[Flavor], roots: Dict[str, dict], names: Dict[str, str]) -> None:
    for flavor in selected:
        root = roots[flavor.spack_spec]
        providers = root["providers"]
        math_line = ", ".join(f"{v}={providers[v]['name']}@{providers[v]['version']}" for v in flavor.app.math_uses)
        modules = {k: _module_of(names, root[k], flavor) for k in ("compiler", "mpi")}
        modules["app"] = _module_of(names, root, flavor)
        _render(
            "flavor.lua.j2",
            release / "flavors" / flavor.app.module / flavor.name / f"{flavor.app.version}.lua",
            flavor=flavor,
            root=root,
            modules=modules,
            math_line=math_line,
            release=release.name,
            source_file=flavor.app.file.relative_to(flavor.app.file.parent.parent),
            site=stack.load().site,
            launcher_dir=_launcher_dir(release, flavor),
            dispatch=dispatch.write(release, flavor, roots),
            preload_path=flavor.preload.path(roots[flavor.preload.package]["prefix"]) if flavor.preload else "",
            runtimes=[r.module_name for r in _runtimes(roots) if flavor.mpi_abi in r.serves and r.name != flavor.mpi],
            deprecated=_deprecation(flavor),
        )


def _deprecation(flavor: Flavor) -> str:
    """The site's message for this flavor's version, where its `versions`
    deprecate it ("" where not)."""
    versions = stack.load().site.versions.get(flavor.app.module, {})
    return versions.get("deprecated", {}).get(flavor.app.version, "")


def _launcher_dir(release: Path, flavor: Flavor) -> str:
    """A folder whose mpirun is the flavor's MPI's own launcher (its
    `launcher` in components.yaml), or "" when the MPI's mpirun is right."""
    if not flavor.mpi_launcher:
        return ""
    target = _which(flavor.module_name, flavor.mpi, flavor.mpi_launcher)
    folder = release / "launchers" / flavor.mpi / "bin"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "mpirun").is_symlink():
        (folder / "mpirun").symlink_to(target)
    return str(folder)


def _defaults(release: Path, selected: List[Flavor]) -> None:
    """Each application's modules are <app>/<flavor>/<version> (Lmod's
    N/V/V): `module load qe` loads the default flavor (the application's
    default_flavor where it is published, else the first published), and
    `module load qe/<flavor>` that flavor's default version; hidden versions
    stay loadable by their full name. Lmod reads a .modulerc.lua in each
    folder of the name (not at the modulepath's top), one default per file,
    and takes a folder with one at the application's level as N/V/V."""
    site = stack.load().site
    by_app: Dict[str, List[Flavor]] = {}
    for flavor in selected:
        by_app.setdefault(flavor.app.module, []).append(flavor)
    for module, flavors in by_app.items():
        names = sorted({f.name for f in flavors})
        default = flavors[0].app.default_flavor if flavors[0].app.default_flavor in names else names[0]
        _render(
            "modulerc.lua.j2",
            release / "flavors" / module / ".modulerc.lua",
            default=f"{module}/{default}",
            hidden=[],
            site=site,
        )
        hidden = site.versions.get(module, {}).get("hidden", [])
        for name in names:
            versions = sorted({f.app.version for f in flavors if f.name == name}, key=version_key)
            # The stack's default version (the one its unversioned name
            # means everywhere) where published, else the newest published.
            marked = [f.app.version for f in flavors if f.name == name and f.default_version]
            _render(
                "modulerc.lua.j2",
                release / "flavors" / module / name / ".modulerc.lua",
                default=f"{module}/{name}/{marked[0] if marked else default_version(site, module, versions)}",
                site=site,
                hidden=[f"{module}/{name}/{v}" for v in versions if v in hidden],
            )


def _runtime_modules(release: Path, roots: Dict[str, dict]) -> List[str]:
    """mpi-runtime/<name> for each MPI offered as an ABI runtime, and for
    each translation layer (components.yaml `translators`), that is installed."""
    for runtime in _runtimes(roots):
        shim = release / "mpi-runtime" / runtime.name
        module = release / "flavors" / "mpi-runtime" / f"{runtime.name}.lua"
        root = roots[runtime.spec]
        if runtime.translator:
            # By name, not path: Open MPI's launcher started by an absolute path
            # takes its folder's parent as --prefix and puts /usr/bin first on
            # the ranks' PATH, where Debian's own pw.x (an Open MPI build) then
            # ran instead of the flavor's.
            launcher = _target_launcher(runtime)
            _which(runtime.module_name, runtime.to, launcher)
            prefix = Path(root["prefix"])
            preload = _rank_preload(runtime, prefix)
            _checked_launchers(release, runtime, shim, launcher, preload)
            _task_prolog(release, runtime, shim, preload)
            _render(
                "mpi-translator.lua.j2",
                module,
                runtime=runtime,
                root=root,
                release=release.name,
                shim_dir=shim,
                preload=preload,
                task_prolog=shim / "task-prolog",
                library_path=runtime.library_dirs(prefix),
            )
            continue
        lib, launcher, environment = _runtime_layout(runtime, root)
        abi.link_aliases(runtime.serves, lib, shim / "lib")
        _checked_launchers(release, runtime, shim, launcher)
        _render(
            "mpi-runtime.lua.j2",
            module,
            runtime=runtime,
            root=root,
            release=release.name,
            shim_dir=shim,
            vendor_env=environment,
            container_binds=_container_binds(lib, shim / "lib"),
        )
    return [runtime.module_name for runtime in _runtimes(roots)]


def _task_prolog(release: Path, runtime, shim: Path, preload: str) -> None:
    """A translator's task prolog, which srun runs in each task it starts,
    and its srun, which keeps it the step's one (a user's runs first)."""
    _render("task-prolog.sh.j2", shim / "task-prolog", mode=0o755, preload=preload)
    _render(
        "srun-prolog.sh.j2",
        shim / "bin" / "srun",
        mode=0o755,
        module=runtime.module_name,
        release=release.name,
        task_prolog=shim / "task-prolog",
    )


def _rank_preload(runtime, prefix: Path) -> str:
    """A translator's LD_PRELOAD, as a value its launchers can carry: srun's
    task prolog reads a line, LD_PRELOAD itself splits at spaces and colons."""
    paths = runtime.preload_paths(prefix)
    bad = [path for path in paths if any(c in path for c in " :\n")]
    if bad:
        raise PublishError(
            f"{runtime.module_name}: its preload {', '.join(bad)} holds a space, colon or newline, which"
            " LD_PRELOAD or srun's task prolog reads as a separator: install it under a prefix without them"
            " (ONESTACK_PREFIX)"
        )
    return ":".join(paths)


def _container_binds(lib: Path, links: Path) -> List[str]:
    """What a container started by this MPI's mpirun needs bound to load the
    host's MPI (docs/users.md): the folder of links and the tree that holds
    the MPI's libraries and the files they resolve to (a vendor MPI's folder
    is links into its wheel's)."""
    real = [os.path.realpath(library) for library in lib.glob("*.so*")]
    return [str(links), os.path.commonpath([str(lib), *real])]


def _runtime_layout(runtime, root: dict) -> Tuple[Path, Path, dict]:
    """A runtime's library folder, launcher and environment: a vendor
    library's layout (setup/vendor.yaml), else its Spack install prefix's
    (bin, lib, and its MPI's `launcher` in components.yaml, else mpirun)."""
    if root["name"] in vendor.every():
        layout = vendor.environment(root["name"])
        folder = layout["component_dir"]
        launcher = folder / vendor.every()[root["name"]]["launcher"]
        return folder / "lib", launcher, {"set": layout["set"], "prepend": layout["prepend"]}
    prefix = Path(root["prefix"])
    launcher = prefix / "bin" / launcher_program(stack.load().components["mpis"][runtime.name]["launcher"])
    prepend = [("PATH", prefix / "bin"), ("LD_LIBRARY_PATH", prefix / "lib")]
    return prefix / "lib", launcher, {"set": [], "prepend": prepend}


def _runtimes(roots: Dict[str, dict]) -> list:
    """The MPI runtimes installed here (spack.installed leaves the others out)."""
    return [runtime for runtime in stack.load().runtimes if runtime.spec in roots]


def _checked_launchers(release: Path, runtime, shim: Path, launcher, preload: str = "") -> None:
    """mpirun and mpiexec of a runtime: its MPI's launcher, after checking
    that the program's libraries resolve under it; a translator's launcher
    given its preload for the ranks."""
    for name in ("mpirun", "mpiexec"):
        _render(
            "mpirun-check.sh.j2",
            shim / "bin" / name,
            mode=0o755,
            module=runtime.module_name,
            serves=", ".join(runtime.serves),
            foreign=abi.foreign_libraries(runtime.serves),
            preload=preload,
            rank_env_option=runtime.rank_env_option,
            release=release.name,
            launcher=launcher,
        )


def _target_launcher(runtime) -> str:
    """The launcher of the MPI a translator runs its jobs on (its `launcher`
    in components.yaml, else mpirun)."""
    return launcher_program(stack.load().components["mpis"][runtime.to]["launcher"])


def _which(module: str, mpi: str, command: str) -> str:
    """Where an MPI's launcher is, or an error naming the module that needs it."""
    found = shutil.which(command)
    if found is None:
        raise PublishError(
            f"{module}: the launcher {command} of MPI '{mpi}' is not on PATH "
            "(environments/components.yaml `launcher`); install that MPI's runtime"
        )
    return found


def release_manifest(release: Path) -> dict:
    """What a complete release holds: its flavors, fingerprint and the build
    lists it was published from."""
    return json.loads((release / COMPLETE_MARK).read_text())


def _init_files(release: Path, selected: List[Flavor]) -> None:
    modulepath = ":".join(str(p) for p in [release / "flavors", *_core_dirs(release)])
    _render(
        "init-bash.j2",
        init_of(release),
        release=release.name,
        example=selected[0].module_name,
        lmod_init=lmod.init_dir(),
        modulepath=modulepath,
        modules_root=paths.modules_root(),
        lmodrc=release / "init" / "lmodrc.lua",
    )
    _render("lmodrc.lua.j2", release / "init" / "lmodrc.lua", release=release.name, cache_dir=release / "cache")


def exclusive() -> contextlib.AbstractContextManager:
    """One publish or rollback of a tree at a time: a second one would drop
    the first's release in the making as a leftover (`_remove_incomplete`),
    or race it to the `current` link; and none while images of the live
    release are pushed (push-images), which must stay live under it."""
    root = paths.modules_root()
    return files.exclusive(
        root / ".publish.lock", f"publish, rollback, make images or push-images of {root}", PublishError
    )


def _history_file() -> Path:
    return paths.modules_root() / "history"


def _history() -> List[str]:
    """The releases made live, in the order they were, the live one last.
    A tree published before the history was kept starts from its live
    release and the complete ones before it by name."""
    live = current_release().name
    if not _history_file().exists():
        return [r.name for r in complete_releases() if r.name <= live]
    names = _history_file().read_text().split()
    # The switch is one rename, the history written after it: a publish
    # stopped between the two left the live release out.
    return names if names[-1:] == [live] else [*names, live]


def _switch_current(release: Path, history: List[str]) -> None:
    """Make `release` live with one atomic rename of a symlink, and record
    the live releases (what a rollback goes back along)."""
    new_link = current_link().with_name("current.new")
    if new_link.is_symlink() or new_link.exists():
        new_link.unlink()
    new_link.symlink_to(release.relative_to(paths.modules_root()))
    os.replace(new_link, current_link())
    files.write_text(_history_file(), "".join(f"{name}\n" for name in history))


# The fault-injection point of the killed-publish test: the process kills
# itself right after the named step, as a power cut or `kill -9` would.
KILL_AFTER = "ONESTACK_PUBLISH_KILL_AFTER"
STEPS = ("hierarchy", "marked")


def _step_done(name: str) -> None:
    if os.environ.get(KILL_AFTER) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def publish(selected: List[Flavor], force: bool = False) -> Path:
    """Generate, check and switch to a new release of the module tree with the
    built flavors of selected; nothing is generated when the live release was
    made from the same inputs (unless forced)."""
    with exclusive():
        return _publish(selected, force)


def _lists() -> str:
    return "ci_build" if stack.ci_lists() else "build"


def _keeps_build_lists(live: dict, selected: List[Flavor], roots: Dict[str, dict]) -> bool:
    """Whether the live release is one of the build lists (`make stack`)
    that a release of the ci_build lists (`make test`, --ci) must not
    replace: it would take every other flavor from the users of that tree.
    Where it holds this run's very builds, shaped by the same files, it is
    this run's release too, and stays; otherwise the run is refused.
    (Releases made before the manifest named its lists name none.)"""
    if _lists() != "ci_build" or live.get("lists") != "build":
        return False
    builds = live.get("builds", {})
    same = all(builds.get(f.module_name) == spack.build_hashes(f, roots) for f in selected)
    if same and live.get("shape") == _shape():
        print(f"==> publish: release {current_release().name} of the build lists is live and holds this run's builds")
        return True
    raise PublishError(
        f"{current_release()} is live with the build lists' flavors ({len(live['flavors'])}), built or shaped "
        "otherwise than this run's; a publish of the ci_build lists (`make test`, --ci) would replace it with "
        f"fewer.\n  fix: run the tests with a prefix of their own (ONESTACK_PREFIX=..., not {paths.prefix()}), "
        "or publish the build lists here first (`make stack`)"
    )


def _check_same_site(live: dict) -> None:
    """A prefix is one site's: another site's publish there would replace
    that site's live tree (a site file copied with its prefix kept).
    (Releases made before the manifest named its site name none.)"""
    site = stack.load().site
    if live.get("site", site.name) != site.name:
        raise PublishError(
            f"{current_release()} is the live tree of site '{live['site']}'; a publish of site '{site.name}' "
            f"would replace it.\n  fix: give site '{site.name}' a prefix of its own (`prefix` in "
            f"{data.location(site.file)}, or ONESTACK_PREFIX=...)"
        )


def _publish(selected: List[Flavor], force: bool) -> Path:
    live_manifest = release_manifest(current_release()) if current_link().is_symlink() else {}
    _check_same_site(live_manifest)
    selected, roots = spack.installed([f for f in selected if f.published])
    fingerprint = _fingerprint(selected, roots)
    if _keeps_build_lists(live_manifest, selected, roots):
        return current_release()
    live = live_manifest.get("fingerprint")
    if live == fingerprint and not force:
        print(f"==> publish: release {current_release().name} is live and up to date")
        return current_release()
    _remove_incomplete()
    release = _new_release_dir()
    print(f"==> publish: generating release {release.name} beside the live tree")
    names = _spack_modules(release, selected, roots)
    _step_done("hierarchy")
    _flavor_modules(release, selected, roots, names)
    _defaults(release, selected)
    runtime_modules = _runtime_modules(release, roots)
    _init_files(release, selected)
    modulepath = [release / "flavors", *_core_dirs(release)]
    lmod.check_syntax(modulepath)
    lmod.build_spider_cache(release / "cache", modulepath)
    for flavor in selected:
        lmod.check_loads(init_of(release), flavor.versioned_name)
    manifest = {
        "flavors": [f.module_name for f in selected],
        "runtimes": runtime_modules,
        "fingerprint": fingerprint,
        "lists": _lists(),
        "site": stack.load().site.name,
        "shape": _shape(),
        # What each flavor's image must have been built from (make push-images).
        "builds": {f.module_name: spack.build_hashes(f, roots) for f in selected},
    }
    history = _history() if current_link().is_symlink() else []
    _mark_complete(release, manifest)
    _step_done("marked")
    _switch_current(release, [*history, release.name])
    print(f"==> publish: release {release.name} is live")
    return release


def _check_still_loads(release: Path) -> None:
    """An earlier release checked when it was published may have lost what
    its modules load since (a Spack install removed, a vendor layout
    replaced): it goes live again only if each of its flavors still loads."""
    for module in release_manifest(release)["flavors"]:
        try:
            lmod.check_loads(init_of(release), module)
        except lmod.LmodError as error:
            raise PublishError(
                f"release {release.name} was not made live again: {error}\n"
                "  fix: publish the current build lists instead (`make stack`)"
            ) from None


def rollback() -> Path:
    """Make the release that was live before the live one live again (not
    merely the one named before it: a release marked complete by a publish
    killed before its switch was never live)."""
    with exclusive():
        live = current_release()
        history = [name for name in _history() if (releases_dir() / name / COMPLETE_MARK).exists()]
        while history and history[-1] == live.name:
            history.pop()
        if not history:
            raise PublishError(f"release {live.name} is the first one made live here: nothing to roll back to")
        earlier = releases_dir() / history[-1]
        _check_still_loads(earlier)
        _switch_current(earlier, history)
        print(f"==> rollback: release {earlier.name} is live again (was {live.name})")
        return earlier
