"""A published flavor as a signed Apptainer image: its build context in
.generated/<site>/containers/<module>-<flavor>/ (the definition, containers/
flavor.def.j2, with the scripts and files it copies in), built by
`apptainer build`, signed with the site key, into the folder `make -s
where-images` prints.

Written here, not by `spack containerize`: its Singularity template fixes
`Bootstrap: docker` outside any block (a site without a registry of Docker
images cannot use it) and writes labels and help unescaped; and its build
stage concretizes again inside the image, where the site's externals live at
other paths, so the hashes of the site buildcache would not match. Here the
build stage installs the very hashes of the site's builds from the site
buildcache (`spack install --cache-only /<hash>`)."""

import hashlib
import os
import re
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import onestack.problems as problems
from onestack import data, files, paths, render, spack
from onestack.errors import OnestackError
from onestack.images import ImageError, apptainer, base, keys
from onestack.modules import dispatch, publish
from onestack.problems import runner
from onestack.spack import scope, vendor
from onestack.stack import DISPATCHER, site
from onestack.stack.flavors import Flavor, launcher_program

CONTAINERS = paths.REPO / "containers"
IMAGES_FILE = "containers/images.yaml"
SITE_REPO = paths.REPO / "packages"
# Where things go in the image.
# Where an image holds what it is made of: the definition (flavor.def.j2,
# dispatch.sh.j2, as `at`) and the code that writes what the image reads
# take these folders from here.
IN_IMAGE = {
    "spack": "/opt/spack",
    "spack_packages": "/opt/spack-packages",
    "site_repo": "/opt/onestack/packages",
    "setup": "/opt/onestack/setup",
    "store": "/opt/software",
    "views": "/opt/views",
    "dispatch": "/opt/onestack/dispatch",
    "test": "/opt/onestack/test",
}
STORE = IN_IMAGE["store"]
VIEW = f"{IN_IMAGE['views']}/view"
TEST_DIR = IN_IMAGE["test"]
DISPATCH_DIR = IN_IMAGE["dispatch"]
BUILDCACHE = "/opt/buildcache"  # the site buildcache, bound in while the image builds


def config() -> dict:
    return data.load(paths.data_root() / IMAGES_FILE, "images")


def images_dir() -> Path:
    """The built SIF files (`make -s where-images`)."""
    return paths.prefix() / "images"


def image_name(flavor: Flavor) -> str:
    """lmp-openblas-mpich, lmp-openblas-mpich-omp-20210929.2: its module name's."""
    return module_image(flavor.module_name).stem


def sif_path(flavor: Flavor) -> Path:
    return module_image(flavor.module_name)


def module_image(module_name: str) -> Path:
    """The image file of a flavor's module name."""
    return images_dir() / f"{module_name.replace('/', '-')}.sif"


def context_dir(flavor: Flavor) -> Path:
    return site.state_dir() / "containers" / image_name(flavor)


def _in_image(prefix: str) -> str:
    """A path of the site's install tree as it lies in the image."""
    return str(Path(STORE) / Path(prefix).relative_to(paths.prefix() / "software"))


def _closure(hashes: List[str]) -> dict:
    """What the builds link or run (installed nodes) and the externals they use."""
    merged = {"installed": {}, "externals": set()}
    for root_hash in hashes:
        found = spack.query("runtime_closure", root_hash)
        merged["installed"].update({n["hash"]: n for n in found["installed"]})
        merged["externals"].update(tuple(e) for e in found["externals"])
    return {"installed": list(merged["installed"].values()), "externals": sorted(merged["externals"])}


def _vendors(closure: dict) -> Tuple[List[str], List[Tuple[str, str]]]:
    """The vendor libraries the flavor uses (externals outside /usr):
    layouts of OS files are laid out again in the image from its own OS
    packages; layouts of PyPI wheels (Intel MPI) are copied in as they are,
    the same pinned wheels, at the same path."""
    layouts, copies = [], []
    for name, spec, prefix in closure["externals"]:
        if prefix == "/usr":
            continue
        if name not in vendor.every():
            raise ImageError(
                f"{spec} at {prefix} is neither an OS package nor a vendor library of "
                "setup/vendor.yaml: an image cannot have it"
            )
        if "pip" in vendor.every()[name]:
            copies.append((prefix, prefix))
        else:
            layouts.append(vendor.layout_script(name, prefix))
    return layouts, copies


def _elf_files(prefix: Path) -> List[Path]:
    return [path for path in prefix.rglob("*") if path.is_file() and not path.is_symlink() and files.is_elf(path)]


def _libraries(elf: Path) -> Dict[str, str]:
    """What the dynamic loader resolves for a binary: soname -> path (or "")."""
    proc = subprocess.run(["ldd", str(elf)], text=True, capture_output=True)
    return {m.group(1): m.group(2) or "" for m in re.finditer(r"^\s*(\S+) => (?:(/\S+)|not found)", proc.stdout, re.M)}


def _owner(path: str) -> str:
    """The Debian package that installed a file ("" if none did). dpkg
    records some under /lib, others under /usr/lib: both spellings are tried."""
    real = os.path.realpath(path)
    for candidate in dict.fromkeys([path, real, real.removeprefix("/usr")]):
        proc = subprocess.run(["dpkg", "-S", candidate], text=True, capture_output=True)
        if proc.returncode == 0:
            return proc.stdout.split(":")[0]
    return ""


def _siblings(package: str, sources: List[str]) -> List[str]:
    """The installed library packages built from the same source, when that
    source is one whose libraries load their siblings at run time (MKL)."""
    source = subprocess.run(
        ["dpkg-query", "-W", "-f=${source:Package}", package], text=True, capture_output=True
    ).stdout.strip()
    if source not in sources:
        return []
    listing = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${source:Package} ${db:Status-Status}\n"], text=True, capture_output=True
    ).stdout
    return [
        name
        for name, src, status in (line.split() for line in listing.splitlines())
        if src == source and status == "installed" and name.startswith("lib") and not name.endswith("-dev")
    ]


def runtime_packages(flavor: Flavor, closure: dict, copied: List[str], launcher: str) -> List[str]:
    """The OS packages the flavor's binaries load, and its MPI's launcher:
    read off the binaries (ldd, then dpkg), never listed by hand, so that
    they cannot drift from the build."""
    inside = [str(paths.prefix() / "software"), *copied]
    needed, missing = {}, []
    for node in closure["installed"]:
        for elf in _elf_files(Path(node["prefix"])):
            for soname, path in _libraries(elf).items():
                if not path:
                    missing.append(f"{soname} (needed by {elf.name})")
                elif not any(path.startswith(p) for p in inside):
                    needed[path] = soname
    if missing:
        raise ImageError(f"{flavor.module_name}: libraries not found on this host: {', '.join(sorted(set(missing)))}")
    packages = set()
    for path in [*needed, *([launcher] if launcher else [])]:
        owner = _owner(path)
        if not owner:
            raise ImageError(
                f"{flavor.module_name}: {path} belongs to no OS package and to no copied vendor "
                "library, so no image can carry it"
            )
        packages.add(owner)
    for package in sorted(packages):
        packages.update(_siblings(package, config()["dlopen_siblings"]))
    return sorted(packages | set(config()["final_packages"]))


def mpi_alternative(flavor: Flavor, mpi: dict) -> str:
    """The flavor's MPI's own launcher, by its real name (mpirun.mpich), for
    the image's `mpirun` alternative; "" for an MPI outside the OS (its own
    bin/ comes first on PATH)."""
    if mpi["prefix"] != "/usr":
        return ""
    path = str(Path(mpi["prefix"]) / "bin" / launcher_program(flavor.mpi_launcher))
    # Through the alternatives links only: their choices are what
    # update-alternatives takes (mpirun.mpich, itself a link to mpiexec.hydra).
    while os.path.islink(path) and (
        path.startswith("/etc/alternatives/") or os.readlink(path).startswith("/etc/alternatives/")
    ):
        path = os.readlink(path)
    return path


def _labels(flavor: Flavor, hashes: List[str], levels: List[Tuple[str, str]], alternative: str) -> dict:
    return {
        "org.onestack.flavor": flavor.module_name,
        "org.onestack.spack-spec": flavor.spack_spec,
        "org.onestack.spack-hashes": " ".join(hashes),
        "org.onestack.cpu-levels": " ".join(level for level, _ in levels),
        "org.onestack.mpi-abi": flavor.mpi_abi,
        "org.onestack.mpirun": alternative or "the MPI's own bin/mpirun",
        "org.onestack.spack-commit": paths.pinned("spack-pins.sh", "SPACK_COMMIT"),
    }


def _help(flavor: Flavor, problem) -> str:
    return (
        f"{flavor.app.description}\nflavor {flavor.name}: {flavor.compiler}, {flavor.mpi} MPI, {flavor.math}\n"
        f"  apptainer run <image> <arguments of {flavor.app.program}>\n"
        f"  apptainer exec <image> mpirun -n <ranks> {flavor.app.program} ...\n"
        f"  apptainer test <image>: {problem.name} on {problem['ranks']} ranks, checked"
    )


# A hybrid flavor's `{threads}` in the image (schema runtime_env `hybrid`):
# the shell variable %environment sets as its module reads it (Slurm's cpus
# per task in a job, else the OMP_NUM_THREADS the user set, else 1; 1 for
# anything but a number), quoted.
THREADS_SH = '"$onestack_threads"'


def _environment(closure: dict) -> List[Tuple[str, str, bool]]:
    """What a copied vendor library's module sets (I_MPI_ROOT, ...) or puts
    first (Intel MPI's bin/ on PATH; its lib/ on LD_LIBRARY_PATH, where
    Intel MPI's libmpi looks for the libfabric.so.1 it loads at MPI_Init),
    for the image's %environment: (name, value, prepended)."""
    settings = []
    for name, _, prefix in closure["externals"]:
        if name in vendor.every() and "pip" in vendor.every()[name]:
            layout = vendor.environment(name)
            settings += [(k, v, False) for k, v in layout["set"]]
            settings += [(k, v, True) for k, v in layout["prepend"]]
    return settings


def helper_hashes(flavor: Flavor, roots: Dict[str, dict]) -> List[str]:
    """What the image carries beside the builds: the CPU dispatcher, and the
    library the flavor preloads (components.yaml `preload`), if any."""
    return [roots[spec]["hash"] for spec in [DISPATCHER, *([flavor.preload.package] if flavor.preload else [])]]


def _preload_environment(flavor: Flavor, roots: Dict[str, dict]) -> List[Tuple[str, str, bool]]:
    if not flavor.preload:
        return []
    return [("LD_PRELOAD", flavor.preload.path(_in_image(roots[flavor.preload.package]["prefix"])), True)]


def write_context(flavor: Flavor, roots: Dict[str, dict]) -> Path:
    """The flavor's build context (written beside, then renamed into place)."""
    root = roots[flavor.spack_spec]
    builds = dispatch.levels(flavor, roots)
    builds_hashes = spack.build_hashes(flavor, roots)
    hashes = builds_hashes + helper_hashes(flavor, roots)
    # The view holds the baseline build's closure: two builds of one package
    # cannot share a view, so the level builds (and the dispatcher, static,
    # with its own x86-64 gcc-runtime) are reached through the entry points
    # only (levels.conf names their prefixes).
    closure = _closure(builds_hashes)
    in_view = closure if len(builds_hashes) == 1 else _closure([root["hash"]])
    layouts, copies = _vendors(closure)
    alternative = mpi_alternative(flavor, root["mpi"])
    out = context_dir(flavor)
    with files.replacing(out) as tmp:
        _write_setup(tmp / "setup", flavor, roots, builds, layouts)
        # The first case as this flavor runs it: its version's input, its checks not made.
        problem = problems.of_flavor(flavor, next(iter(problems.load(flavor.app.module))))
        runner.image_test(problem, tmp / "test", TEST_DIR)
        labels = _labels(flavor, hashes, builds, alternative)
        values = dict(
            flavor=flavor,
            base=base.base_image(apptainer.find()),
            spack_root=_exported(
                paths.spack_root(),
                ["bin", "etc", "lib/spack/spack", "lib/spack/_vendoring", "lib/spack/llnl", "share", "var"],
                "spack",
            ),
            spack_packages=_exported(paths.spack_packages(), ["repos"], "spack-packages"),
            site_repo=SITE_REPO,
            at=IN_IMAGE,
            recipe_index=_recipe_index(),
            context=str(out),
            vendor_copies=copies,
            build_packages=config()["build_packages"],
            roots=[f"/{h}" for h in hashes],
            in_view=[f"/{n['hash']}" for n in in_view["installed"]],
            view=VIEW,
            final_packages=runtime_packages(flavor, closure, [c for _, c in copies], alternative),
            launcher_alternative=alternative,
            help=_help(flavor, problem),
            environment=_environment(closure) + _preload_environment(flavor, roots),
            threads=THREADS_SH,
            buildcache=BUILDCACHE,
        )
        # The image carries the digest of what it is made of (its definition
        # without this label, and the files it copies): unchanged, it is not rebuilt.
        (tmp / "flavor.def").write_text(render.text(CONTAINERS, "flavor.def.j2", labels=labels, **values))
        labels["org.onestack.image-inputs"] = _digest(tmp)
        (tmp / "flavor.def").write_text(render.text(CONTAINERS, "flavor.def.j2", labels=labels, **values))
    return out


def _write_setup(setup: Path, flavor: Flavor, roots: Dict[str, dict], builds: list, layouts: List[str]) -> None:
    """What the image's build stages run from the context's setup/: apt,
    the vendor layouts, Spack's scope, and the flavor's dispatch table and
    entry points at their places in the image."""
    setup.mkdir(parents=True)
    render.write(
        CONTAINERS, "apt.sh.j2", setup / "apt.sh", components=config()["components"], updates=base.debian_updates()
    )
    render.write(CONTAINERS, "vendor-layouts.sh.j2", setup / "vendor-layouts.sh", layouts=layouts)
    _spack_scope(setup / "spack-scope")
    render.write(
        paths.MODULE_TEMPLATES,
        "levels.conf.j2",
        setup / "levels.conf",
        flavor=flavor,
        levels=[(level, _in_image(folder)) for level, folder in builds],
        rules=dispatch.rules(flavor),
        release="image",
    )
    render.write(
        CONTAINERS,
        "dispatch.sh.j2",
        setup / "dispatch.sh",
        folder=DISPATCH_DIR,
        at=IN_IMAGE,
        dispatcher=f"{_in_image(roots[DISPATCHER]['prefix'])}/bin/{dispatch.DISPATCHER_PROGRAM}",
        programs=[*dispatch.programs(flavor, builds), dispatch.CHECK],
    )


# The host's index of the recipes (spack.REPO_INDEXES), which Spack builds
# from all of them: copied after the recipes (so newer than any of
# them), the build stage's Spack reads it instead of building its own (over
# a minute of one core, docs/results.md). The recipes are the same files: the
# same commits, the same site repo.
IMAGE_MISC_CACHE = "/opt/spack-cache"


def _recipe_index() -> List[Tuple[Path, str]]:
    """(host folder, folder in the build stage) of each part of the index
    this host has built (none yet: the build stage builds it)."""
    found = [paths.spack_misc_cache() / part for part in spack.REPO_INDEXES]
    return [(folder, f"{IMAGE_MISC_CACHE}/{folder.name}") for folder in found if folder.is_dir()]


def _exported(clone: Path, what: List[str], name: str) -> Path:
    """The files of a pinned clone the build stage needs, exported once per
    commit under the cache (`git archive`: what the commit holds, without
    the checkout's links into files it lacks, which Apptainer's %files copy
    would follow and fail on)."""
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], text=True, capture_output=True)
    if head.returncode != 0:
        raise ImageError(f"{clone} is not a git clone ({head.stderr.strip()}): run `make setup` again")
    commit = head.stdout.strip()
    out = paths.cache() / "images" / f"{name}-{commit[:12]}"
    if not out.is_dir():
        with files.replacing(out) as partial:
            error = files.git_export(str(clone), commit, partial, what)
            if error:
                raise ImageError(f"`git archive` of {clone} at {commit} failed: {error}")
    return out


def _spack_scope(folder: Path) -> None:
    """The build stage's Spack configuration: install into the image's store
    from the site buildcache, with the stack's recipes (relocation may run
    their hooks)."""
    scope.write(
        folder,
        {
            "config": {"install_tree": {"root": STORE, "padded_length": 0}, "misc_cache": IMAGE_MISC_CACHE},
            # One `spack install` of every build of the flavor (one per CPU level):
            # solved together, the builds of one package conflict.
            "concretizer": {"unify": False},
            "mirrors:": {scope.BUILDCACHE_MIRROR: {"url": f"file://{BUILDCACHE}", "signed": False, "source": False}},
            "repos:": scope.recipe_repos(IN_IMAGE["site_repo"], IN_IMAGE["spack_packages"]),
        },
    )


def _digest(context: Path) -> str:
    """What an image is made of: its definition and the files it copies
    (the definition names the Spack hashes and the OS packages)."""
    digest = hashlib.sha256()
    for file in sorted(p for p in context.rglob("*") if p.is_file()):
        digest.update(file.relative_to(context).as_posix().encode() + file.read_bytes())
    return digest.hexdigest()


def _up_to_date(runner_: apptainer.Apptainer, image: Path, inputs: str, signer: str) -> bool:
    """Made from the same inputs and signed by the site key of now (a key
    replaced since has its images signed again)."""
    if not image.is_file():
        return False
    try:
        if apptainer.inspect(runner_, image).get("org.onestack.image-inputs") != inputs:
            return False
        apptainer.verify(runner_, image, signer)
        return True
    except ImageError:
        return False


def build(flavor: Flavor, roots: Dict[str, dict]) -> Path:
    """The flavor's signed SIF, rebuilt only when its inputs changed; a
    failed build leaves the previous image (or none) in place."""
    if flavor.desktop_unfit:
        raise ImageError(flavor.desktop_unfit)
    for root_hash in [*spack.build_hashes(flavor, roots), *helper_hashes(flavor, roots)]:
        spack.run(
            "buildcache", "push", "--update-index", "--unsigned", scope.BUILDCACHE_MIRROR, f"/{root_hash}", quiet=True
        )
    context = write_context(flavor, roots)
    inputs = re.search(r"org.onestack.image-inputs (\S+)", (context / "flavor.def").read_text()).group(1)
    runner_ = apptainer.find(keys.signing_env())
    image = sif_path(flavor)
    signer = keys.ensure_site_key(runner_)
    if _up_to_date(runner_, image, inputs, signer):
        print(f"==> images: {image.name} is up to date")
        return image
    print(f"==> images: building {image.name}", flush=True)

    with files.replacing(image) as partial:
        apptainer.build_into(runner_, context / "flavor.def", partial, binds=[f"{scope.buildcache_dir()}:{BUILDCACHE}"])
        apptainer.sign(runner_, partial, passphrase=keys.passphrase())
        apptainer.verify(runner_, partial, signer)
    return image


def exclusive():
    """One `make images` or `make push-images` at a time: two images would
    race on the buildcache's index and on the build contexts of .generated,
    and a push would send an image replaced after it was checked."""
    return files.exclusive(
        images_dir() / ".images.lock", f"`make images` or `push-images` in {images_dir()}", ImageError
    )


def _not_live(flavor: Flavor, roots: Dict[str, dict]) -> str:
    """Why the flavor's builds here are not those of the live release, which
    users load (its image in the images folder would pass for them): a
    flavor not published there, or built since (a publish that failed, a
    rollback). "" where they are, or where the release names no builds."""
    release = publish.current_release()
    live = publish.release_manifest(release).get("builds")
    if live is None:
        return ""
    if flavor.module_name not in live:
        return f"not in the live release ({release.name}): publish it first (make stack FLAVORS={flavor.module_name})"
    if set(live[flavor.module_name]) != set(spack.build_hashes(flavor, roots)):
        return (
            f"its builds here are not the live release's ({release.name}): publish them (make stack), or, after "
            "`make rollback`, make its image from a checkout of the commit that published the live release "
            "(docs/site-staff/releases.md)"
        )
    return ""


def build_all(selected: List[Flavor]) -> List[Path]:
    """Images of the selected flavors that are published and built here; a
    flavor that cannot have one is named with the reason, the others go on,
    and the command then fails: the previous image of a flavor whose build
    failed stays in place, but must not pass for an image of this commit."""
    built, roots = spack.installed([f for f in selected if f.published])
    for flavor in (f for f in built if f.desktop_unfit):
        print(f"==> images: no image of {flavor.module_name}: {flavor.desktop_unfit}")
    if built and all(f.desktop_unfit for f in built):
        raise ImageError("no image of the flavors asked for: they run only on the site's fabric (above)")
    built = [f for f in built if not f.desktop_unfit]
    images, refused, asked = [], [], len(built)
    # The live release unchanged (no publish or rollback) from its check to the last image.
    with publish.exclusive(), exclusive():
        for flavor, why in [(f, _not_live(f, roots)) for f in built]:
            if why:
                refused.append(f"{flavor.module_name}: {why}")
                print(f"==> images: no image of {flavor.module_name}: {why}")
                built.remove(flavor)
        for flavor in built:
            try:
                images.append(build(flavor, roots))
            except OnestackError as err:  # a Spack, problem or input error of this flavor's alone too
                refused.append(f"{flavor.module_name}: {err}")
                print(f"==> images: no image of {flavor.module_name}: {err}")
    if refused:
        raise ImageError(f"{len(refused)} of {asked} images could not be built:\n" + "\n".join(refused))
    return images
