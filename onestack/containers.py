"""Container images of the published flavors (containers/images.yaml).

Each flavor gets a build context, .generated/containers/<module>-<flavor>/:
the Singularity/Apptainer definition that `spack containerize` writes from a
manifest made of the flavor's data (a real site runs `apptainer build` there),
the site's recipes and the flavor's test problem.

Apptainer is not obtainable here, so the SIF is assembled from the same parts
as the definition's final stage: the OS from debootstrap with the packages the
definition lists, the flavor's Spack installs relocated to /opt/software from
the buildcache (what `spack ci` pushes too), the files Apptainer keeps under
/.singularity.d/, then a gzip squashfs and siftool. The image is replaced
atomically: users never see a half-written one.
"""

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import yaml

from onestack import flavors, paths, problems, publish, sif, site, spack
from onestack.flavors import Flavor

CONTAINERS = paths.REPO / "containers"
IMAGES_FILE = CONTAINERS / "images.yaml"
PINS = paths.REPO / "setup" / "spack-pins.sh"
APT_PACKAGES = paths.REPO / "setup" / "apt-packages.txt"
SITE_REPO = paths.REPO / "packages"
# Where a definition's pieces go in the image (Spack's template fixes /opt/software, /opt/views).
TEST_DIR = "/opt/onestack/test"
STORE = "/opt/software"
VIEW = "/opt/views/view"


class ContainerError(RuntimeError):
    """A flavor that cannot become an image, or an image step that failed."""


def config() -> dict:
    return flavors.load_data(IMAGES_FILE, "images")


def images_dir() -> Path:
    """The built SIF files (`make -s where-images`)."""
    return paths.prefix() / "images"


def image_name(flavor: Flavor) -> str:
    return f"{flavor.app.module}-{flavor.name}"


def sif_path(flavor: Flavor) -> Path:
    return images_dir() / f"{image_name(flavor)}.sif"


def context_dir(flavor: Flavor) -> Path:
    return paths.generated_dir() / "containers" / image_name(flavor)


def spack_pins() -> Dict[str, str]:
    """The pinned Spack and builtin repo (setup/spack-pins.sh is the one place)."""
    text = PINS.read_text()
    found = {key: re.search(rf"{key}(?::=|=)([^\s}}\"]+)", text).group(1)
             for key in ("SPACK_COMMIT", "SPACK_PACKAGES_COMMIT", "ONESTACK_SPACK_URL",
                         "ONESTACK_SPACK_PACKAGES_URL")}
    return found


def _closure(root_hash: str) -> dict:
    return spack.query("runtime_closure", root_hash)


# Where the build stage lays out vendor libraries (setup/vendor.yaml).
VENDOR_ROOT = "/opt/vendor"


def _externals(flavor: Flavor, closure: dict) -> Tuple[dict, str]:
    """The site's external declarations of what the flavor was built with,
    and the shell lines that lay out its vendor libraries: in the build
    stage the OS externals are the same OS packages, and a vendor layout of
    OS files (MKL) is laid out again from them. A vendor library from PyPI
    (Intel MPI) is no OS package: such a flavor has no image."""
    site_packages = yaml.safe_load((paths.site_scope() / "packages.yaml").read_text())["packages"]
    declared, layouts = {}, []
    for name, spec, prefix in closure["externals"]:
        if prefix == "/usr":
            if name in site_packages:
                declared[name] = {"externals": [e for e in site_packages[name]["externals"]
                                                if e["prefix"] == "/usr"]}
            continue
        try:
            layouts.append(site.layout_script(name, f"{VENDOR_ROOT}/{name}"))
        except (KeyError, ValueError) as err:
            raise ContainerError(f"{flavor.module_name}: its {spec} at {prefix} has no OS packages an image "
                                 f"could install ({err}); only flavors built from OS packages and vendor "
                                 f"layouts of them have images") from None
        declared[name] = {"externals": site.externals_of(name, f"{VENDOR_ROOT}/{name}"), "buildable": False}
    return declared, "#!/bin/sh\nset -e\n" + "".join(layouts)


def _elf_files(prefix: Path) -> List[Path]:
    found = []
    for path in prefix.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    found.append(path)
    return found


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
    source is one whose libraries load their siblings at run time."""
    source = subprocess.run(["dpkg-query", "-W", "-f=${source:Package}", package],
                            text=True, capture_output=True).stdout.strip()
    if source not in sources:
        return []
    listing = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${source:Package} ${db:Status-Status}\n"],
                             text=True, capture_output=True).stdout
    return [name for name, src, status in (line.split() for line in listing.splitlines())
            if src == source and status == "installed" and name.startswith("lib") and not name.endswith("-dev")]


def mpi_launcher(flavor: Flavor, mpi_prefix: str) -> str:
    """The flavor's MPI's own launcher, by its real name (e.g. mpirun.mpich):
    an image's `mpirun` must be it, whichever other MPI a package pulls in
    (Debian's ScaLAPACK for MPICH depends on the default MPI, Open MPI)."""
    path = str(Path(mpi_prefix) / "bin" / (flavor.mpi_launcher or "mpirun"))
    # Through the alternatives links only: their choices are what
    # update-alternatives takes (mpirun.mpich, itself a link to mpiexec.hydra).
    while os.path.islink(path) and (path.startswith("/etc/alternatives/") or
                                    os.readlink(path).startswith("/etc/alternatives/")):
        path = os.readlink(path)
    return path


def runtime_packages(flavor: Flavor, closure: dict, launcher: str) -> List[str]:
    """The OS packages the flavor's binaries load, and its MPI's launcher:
    the definition's final-stage packages. Read off the binaries (ldd, then
    dpkg), not listed by hand, so that they cannot drift from the build."""
    store = str(paths.prefix() / "software")
    needed, missing = {}, []
    for node in closure["installed"]:
        for elf in _elf_files(Path(node["prefix"])):
            for soname, path in _libraries(elf).items():
                if not path:
                    missing.append(f"{soname} (needed by {elf.name})")
                elif not path.startswith(store):
                    needed[path] = soname
    if missing:
        raise ContainerError(f"{flavor.module_name}: libraries not found on this host: {', '.join(sorted(set(missing)))}")
    packages = set()
    for path in [*needed, launcher]:
        owner = _owner(path)
        if not owner:
            raise ContainerError(f"{flavor.module_name}: {path} belongs to no OS package, so no image "
                                 f"can install it (is it a vendor layout of setup/vendor.yaml?)")
        packages.add(owner)
    sources = config()["dlopen_siblings"]
    for package in sorted(packages):
        packages.update(_siblings(package, sources))
    return sorted(packages)


def _build_stage_packages() -> List[str]:
    """A build host's packages (setup/apt-packages.txt) plus the stage's own."""
    lines = (line.split("#")[0].strip() for line in APT_PACKAGES.read_text().splitlines())
    return [p for p in lines if p] + config()["build_stage_packages"]


def _labels(flavor: Flavor, closure: dict, launcher: str) -> Dict[str, str]:
    pins = spack_pins()
    generations = flavors.cpu_generations()
    paths_note = f"{generations[0]['spack_target']} baseline"
    if flavor.fat_flags:
        paths_note += f"; compiler paths {flavor.fat_flags}"
    paths_note += (f"; {', '.join(g['name'] for g in generations[1:])} through {flavor.math}'s "
                   f"run-time dispatch")
    return {
        "org.onestack.flavor": flavor.module_name,
        "org.onestack.spack-spec": flavor.spack_spec(),
        "org.onestack.spack-hashes": " ".join(f"{n['name']}/{n['hash']}" for n in closure["installed"]),
        "org.onestack.cpu-paths": paths_note,
        "org.onestack.mpi-abi": flavor.mpi_abi,
        "org.onestack.mpirun": launcher,
        "org.onestack.spack-commit": pins["SPACK_COMMIT"],
        "org.onestack.spack-url": pins["ONESTACK_SPACK_URL"],
        "org.onestack.os-components": " ".join(config()["components"]),
    }


def manifest(flavor: Flavor, closure: dict, externals: dict, final_packages: List[str], launcher: str) -> dict:
    """The spack.yaml `spack containerize` turns into the definition."""
    pins = spack_pins()
    problem = test_problem(flavor)
    return {"spack": {
        "specs": [flavor.spack_spec()],
        "repos": {
            "onestack": "/opt/onestack/packages/spack_repo/onestack",
            "builtin": {"git": pins["ONESTACK_SPACK_PACKAGES_URL"], "commit": pins["SPACK_PACKAGES_COMMIT"]},
        },
        "packages": externals,
        "concretizer": {"unify": True},
        # The flavor's runtime settings (environments/components.yaml), as its module sets them.
        "env_vars": {"set": {name: value for name, value, _ in flavor.env}},
        "container": {
            "format": "singularity",
            "template": "onestack-singularity.def",
            "images": {"build": config()["os"], "final": config()["os"]},
            "os_packages": {"command": "apt", "update": True,
                            "build": _build_stage_packages(), "final": final_packages},
            "labels": _labels(flavor, closure, launcher),
            "singularity": {
                "runscript": f'exec {flavor.app.program} "$@"',
                "test": f"exec {TEST_DIR}/run",
                "help": (f"{flavor.app.description}, flavor {flavor.name} ({flavor.mpi} MPI, {flavor.math}).\n"
                         f"  apptainer run <image> <arguments of {flavor.app.program}>\n"
                         f"  Test: apptainer test <image> runs {problem['case']} with "
                         f"{problem['ranks']} ranks."),
            },
        },
    }}


def test_problem(flavor: Flavor) -> dict:
    """The application's first test problem (tests/problems/<app>/), named."""
    case, problem = next(iter(problems.load(flavor.app.module).items()))
    return {**problem, "case": f"{flavor.app.module}/{case}"}


def _check_script(problem: dict, reference: str) -> str:
    """The image's own check of the problem's output, in Perl (the minimal OS
    has perl-base, no Python): the same checks as onestack/problems.py,
    including one job of `ranks` ranks (another MPI's mpirun starts singletons)."""
    rows = [f"  ['ranks', q{{{problem['ranks_pattern']}}}, 'all', {problem['ranks']}, 0],"]
    for name, how in problem["checks"].items():
        if "at_most" in how:
            rows.append(f"  [q{{{name}}}, q{{{how['pattern']}}}, 'at_most', {how['at_most']}, 0],")
        else:
            expected = problems.values(how["pattern"], reference)[-1]
            rows.append(f"  [q{{{name}}}, q{{{how['pattern']}}}, 'near', {expected}, {how['tolerance']}],")
    return "\n".join([
        "#!/usr/bin/perl",
        f"# Checks {problem['case']} (generated by onestack/containers.py from its problem file).",
        "use strict; use warnings;",
        "my @checks = (  # name, pattern, kind, reference, tolerance",
        *rows,
        ");",
        "local $/; open(my $fh, '<', $ARGV[0]) or die \"no output $ARGV[0]\\n\"; my $out = <$fh>;",
        "my $failed = 0;",
        "for my $c (@checks) {",
        "  my ($name, $pattern, $kind, $ref, $tol) = @$c;",
        "  my @got = ($out =~ /$pattern/mg);",
        "  my $v = @got ? $got[-1] : 'nan';",
        "  my $ok = @got && ($kind eq 'all' ? !grep({ $_ != $ref } @got)",
        "                  : $kind eq 'at_most' ? $v <= $ref : abs($v - $ref) <= $tol);",
        "  printf(\"%s: %s (%s %s) %s\\n\", $name, join(',', @got) || 'none', $kind, $ref, $ok ? 'ok' : 'FAILED');",
        "  $failed ||= !$ok;",
        "}",
        "exit $failed;",
        "",
    ])


def _run_script(problem: dict, rundir: str) -> str:
    """%test: the problem in a scratch copy, then its check."""
    env = "".join(f"export {k}=\"{v.format(workdir='$work')}\"\n" for k, v in problem.get("env", {}).items())
    output = problem.get("output", "onestack-test.out")
    return (
        "#!/bin/sh\n"
        f"# The image's self-test (apptainer test): {problem['case']} of onestack's tests/problems.\n"
        "set -e\n"
        "work=$(mktemp -d)\n"
        f"cp -R {TEST_DIR}/files/. \"$work\"\n"
        f"cd \"$work/{rundir}\"\n"
        f"{env}"
        "# Open MPI refuses root unless told twice (CI containers run as root).\n"
        "[ \"$(id -u)\" != 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n"
        f"{problems.command_line(problem)} > onestack-test.out 2>&1 || {{ tail -n 30 onestack-test.out; exit 1; }}\n"
        f"exec perl {TEST_DIR}/check.pl {output}\n"
    )


def _write_test(flavor: Flavor, out: Path) -> None:
    problem = test_problem(flavor)
    files = out / "files"
    rundir = problems.prepare(problem, files)
    reference = (files / problem["reference"]).read_text() if "reference" in problem else ""
    (out / "check.pl").write_text(_check_script(problem, reference))
    (out / "run").write_text(_run_script(problem, str(rundir.relative_to(files))))
    (out / "run").chmod(0o755)


def write_context(flavor: Flavor, root: dict) -> Path:
    """The flavor's build context: spack.yaml, Singularity.def (from `spack
    containerize`), the site's recipes and the test problem."""
    closure = _closure(root["hash"])
    launcher = mpi_launcher(flavor, root["mpi"]["prefix"])
    final_packages = runtime_packages(flavor, closure, launcher)
    out = context_dir(flavor)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    externals, vendor_layouts = _externals(flavor, closure)
    (tmp / "spack.yaml").write_text(yaml.safe_dump(manifest(flavor, closure, externals, final_packages, launcher),
                                                   sort_keys=False))
    (tmp / "vendor-layouts.sh").write_text(vendor_layouts)
    shutil.copytree(SITE_REPO, tmp / "packages", ignore=shutil.ignore_patterns("__pycache__"))
    _write_test(flavor, tmp / "test")
    # template_dirs: where `container: template:` finds onestack's additions.
    proc = subprocess.run([str(paths.spack_root() / "bin" / "spack"), "-c",
                           f"config:template_dirs:[{CONTAINERS}]", "containerize"],
                          cwd=tmp, text=True, capture_output=True)
    if proc.returncode != 0:
        raise ContainerError(f"{flavor.module_name}: spack containerize failed:\n{proc.stderr[-3000:]}")
    (tmp / "Singularity.def").write_text(proc.stdout)
    (tmp / "closure.json").write_text(json.dumps(closure))
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return out


def push_to_buildcache(root_hash: str) -> None:
    """The flavor's installs into the site buildcache (what `spack ci` jobs
    push too); what is there already is skipped."""
    spack.run("buildcache", "push", "--update-index", site.BUILDCACHE_MIRROR, f"/{root_hash}", quiet=True)


def _image_scope(work: Path) -> Path:
    """A Spack config scope that installs into the image's /opt/software from
    the site buildcache, with the stack's recipes (relocation runs hooks)."""
    scope = work / "spack-scope"
    scope.mkdir()
    repos = yaml.safe_load((paths.REPO / "spack.yaml").read_text())["spack"]["repos:"]
    config = {
        "config": {"config": {"install_tree": {"root": STORE, "padded_length": 0}}},
        "mirrors": {"mirrors:": {site.BUILDCACHE_MIRROR: {"url": f"file://{site.buildcache_dir()}",
                                                          "signed": site.buildcache_signed()}}},
        "repos": {"repos:": {name: os.path.expandvars(path) if not path.startswith("packages/") else
                             str(paths.REPO / path) for name, path in repos.items()}},
    }
    for name, data in config.items():
        (scope / f"{name}.yaml").write_text(yaml.safe_dump(data))
    return scope


def _spack_in_image(root: Path, scope: Path, *args: str) -> str:
    """Spack run with the image's /opt bound over the host's: the installs
    land in the image with the paths they have there (Spack relocates them)."""
    argv = ["bwrap", "--dev-bind", "/", "/", "--bind", str(root / "opt"), "/opt",
            str(paths.spack_root() / "bin" / "spack"), "-C", str(scope), *args]
    proc = subprocess.run(argv, text=True, capture_output=True)
    if proc.returncode != 0:
        raise ContainerError(f"spack {' '.join(args)} into the image failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout


def _os_root(root: Path, packages: List[str], launcher: str) -> None:
    """The final stage's OS: debootstrap's minimal system with the packages,
    `mpirun` being the flavor's MPI's launcher."""
    argv = ["debootstrap", "--variant=minbase", f"--components={','.join(config()['components'])}",
            f"--include={','.join(packages)}", config()["suite"], str(root)]
    proc = subprocess.run(argv, text=True, capture_output=True)
    if proc.returncode != 0:
        raise ContainerError(f"debootstrap failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    proc = subprocess.run(["bwrap", "--bind", str(root), "/", "--proc", "/proc", "--dev", "/dev",
                           "update-alternatives", "--quiet", "--set", "mpirun", launcher],
                          text=True, capture_output=True)
    if proc.returncode != 0:
        raise ContainerError(f"could not make {launcher} the image's mpirun: {proc.stderr.strip()}")
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (root / cache).glob("*"):
            if item.is_file():
                item.unlink()


def _strip(root: Path) -> None:
    """As the definition does (Spack's `strip: true`): binaries without symbols."""
    files = [str(f) for f in _elf_files(root / STORE.lstrip("/"))]
    if files:
        subprocess.run(["strip", "--strip-unneeded", *files], capture_output=True)


def _environment(flavor: Flavor) -> str:
    """What `spack env activate --sh` gives the definition's image: the
    flavor's view on the paths, and its runtime settings."""
    lines = [f"export PATH={VIEW}/bin:$PATH",
             f"export MANPATH={VIEW}/share/man:${{MANPATH:-}}"]
    lines += [f"export {name}={shlex.quote(value)}" for name, value, _ in flavor.env]
    return "# The flavor's view and runtime settings (onestack/containers.py).\n" + "\n".join(lines) + "\n"


def _inputs_digest(context: Path) -> str:
    """What an image is made of: its definition and test files (the
    definition carries the Spack hashes and the OS packages)."""
    digest = hashlib.sha256()
    for file in sorted(p for p in context.rglob("*") if p.is_file() and "packages" not in p.parts):
        digest.update(file.relative_to(context).as_posix().encode() + file.read_bytes())
    return digest.hexdigest()


def build_image(flavor: Flavor, root: dict) -> Path:
    """The flavor's SIF file, rebuilt only when its inputs changed."""
    context = write_context(flavor, root)
    spec = yaml.safe_load((context / "spack.yaml").read_text())["spack"]["container"]
    labels = {**spec["labels"], "org.onestack.image-inputs": _inputs_digest(context)}
    out = sif_path(flavor)
    if out.is_file() and json.loads(sif.dump(out, "JSON.Generic")).get("org.onestack.image-inputs") == labels[
            "org.onestack.image-inputs"]:
        print(f"==> images: {out.name} is up to date")
        return out
    print(f"==> images: building {out.name}", flush=True)
    push_to_buildcache(root["hash"])
    work = paths.cache() / "image-build" / image_name(flavor)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    image_root = work / "root"
    _os_root(image_root, spec["os_packages"]["final"], labels["org.onestack.mpirun"])
    scope = _image_scope(work)
    _spack_in_image(image_root, scope, "install", "--cache-only", "--no-check-signature", f"/{root['hash']}")
    # The runtime closure only, as the definition's environment view links it.
    closure = json.loads((context / "closure.json").read_text())
    _spack_in_image(image_root, scope, "view", "--dependencies", "no", "symlink", "-i", VIEW,
                    *(f"/{node['hash']}" for node in closure["installed"]))
    os.symlink(VIEW, image_root / "opt" / "view")  # the definition's former view location
    _strip(image_root)
    shutil.copytree(context / "test", image_root / TEST_DIR.lstrip("/"))
    shutil.copy(context / "spack.yaml", image_root / "opt" / "spack-environment.yaml")
    sif.write_metadata(image_root, (context / "Singularity.def").read_text(), labels,
                       spec["singularity"]["runscript"], spec["singularity"]["test"],
                       _environment(flavor))
    images_dir().mkdir(parents=True, exist_ok=True)
    partial = work / out.name
    sif.assemble(image_root, context / "Singularity.def", labels, partial)
    partial.replace(out)
    shutil.rmtree(work)
    return out


def build(selected: List[Flavor]) -> List[Path]:
    """Images of the selected flavors that are published and built here; a
    flavor that cannot have one is named with the reason, the others go on."""
    built, roots = publish.installed_roots([f for f in selected if f.published])
    images, refused = [], []
    for flavor in built:
        try:
            images.append(build_image(flavor, roots[flavor.spack_spec()]))
        except ContainerError as err:
            refused.append(str(err))
            print(f"==> images: no image: {err}")
    if refused and not images:
        raise ContainerError("no image could be built:\n" + "\n".join(refused))
    return images
